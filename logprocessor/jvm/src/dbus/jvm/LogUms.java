package dbus.jvm;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import java.util.List;
import java.util.regex.Pattern;

/**
 * UMS messages of log tables (logprocessor/logums.py is the reference): the bytes {@code logums.message_json}
 * gives for a record's rows of each table (Python's compact {@code json.dumps}), shared by {@link LogUmsUdf} (over
 * the rules UDF's rows) and {@link LogRecordUdf} (the whole record in one call).
 *
 * <p>Per record: {@link #builder} with the record's partition, offset, {@code ums_ts_} and the tables' namespaces;
 * {@link Builder#row} per row a table took, in order (a row's index is its position among the table's rows of the
 * record; a row whose {@code ums_id_} would be out of range is left out, a dead letter elsewhere); {@link
 * Builder#finish}: per table its message, or null when it took no row. A DOUBLE value is written as Python's
 * {@code repr} writes the double (the shortest digits that read back, nearest the value), or null when it is not a
 * finite decimal number; the other values as JSON strings escaped as Python escapes them.
 */
final class LogUms implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    static final int MAX_PARTITION = 255;
    static final long MAX_OFFSET = (1L << 43) - 1;
    static final int MAX_INDEX = 4095;
    static final Pattern DOUBLE = Pattern.compile("[+-]?(?:[0-9]+\\.?[0-9]*|\\.[0-9]+)(?:[eE][+-]?[0-9]+)?");
    static final String SEPARATOR = "\0";

    final String head;
    final String[] tables;
    final String[] middles;
    final boolean[][] doubles;

    /**
     * @param head the text of a message before its quoted namespace
     * @param tables the tables, {@link #SEPARATOR} between them
     * @param middles per table, the text between the namespace and the first tuple, {@link #SEPARATOR} between
     * @param types per table, one letter per saveAs column ({@code d}: a DOUBLE, else a string), {@link #SEPARATOR}
     *     between
     */
    LogUms(String head, String tables, String middles, String types) {
        this.head = head;
        this.tables = tables.split(SEPARATOR, -1);
        this.middles = middles.split(SEPARATOR, -1);
        String[] t = types.split(SEPARATOR, -1);
        if (this.middles.length != this.tables.length || t.length != this.tables.length) {
            throw new IllegalArgumentException("LogUms: tables, middles and types differ in number");
        }
        this.doubles = new boolean[t.length][];
        for (int k = 0; k < t.length; k++) {
            doubles[k] = new boolean[t[k].length()];
            for (int i = 0; i < t[k].length(); i++) doubles[k][i] = t[k].charAt(i) == 'd';
        }
    }

    /** The table's position, or -1 when the rule set has no such table. */
    int table(String table) {
        for (int k = 0; k < tables.length; k++) if (tables[k] == table || tables[k].equals(table)) return k;
        return -1;
    }

    /** Whether (partition, offset) can be held by {@code ums_id_}. */
    static boolean inRange(int partition, long offset) {
        return partition >= 0 && partition <= MAX_PARTITION && offset >= 0 && offset <= MAX_OFFSET;
    }

    /** logums.ums_id_problem: why the coordinates have no {@code ums_id_}, or null. */
    static String idProblem(long partition, long offset, long index) {
        if (partition < 0 || partition > MAX_PARTITION)
            return "partition " + partition + " is outside 0.." + MAX_PARTITION + ", the partitions ums_id_ can hold";
        if (offset < 0 || offset > MAX_OFFSET)
            return "offset " + offset + " is outside 0.." + MAX_OFFSET + ", the offsets ums_id_ can hold";
        if (index < 0 || index > MAX_INDEX)
            return "row " + index + " of the record is outside 0.." + MAX_INDEX + ", the rows ums_id_ can number";
        return null;
    }

    static long umsId(int p, long o, int i) {
        return ((long) p << 55) | (o << 12) | i;
    }

    Builder builder(int partition, long offset, String ts, String[] namespaces) {
        return new Builder(partition, offset, ts, namespaces);
    }

    /** The messages of one record (see the class comment). */
    final class Builder {
        private final int p;
        private final long o;
        private final String ts;
        private final String[] namespaces;
        private final boolean ok;
        private final StringBuilder[] built = new StringBuilder[tables.length];
        private final int[] indexes = new int[tables.length];
        private final int[] counts = new int[tables.length];

        Builder(int p, long o, String ts, String[] namespaces) {
            this.p = p;
            this.o = o;
            this.ts = ts;
            this.namespaces = namespaces;
            this.ok = inRange(p, o);
        }


        /** A row table {@code k} took (its values in saveAs order; fewer: the missing ones null). */
        void row(int k, List<String> values) {
            if (!ok || k < 0) return;
            int i = indexes[k]++;
            if (i > MAX_INDEX) return;
            StringBuilder b = built[k];
            if (b == null) {
                built[k] = b = new StringBuilder(512);
                b.append(head);
                quote(b, namespaces[k]);
                b.append(middles[k]);
            } else {
                b.append(',');
            }
            counts[k]++;
            tuple(b, doubles[k], p, o, i, ts, values);
        }

        /** Per table, its message or null. */
        String[] finish() {
            String[] out = new String[tables.length];
            for (int k = 0; k < tables.length; k++) out[k] = built[k] == null ? null : built[k].append("]}").toString();
            return out;
        }

        /** The tuples of table {@code k}'s message. */
        int count(int k) {
            return counts[k];
        }
    }

    static void tuple(StringBuilder b, boolean[] doubles, int p, long o, int i, String ts, List<String> values) {
        long position = (long) p * 10_000_000_000_000L + o;
        b.append("{\"tuple\":[\"").append(umsId(p, o, i)).append("\",\"").append(ts).append("\",\"i\",\"");
        uid(b, position, i);
        b.append('"');
        int have = values == null ? 0 : values.size();
        for (int c = 0; c < doubles.length; c++) {
            String v = c < have ? values.get(c) : null;
            b.append(',');
            if (v == null) b.append("null");
            else if (doubles[c]) {
                String d = pythonDouble(v);
                b.append(d == null ? "null" : d);
            } else quote(b, v);
        }
        b.append("]}");
    }

    static void uid(StringBuilder b, long position, int index) {
        if (position == 0) {
            b.append(index);
            return;
        }
        b.append(position);
        String tail = Integer.toString(index);
        for (int k = tail.length(); k < 6; k++) b.append('0');
        b.append(tail);
    }

    /** logums.ums_ts: {@code yyyy-MM-dd HH:mm:ss.SSS} of epoch ms (0 .. 9998-12-31) in the zone. */
    static String umsTs(long epochMs, ZoneId zone) {
        int offset = zone.getRules().getOffset(Instant.ofEpochMilli(epochMs)).getTotalSeconds();
        long local = epochMs + offset * 1000L;
        long days = Math.floorDiv(local, 86_400_000L);
        int ms = (int) Math.floorMod(local, 86_400_000L);
        LocalDate date = LocalDate.ofEpochDay(days);
        char[] c = new char[23];
        int y = date.getYear();
        if (y < 0 || y > 9999) return TS.format(Instant.ofEpochMilli(epochMs).atZone(zone));
        two(c, 0, y / 100);
        two(c, 2, y % 100);
        c[4] = '-';
        two(c, 5, date.getMonthValue());
        c[7] = '-';
        two(c, 8, date.getDayOfMonth());
        c[10] = ' ';
        two(c, 11, ms / 3_600_000);
        c[13] = ':';
        two(c, 14, ms / 60_000 % 60);
        c[16] = ':';
        two(c, 17, ms / 1000 % 60);
        c[19] = '.';
        int f = ms % 1000;
        c[20] = (char) ('0' + f / 100);
        two(c, 21, f % 100);
        return new String(c);
    }

    private static void two(char[] c, int at, int v) {
        c[at] = (char) ('0' + v / 10);
        c[at + 1] = (char) ('0' + v % 10);
    }

    private static final DateTimeFormatter TS = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss.SSS");

    /** A JSON string as Python's {@code json.dumps(ensure_ascii=False)} writes it. */
    static void quote(StringBuilder b, String s) {
        b.append('"');
        int n = s.length();
        for (int k = 0; k < n; k++) {
            char c = s.charAt(k);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                case '\b' -> b.append("\\b");
                case '\f' -> b.append("\\f");
                default -> {
                    if (c < 0x20) {
                        b.append("\\u00").append(Character.forDigit(c >> 4, 16)).append(Character.forDigit(c & 15, 16));
                    } else b.append(c);
                }
            }
        }
        b.append('"');
    }

    /** A DOUBLE value as Python's {@code repr} of its double, or null when it is not a finite decimal number. */
    static String pythonDouble(String text) {
        if (!DOUBLE.matcher(text).matches()) return null;
        double x;
        try {
            x = Double.parseDouble(text);
        } catch (NumberFormatException e) {
            return null;
        }
        if (Double.isNaN(x) || Double.isInfinite(x)) return null;
        String fast = shortRepr(text, x);
        return fast != null ? fast : repr(x);
    }

    /**
     * Python's {@code repr} of {@code x} read from {@code text} (a DOUBLE's text) when the text has at most 15
     * significant digits: distinct decimals of 15 digits are distinct doubles (DBL_DIG), so the shortest digits
     * that read back are the text's own; null otherwise (then {@link #repr} searches).
     */
    static String shortRepr(String text, double x) {
        if (x == 0) return null;
        int n = text.length(), i = 0;
        if (i < n && (text.charAt(i) == '+' || text.charAt(i) == '-')) i++;
        char[] digits = new char[16];
        int count = 0, point = 0; // point: the decimal exponent of the first kept digit's place, counted below
        boolean seenPoint = false, leading = true;
        int intDigits = 0;
        for (; i < n; i++) {
            char c = text.charAt(i);
            if (c == '.') {
                seenPoint = true;
                continue;
            }
            if (c < '0' || c > '9') break;
            if (leading && c == '0') {
                if (seenPoint) point--;
                continue;
            }
            if (leading) {
                leading = false;
                if (seenPoint) point--;
            } else if (!seenPoint) intDigits++;
            if (count == 16) return null;
            digits[count++] = c;
        }
        int exp = 0;
        if (i < n) { // [eE][+-]?digits
            i++;
            boolean neg = false;
            if (i < n && (text.charAt(i) == '+' || text.charAt(i) == '-')) neg = text.charAt(i++) == '-';
            int e = 0;
            for (; i < n; i++) {
                e = e * 10 + (text.charAt(i) - '0');
                if (e > 400) return null;
            }
            exp = neg ? -e : e;
        }
        while (count > 0 && digits[count - 1] == '0') count--;
        if (count == 0 || count > 15) return null;
        // the value is 0.d1d2... * 10^(q): with leading integer digits, the first digit sits at 10^intDigits
        int exponent = (point < 0 ? point : intDigits) + exp; // x = d.ddd * 10^exponent
        if (exponent > 300 || exponent < -300) return null;
        return layout(x < 0, new String(digits, 0, count), exponent);
    }

    /** Python's {@code repr} of a finite double. */
    static String repr(double x) {
        boolean negative = (Double.doubleToRawLongBits(x) & Long.MIN_VALUE) != 0;
        if (x == 0) return negative ? "-0.0" : "0.0";
        BigDecimal exact = new BigDecimal(Math.abs(x));
        BigDecimal found = null;
        for (int p = 1; p <= 17 && found == null; p++) {
            BigDecimal down = exact.round(new MathContext(p, RoundingMode.DOWN));
            BigDecimal up = exact.round(new MathContext(p, RoundingMode.UP));
            boolean downOk = Double.parseDouble(down.toString()) == Math.abs(x);
            boolean upOk = Double.parseDouble(up.toString()) == Math.abs(x);
            if (downOk && upOk) {
                int cmp = exact.subtract(down).compareTo(up.subtract(exact));
                found = cmp < 0 ? down : cmp > 0 ? up : exact.round(new MathContext(p, RoundingMode.HALF_EVEN));
            } else if (downOk) found = down;
            else if (upOk) found = up;
        }
        if (found == null) found = exact.round(new MathContext(17, RoundingMode.HALF_EVEN));
        BigDecimal stripped = found.stripTrailingZeros();
        String digits = stripped.unscaledValue().toString();
        int exponent = digits.length() - 1 - stripped.scale(); // x = d.ddd * 10^exponent
        return layout(negative, digits, exponent);
    }

    /** Python's layout of {@code d.ddd * 10^exponent} (digits without sign, point or trailing zeros). */
    private static String layout(boolean negative, String digits, int exponent) {
        StringBuilder b = new StringBuilder(24);
        if (negative) b.append('-');
        if (exponent >= 0 && exponent < 16) {
            if (digits.length() <= exponent + 1) {
                b.append(digits);
                for (int k = digits.length(); k < exponent + 1; k++) b.append('0');
                b.append(".0");
            } else {
                b.append(digits, 0, exponent + 1).append('.').append(digits, exponent + 1, digits.length());
            }
        } else if (exponent >= -4 && exponent < 0) {
            b.append("0.");
            for (int k = 0; k < -exponent - 1; k++) b.append('0');
            b.append(digits);
        } else {
            b.append(digits.charAt(0));
            if (digits.length() > 1) b.append('.').append(digits, 1, digits.length());
            b.append('e').append(exponent < 0 ? '-' : '+');
            int e = Math.abs(exponent);
            if (e < 10) b.append('0');
            b.append(e);
        }
        return b.toString();
    }
}
