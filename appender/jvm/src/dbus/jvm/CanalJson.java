package dbus.jvm;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * canal-json records (Canal's FlatMessage, a row each) of one table version's rows events, from the decoder's
 * lines: what {@code ums.formats.formatter("canal-json", options)} writes through the appender's per-row path,
 * byte for byte (tests/unit/test_jvm_canal.py holds the two to each other). The table is described by the
 * sidecar (appender/rowshape_canal.py: the message's constant parts, a kind and sqlType per column). A value
 * this class cannot convert with certainty makes {@link #records} answer null: the record then goes to the
 * sidecar, which writes it (or its dead letter).
 */
final class CanalJson extends PerRowFormat {
    static final String FORMAT = "canal-json";
    private static final byte[] B_NULL = bytes("null"), DATA = bytes("{\"data\":["), GTID = bytes(",\"gtid\":"),
        ID = bytes(",\"id\":"), TYPE = bytes(",\"type\":\""), NO_GTID = bytes("\"\""), INSERT = bytes("INSERT"),
        UPDATE = bytes("UPDATE"), DELETE = bytes("DELETE"), END = bytes("\"}");
    static final String UMS_DS = "ums_ds";
    private static final BigDecimal MILLI = new BigDecimal("0.001"), TEN_MILLION = new BigDecimal(10_000_000);
    /** Compiled once: String.matches compiles its pattern on every value. */
    private static final Pattern FLOAT_TEXT = Pattern.compile("-?[0-9]+(\\.[0-9]+)?(e[-+][0-9]+)?");

    static final int STR = 0, INT = 1, YEAR = 2, FLOAT = 3, BIN = 4, ENUM = 5, SET = 6;

    byte[] version, ds;
    boolean tombstones, floatKey;
    byte[] databasePart, middle, tail, sqlTypes, tablePart;
    byte[][] names;
    int[] kinds, sqlType, widerType, keys;
    BigInteger[] widerAbove;
    List<Map<ByteBuffer, byte[]>> enums = new ArrayList<>(); // ENUM: member token -> its index's JSON text
    List<Map<ByteBuffer, BigInteger>> sets = new ArrayList<>(); // SET: member text (JSON-escaped) -> its bit
    /** The buffer records are written in (one a table version: AppendUdf calls a partition's one at a time). */
    private final Out out = new Out();

    /** The description fields from {@code i} on (appender/rowshape_canal.py, after the record limit, schema and table). */
    static CanalJson parse(List<byte[]> a, int i) {
        CanalJson d = new CanalJson();
        d.version = a.get(i++);
        d.ds = a.get(i++);
        d.tombstones = "1".equals(Sidecar.string(a.get(i++)));
        d.databasePart = a.get(i++);
        d.middle = a.get(i++);
        d.tail = a.get(i++);
        d.sqlTypes = a.get(i++);
        d.tablePart = a.get(i++);
        int n = Integer.parseInt(Sidecar.string(a.get(i++)));
        d.names = new byte[n][];
        d.kinds = new int[n];
        d.sqlType = new int[n];
        d.widerType = new int[n];
        d.widerAbove = new BigInteger[n];
        for (int c = 0; c < n; c++) {
            d.names[c] = a.get(i++);
            String kind = Sidecar.string(a.get(i++));
            d.sqlType[c] = Integer.parseInt(Sidecar.string(a.get(i++)));
            String wider = Sidecar.string(a.get(i++));
            if (!wider.isEmpty()) {
                int colon = wider.indexOf(':');
                d.widerAbove[c] = new BigInteger(wider.substring(0, colon));
                d.widerType[c] = Integer.parseInt(wider.substring(colon + 1));
            }
            byte[] members = a.get(i++);
            String[] tokens = members == null || members.length == 0 ? new String[0] : Sidecar.string(members).split("\n");
            Map<ByteBuffer, byte[]> index = new HashMap<>();
            Map<ByteBuffer, BigInteger> bits = new HashMap<>();
            for (int m = 0; m < tokens.length; m++) {
                byte[] token = bytes(tokens[m]);
                index.put(ByteBuffer.wrap(token), bytes("\"" + (m + 1) + "\""));
                bits.put(ByteBuffer.wrap(token, 1, token.length - 2).slice(), BigInteger.ONE.shiftLeft(m));
            }
            index.putIfAbsent(ByteBuffer.wrap(bytes("\"\"")), bytes("\"0\""));
            d.enums.add(index);
            d.sets.add(bits);
            switch (kind) {
                case "str": d.kinds[c] = STR; break;
                case "int": d.kinds[c] = INT; break;
                case "year": d.kinds[c] = YEAR; break;
                case "float": d.kinds[c] = FLOAT; break;
                case "bin": d.kinds[c] = BIN; break;
                case "enum": d.kinds[c] = ENUM; break;
                case "set": d.kinds[c] = SET; break;
                default: throw new IllegalArgumentException("canal-json: unknown column kind " + kind);
            }
        }
        d.keys = keys(a.get(i));
        for (int key : d.keys) d.floatKey |= d.kinds[key] == FLOAT;
        return d;
    }

    /** One row image: each column's token (the UMS value's JSON) and Canal's value (a JSON string or null). */
    private static final class Image {
        final byte[][] tokens, values;
        int[] wider; // the sqlType of each column when an unsigned value made one wider, else null

        Image(int n) {
            tokens = new byte[n][];
            values = new byte[n][];
        }
    }

    @Override
    List<DebeziumJson.Rec> records(long umsId, long tsMs, String file, long pos, Long serverId, String gtid,
                                   char op, byte[] lines) {
        int[] bounds = imageBounds(umsId, op, lines);
        if (bounds == null) return null;
        int images = bounds.length / 2;
        Out w = out;
        w.reset();
        if (gtid == null || gtid.isEmpty()) w.put(NO_GTID);
        else if (!DebeziumJson.string(gtid, w)) return null;
        byte[] gtidJson = w.toBytes();
        byte[] id = bytes(Long.toString(umsId)), ts = bytes(Long.toString(tsMs));
        List<DebeziumJson.Rec> out = new ArrayList<>();
        Image before = null;
        for (int t = 0; t < images; t++) {
            Image image = convert(lines, bounds[2 * t], bounds[2 * t + 1]);
            if (image == null) return null;
            if (op == 'u' && t % 2 == 0) {
                before = image;
                continue;
            }
            List<Object[]> headers = List.of(new Object[] {UMS_ID, id}, new Object[] {UMS_UID, uid(id, t, w)},
                new Object[] {UMS_VERSION, version}, new Object[] {UMS_DS, ds});
            if (op == 'i') {
                out.add(new DebeziumJson.Rec(key(image, w), message(INSERT, image, null, id, ts, gtidJson, w), headers));
            } else if (op == 'd') {
                delete(image, id, ts, gtidJson, headers, w, out);
            } else if (keyChanged(before, image)) {
                if (floatKey) return null; // Python compares the floats (-0.0 == 0.0), not their text
                delete(before, id, ts, gtidJson, headers, w, out);
                out.add(new DebeziumJson.Rec(key(image, w), message(INSERT, image, null, id, ts, gtidJson, w), headers));
            } else {
                out.add(new DebeziumJson.Rec(key(image, w), message(UPDATE, image, before, id, ts, gtidJson, w), headers));
            }
        }
        return out;
    }

    private void delete(Image image, byte[] id, byte[] ts, byte[] gtid, List<Object[]> headers, Out w,
                        List<DebeziumJson.Rec> out) {
        byte[] key = key(image, w);
        out.add(new DebeziumJson.Rec(key, message(DELETE, image, null, id, ts, gtid, w), headers));
        if (tombstones && key != null) out.add(new DebeziumJson.Rec(key, null, headers));
    }

    private boolean keyChanged(Image before, Image after) {
        for (int k : keys) if (!Arrays.equals(before.tokens[k], after.tokens[k])) return true;
        return false;
    }

    /** {@code {"id":1}}: the key columns' UMS values; null without a primary key. */
    private byte[] key(Image image, Out w) {
        if (keys.length == 0) return null;
        w.reset();
        w.put('{');
        for (int j = 0; j < keys.length; j++) {
            if (j > 0) w.put(',');
            w.put(names[keys[j]]);
            w.put(':');
            w.put(image.tokens[keys[j]]);
        }
        w.put('}');
        return w.toBytes();
    }

    /** The flat message, its keys in fastjson2's (alphabetical) order as canal.py writes them. */
    private byte[] message(byte[] type, Image now, Image old, byte[] id, byte[] ts, byte[] gtid, Out w) {
        w.reset();
        w.put(DATA);
        object(names, now.values, w);
        w.put(databasePart);
        w.put(ts);
        w.put(GTID);
        w.put(gtid);
        w.put(ID);
        w.put(id);
        w.put(middle);
        if (old == null) w.put(B_NULL);
        else {
            w.put('[');
            w.put('{');
            boolean first = true;
            for (int c = 0; c < names.length; c++) {
                if (Arrays.equals(old.values[c], now.values[c])) continue;
                if (!first) w.put(',');
                first = false;
                w.put(names[c]);
                w.put(':');
                w.put(old.values[c]);
            }
            w.put('}');
            w.put(']');
        }
        w.put(tail);
        if (now.wider == null) w.put(sqlTypes);
        else {
            w.put('{');
            for (int c = 0; c < names.length; c++) {
                if (c > 0) w.put(',');
                w.put(names[c]);
                w.put(':');
                w.num(now.wider[c]);
            }
            w.put('}');
        }
        w.put(tablePart);
        w.put(ts);
        w.put(TYPE);
        w.put(type);
        w.put(END);
        return w.toBytes();
    }

    /** One line's tokens and their Canal values; null when the sidecar must convert them. */
    private Image convert(byte[] line, int from, int to) {
        Image image = new Image(names.length);
        int c = 0, i = from;
        while (i <= to) {
            if (c >= names.length) return null;
            int end = UmsTokens.tokenEnd(line, i, to);
            if (end <= i) return null; // -1 (not a token) or an empty one
            byte[] token = Arrays.copyOfRange(line, i, end), v = value(c, token);
            if (v == null) return null;
            if (v != B_NULL && widerAbove[c] != null) {
                BigInteger x = integer(v, 1, v.length - 1);
                if (x == null) return null; // Python's int() of the text: certain only for plain digits
                if (x.compareTo(widerAbove[c]) > 0) {
                    if (image.wider == null) image.wider = sqlType.clone();
                    image.wider[c] = widerType[c];
                }
            }
            image.tokens[c] = token;
            image.values[c++] = v;
            i = end + 1;
        }
        return c == names.length ? image : null;
    }

    /** Canal's value (a JSON string, or null) of column c's token; null when not certain. */
    private byte[] value(int c, byte[] b) {
        int n = b.length;
        if (UmsTokens.isNull(b, 0, n)) return B_NULL;
        boolean quoted = b[0] == '"';
        try {
            switch (kinds[c]) {
                case STR: return quoted ? b : null;
                case INT: case YEAR: {
                    if (quoted || !digits(b, 0, n)) return null;
                    int digit = b[0] == '-' ? 1 : 0;
                    if (b[digit] == '0' && (n > 1 + digit || digit == 1)) return null; // "-0", "07": not str(int)
                    if (kinds[c] == YEAR && n == 1 && b[0] == '0') return bytes("\"0000\"");
                    return quote(b);
                }
                case FLOAT: return quoted ? null : javaText(UmsTokens.ascii(b, 0, n));
                case BIN: {
                    if (!quoted || (n - 2) % 4 != 0) return null;
                    for (int k = 1; k < n - 1; k++) if (b[k] == '\\') return null;
                    return latin1(Base64.getDecoder().decode(Arrays.copyOfRange(b, 1, n - 1)));
                }
                case ENUM: {
                    if (!quoted) return null;
                    byte[] index = enums.get(c).get(ByteBuffer.wrap(b));
                    return index == null ? b : index;
                }
                case SET: {
                    if (!quoted) return null;
                    if (n == 2) return bytes("\"0\"");
                    Map<ByteBuffer, BigInteger> bits = sets.get(c);
                    BigInteger mask = BigInteger.ZERO;
                    int start = 1;
                    for (int k = 1; k <= n - 1; k++) {
                        if (k < n - 1 && b[k] != ',') continue;
                        BigInteger bit = bits.get(ByteBuffer.wrap(b, start, k - start).slice());
                        if (bit == null) return b; // a member the type does not list: the value's own text
                        mask = mask.add(bit);
                        start = k + 1;
                    }
                    return bytes("\"" + mask + "\"");
                }
                default: return null;
            }
        } catch (RuntimeException ex) { // a bad Base64 text, a number out of range: Python says
            return null;
        }
    }

    /** The JSON string of bytes read as ISO-8859-1, escaped as json.dumps(ensure_ascii=False) escapes it. */
    private static byte[] latin1(byte[] raw) {
        byte[] out = new byte[raw.length * 6 + 2];
        int o = 0;
        out[o++] = '"';
        for (byte x : raw) {
            int u = x & 0xFF;
            if (u >= 0x80) {
                out[o++] = (byte) (0xC0 | u >> 6);
                out[o++] = (byte) (0x80 | u & 0x3F);
            } else if (u >= 0x20 && u != '"' && u != '\\') {
                out[o++] = (byte) u;
            } else {
                byte[] e = ESCAPES[u];
                System.arraycopy(e, 0, out, o, e.length);
                o += e.length;
            }
        }
        out[o++] = '"';
        return Arrays.copyOf(out, o);
    }

    /** json.dumps's escapes of the characters below 0x20, '"' and '\\'. */
    private static final byte[][] ESCAPES = new byte[0x80][];

    static {
        for (int c = 0; c < 0x20; c++) ESCAPES[c] = bytes(String.format("\\u%04x", c));
        ESCAPES['\n'] = bytes("\\n");
        ESCAPES['\r'] = bytes("\\r");
        ESCAPES['\t'] = bytes("\\t");
        ESCAPES['\b'] = bytes("\\b");
        ESCAPES['\f'] = bytes("\\f");
        ESCAPES['"'] = bytes("\\\"");
        ESCAPES['\\'] = bytes("\\\\");
    }

    /** canal.java_text of a float token (Python's repr): Java's Double.toString text; null for anything else. */
    static byte[] javaText(String t) {
        if (!FLOAT_TEXT.matcher(t).matches() || (t.indexOf('.') < 0 && t.indexOf('e') < 0)) return null;
        BigDecimal d = new BigDecimal(t);
        if (d.signum() == 0) return bytes(t.startsWith("-") ? "\"-0.0\"" : "\"0.0\"");
        BigDecimal abs = d.abs();
        if (abs.compareTo(MILLI) >= 0 && abs.compareTo(TEN_MILLION) < 0) {
            String plain = d.toPlainString();
            return bytes("\"" + (plain.indexOf('.') < 0 ? plain + ".0" : plain) + "\"");
        }
        String digits = d.unscaledValue().abs().toString();
        int power = digits.length() - d.scale() - 1;
        String shown = digits.replaceAll("0+$", "");
        if (shown.isEmpty()) shown = "0";
        return bytes("\"" + (d.signum() < 0 ? "-" : "") + shown.charAt(0) + "."
            + (shown.length() > 1 ? shown.substring(1) : "0") + "E" + power + "\"");
    }

    /** b[s, e) is plain decimal digits, an optional minus before them. */
    private static boolean digits(byte[] b, int s, int e) {
        int i = s < e && b[s] == '-' ? s + 1 : s;
        if (i >= e) return false;
        for (int k = i; k < e; k++) if (b[k] < '0' || b[k] > '9') return false;
        return true;
    }

    /** b[s, e) as an integer when it is plain decimal digits (an optional minus), else null. */
    private static BigInteger integer(byte[] b, int s, int e) {
        return digits(b, s, e) ? new BigInteger(UmsTokens.ascii(b, s, e)) : null;
    }

    private static byte[] quote(byte[] t) {
        byte[] out = new byte[t.length + 2];
        out[0] = '"';
        System.arraycopy(t, 0, out, 1, t.length);
        out[out.length - 1] = '"';
        return out;
    }

    private static byte[] bytes(String s) { return s.getBytes(StandardCharsets.UTF_8); }
}
