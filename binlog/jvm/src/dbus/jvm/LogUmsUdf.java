package dbus.jvm;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.regex.Pattern;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF5;

/**
 * The UMS message of one log table for one record (logprocessor/logums_jvm.py registers one per table):
 * {@code (partition, offset, ums_ts, namespace, results) -> string}, the bytes {@code logums.message_json} gives
 * (Python's compact {@code json.dumps}) for the rows the table took from the record's lines, null when it took
 * none. {@code results} is the rules UDF's {@code array<LINE_TYPE>}; a row's index is its position among the
 * table's rows of the record, and a row whose {@code ums_id_} would be out of range is left out (a dead letter
 * elsewhere). A DOUBLE value is written as Python's {@code repr} writes the double (the shortest digits that
 * read back, nearest the value), or null when it is not a finite decimal number; the other values as JSON
 * strings escaped as Python escapes them.
 */
public final class LogUmsUdf implements UDF5<Integer, Long, String, String, scala.collection.Seq<Row>, String> {
    private static final long serialVersionUID = 1L;
    static final int MAX_PARTITION = 255;
    static final long MAX_OFFSET = (1L << 43) - 1;
    static final int MAX_INDEX = 4095;
    static final Pattern DOUBLE = Pattern.compile("[+-]?(?:[0-9]+\\.?[0-9]*|\\.[0-9]+)(?:[eE][+-]?[0-9]+)?");

    private final String table;
    private final String head;
    private final String middle;
    private final boolean[] doubles;

    /**
     * @param table the table whose rows make the message
     * @param head the message's text before the quoted namespace
     * @param middle the text between the namespace and the first tuple
     * @param types one letter per saveAs column, {@code d} for a DOUBLE, anything else for a string
     */
    public LogUmsUdf(String table, String head, String middle, String types) {
        this.table = table;
        this.head = head;
        this.middle = middle;
        this.doubles = new boolean[types.length()];
        for (int i = 0; i < types.length(); i++) doubles[i] = types.charAt(i) == 'd';
    }

    @Override
    public String call(Integer partition, Long offset, String ts, String ns, scala.collection.Seq<Row> results) {
        if (partition == null || offset == null || ts == null || ns == null || results == null) return null;
        int p = partition;
        long o = offset;
        if (p < 0 || p > MAX_PARTITION || o < 0 || o > MAX_OFFSET) return null;
        StringBuilder b = null;
        int index = 0;
        int n = results.length();
        for (int l = 0; l < n; l++) {
            Row line = results.apply(l);
            if (line == null || line.isNullAt(0)) continue;
            scala.collection.Seq<Row> rows = line.getSeq(0);
            int m = rows.length();
            for (int r = 0; r < m; r++) {
                Row row = rows.apply(r);
                if (!table.equals(row.getString(0))) continue;
                int i = index++;
                if (i > MAX_INDEX) continue;
                if (b == null) {
                    b = new StringBuilder(512);
                    b.append(head);
                    quote(b, ns);
                    b.append(middle);
                } else {
                    b.append(',');
                }
                tuple(b, p, o, i, ts, row.isNullAt(2) ? null : row.<String>getSeq(2));
            }
        }
        if (b == null) return null;
        return b.append("]}").toString();
    }

    private void tuple(StringBuilder b, int p, long o, int i, String ts, scala.collection.Seq<String> values) {
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
