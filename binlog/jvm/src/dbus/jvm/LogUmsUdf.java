package dbus.jvm;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF5;

/**
 * The UMS messages of a record's log tables (logprocessor/logums_jvm.py registers one per rule set):
 * {@code (partition, offset, ums_ts, namespaces, results) -> array<string>}, per table (in the constructor's order,
 * {@code namespaces} alike) the bytes {@code logums.message_json} gives (Python's compact {@code json.dumps}) for
 * the rows the table took from the record's lines, null when it took none. {@code results} is the rules UDF's
 * {@code array<LINE_TYPE>}, converted once for every table; a row's index is its position among the table's rows
 * of the record, and a row whose {@code ums_id_} would be out of range is left out (a dead letter elsewhere). A
 * DOUBLE value is written as Python's {@code repr} writes the double (the shortest digits that read back, nearest
 * the value), or null when it is not a finite decimal number; the other values as JSON strings escaped as Python
 * escapes them.
 */
public final class LogUmsUdf
        implements UDF5<Integer, Long, String, scala.collection.Seq<String>, scala.collection.Seq<Row>, List<String>> {
    private static final long serialVersionUID = 1L;
    static final int MAX_PARTITION = 255;
    static final long MAX_OFFSET = (1L << 43) - 1;
    static final int MAX_INDEX = 4095;
    static final Pattern DOUBLE = Pattern.compile("[+-]?(?:[0-9]+\\.?[0-9]*|\\.[0-9]+)(?:[eE][+-]?[0-9]+)?");
    static final String SEPARATOR = "\0";

    private final String head;
    private final String[] tables;
    private final String[] middles;
    private final boolean[][] doubles;

    /**
     * @param head the text of a message before its quoted namespace
     * @param tables the tables, {@link #SEPARATOR} between them
     * @param middles per table, the text between the namespace and the first tuple, {@link #SEPARATOR} between
     * @param types per table, one letter per saveAs column ({@code d}: a DOUBLE, else a string), {@link #SEPARATOR}
     *     between
     */
    public LogUmsUdf(String head, String tables, String middles, String types) {
        this.head = head;
        this.tables = tables.split(SEPARATOR, -1);
        this.middles = middles.split(SEPARATOR, -1);
        String[] t = types.split(SEPARATOR, -1);
        if (this.middles.length != this.tables.length || t.length != this.tables.length) {
            throw new IllegalArgumentException("LogUmsUdf: tables, middles and types differ in number");
        }
        this.doubles = new boolean[t.length][];
        for (int k = 0; k < t.length; k++) {
            doubles[k] = new boolean[t[k].length()];
            for (int i = 0; i < t[k].length(); i++) doubles[k][i] = t[k].charAt(i) == 'd';
        }
    }

    @Override
    public List<String> call(
            Integer partition, Long offset, String ts, scala.collection.Seq<String> namespaces,
            scala.collection.Seq<Row> results) {
        if (partition == null || offset == null || ts == null || namespaces == null || results == null) return null;
        int tableCount = tables.length;
        List<String> out = new ArrayList<>(tableCount);
        int p = partition;
        long o = offset;
        if (p < 0 || p > MAX_PARTITION || o < 0 || o > MAX_OFFSET) {
            for (int k = 0; k < tableCount; k++) out.add(null);
            return out;
        }
        StringBuilder[] built = new StringBuilder[tableCount];
        int[] indexes = new int[tableCount];
        int n = results.length();
        for (int l = 0; l < n; l++) {
            Row line = results.apply(l);
            if (line == null || line.isNullAt(0)) continue;
            scala.collection.Seq<Row> rows = line.getSeq(0);
            int m = rows.length();
            for (int r = 0; r < m; r++) {
                Row row = rows.apply(r);
                String table = row.getString(0);
                int k = 0;
                while (k < tableCount && !tables[k].equals(table)) k++;
                if (k == tableCount) continue;
                int i = indexes[k]++;
                if (i > MAX_INDEX) continue;
                StringBuilder b = built[k];
                if (b == null) {
                    built[k] = b = new StringBuilder(512);
                    b.append(head);
                    quote(b, namespaces.apply(k));
                    b.append(middles[k]);
                } else {
                    b.append(',');
                }
                tuple(b, doubles[k], p, o, i, ts, row.isNullAt(2) ? null : row.<String>getSeq(2));
            }
        }
        for (int k = 0; k < tableCount; k++) out.add(built[k] == null ? null : built[k].append("]}").toString());
        return out;
    }

    private static void tuple(
            StringBuilder b, boolean[] doubles, int p, long o, int i, String ts, scala.collection.Seq<String> values) {
        long id = ((long) p << 55) | (o << 12) | i;
        long position = (long) p * 10_000_000_000_000L + o;
        b.append("{\"tuple\":[\"").append(id).append("\",\"").append(ts).append("\",\"i\",\"");
        uid(b, position, i);
        b.append('"');
        int have = values == null ? 0 : values.length();
        for (int c = 0; c < doubles.length; c++) {
            String v = c < have ? values.apply(c) : null;
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
    public static String pythonDouble(String text) {
        if (!DOUBLE.matcher(text).matches()) return null;
        double x;
        try {
            x = Double.parseDouble(text);
        } catch (NumberFormatException e) {
            return null;
        }
        if (Double.isNaN(x) || Double.isInfinite(x)) return null;
        return repr(x);
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
