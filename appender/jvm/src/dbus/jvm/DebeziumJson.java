package dbus.jvm;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.regex.Pattern;

/**
 * debezium-json records of one table version's rows events, from the decoder's lines: what
 * {@code ums.formats.formatter("debezium-json", options)} writes through the appender's per-row path
 * ({@code PartitionProcessor._rows_per_row}), byte for byte (tests/unit/test_jvm_rowformats.py holds the two to
 * each other). The table is described by the sidecar (appender/rowshape.py: the schemas' JSON, the source block's
 * constant parts, a kind per column). A value this class cannot convert with certainty makes {@link #records}
 * answer null: the record then goes to the sidecar, which writes it (or its dead letter).
 */
final class DebeziumJson extends PerRowFormat {
    static final String FORMAT = "debezium-json";
    private static final byte[] B_NULL = bytes("null"), THREAD_QUERY = bytes(",\"thread\":null,\"query\":null}"),
        TS_NS = bytes(",\"ts_ns\":"), GTID = bytes(",\"gtid\":"), FILE = bytes(",\"file\":"), POS = bytes(",\"pos\":"),
        ROW = bytes(",\"row\":"), BEFORE = bytes("{\"before\":"), AFTER = bytes(",\"after\":"),
        SOURCE = bytes(",\"source\":"), OP = bytes(",\"op\":\""), TRUE = bytes("true"), FALSE = bytes("false");
    static final String OLD_KEY = "__debezium.oldkey", NEW_KEY = "__debezium.newkey";
    /** Compiled once: String.matches compiled its pattern on every value (a tenth of the appender's time). */
    private static final Pattern FLOAT_TEXT = Pattern.compile("-?[0-9]+(\\.[0-9]+)?(e[-+][0-9]{2,3})?");
    /** A converter's answer "Python's None" (a zero date): the column's NOT NULL fallback, or null. */
    private static final byte[] NONE = new byte[0];

    /** The column kinds it writes (PerRowFormat's vocabulary). */
    private static final long TAKES = takes(ID, LONG, ULONG, UDEC, DEC, BOOL, FLOAT, DATE, DT_MS, DT_US, TS, TIME_US,
        TIME_MS, BITS, BIN_HEX, BIN_B64, BIN_B64URL);

    byte[] version;
    boolean schemas, tombstones, floatKey;
    byte[] keyPrefix, valuePrefix, srcHead, srcMiddle, srcTail;
    byte[][] names, fallbacks;
    int[] kinds, params, keys;
    /** The record being written; one table version's records are written by one thread at a time (its partition's). */
    private final Out out = new Out();

    /** Arrays of the lengths of values sent lately, the schema's prefix in place ({@link Envelope#sendValue}). */
    private final java.util.HashMap<Integer, byte[]> sent = new java.util.HashMap<>();
    private static final int SENT_LENGTHS = 256; // arrays kept per table version at most (about 6.4 kB each)

    /** One output record: key (null: no primary key), value (null: a tombstone), headers as name, value pairs. */
    static class Rec {
        final byte[] key;
        final List<Object[]> headers;
        private final byte[] value;

        Rec(byte[] key, byte[] value, List<Object[]> headers) {
            this.key = key;
            this.value = value;
            this.headers = headers;
        }

        /** The value's length in bytes (0 for a tombstone). */
        int length() { return value == null ? 0 : value.length; }

        /** The value in an array of its own; null for a tombstone. */
        byte[] value() { return value; }

        /** The value for a send that copies it before the next record of its table version is made (the Kafka
         *  producer appends it to its batch within {@code send}): possibly an array that record reuses. */
        byte[] sendValue() { return value; }
    }

    /**
     * A debezium-json record whose value is written when it is sent: {@link #sendValue} writes it into an
     * array kept for values of its length, where the schema's prefix (5.8 kB of the 6.4 kB a row) already is,
     * instead of allocating, zeroing and filling 6.4 kB a row (measured: docs/performance.md).
     */
    private final class Envelope extends Rec {
        private final char op;
        private final byte[][] old, now;
        private final byte[] source, row, tail;
        private final int n;

        Envelope(byte[] key, List<Object[]> headers, char op, byte[][] old, byte[][] now, byte[] source, byte[] row,
                 byte[] tail) {
            super(key, null, headers);
            this.op = op;
            this.old = old;
            this.now = now;
            this.source = source;
            this.row = row;
            this.tail = tail;
            n = (schemas ? valuePrefix.length + 1 : 0) + BEFORE.length + imageLength(old) + AFTER.length
                + imageLength(now) + source.length + row.length + THREAD_QUERY.length + OP.length + 1 + tail.length;
        }

        @Override int length() { return n; }

        @Override byte[] value() { return write(new byte[n], false); }

        @Override byte[] sendValue() {
            byte[] b = sent.get(n);
            if (b != null) return write(b, true);
            if (sent.size() >= SENT_LENGTHS) sent.clear();
            b = write(new byte[n], false);
            sent.put(n, b);
            return b;
        }

        /** The envelope written into b (of length n); {@code prefixed}: b holds the schema's prefix already. */
        private byte[] write(byte[] b, boolean prefixed) {
            int at = !schemas ? 0 : prefixed ? valuePrefix.length : copy(valuePrefix, b, 0);
            at = copy(BEFORE, b, at);
            at = image(old, b, at);
            at = copy(AFTER, b, at);
            at = image(now, b, at);
            at = copy(source, b, at);
            at = copy(row, b, at);
            at = copy(THREAD_QUERY, b, at);
            at = copy(OP, b, at);
            b[at++] = (byte) op;
            at = copy(tail, b, at);
            if (schemas) b[at++] = '}';
            if (at != n) throw new IllegalStateException("debezium-json: envelope of " + at + " bytes, sized " + n);
            return b;
        }
    }

    /** The description fields from {@code i} on (appender/rowshape.py, after the record limit, schema and table). */
    static DebeziumJson parse(List<byte[]> a, int i) {
        DebeziumJson d = new DebeziumJson();
        d.version = a.get(i++);
        d.schemas = "1".equals(Sidecar.string(a.get(i++)));
        d.tombstones = "1".equals(Sidecar.string(a.get(i++)));
        d.keyPrefix = a.get(i++);
        d.valuePrefix = a.get(i++);
        d.srcHead = a.get(i++);
        d.srcMiddle = a.get(i++);
        d.srcTail = a.get(i++);
        int n = Integer.parseInt(Sidecar.string(a.get(i++)));
        d.names = new byte[n][];
        d.fallbacks = new byte[n][];
        d.kinds = new int[n];
        d.params = new int[n];
        for (int c = 0; c < n; c++) {
            d.names[c] = a.get(i++);
            String kind = Sidecar.string(a.get(i++));
            d.fallbacks[c] = a.get(i++);
            columnKind(FORMAT, TAKES, kind, c, d.kinds, d.params);
        }
        d.keys = keys(a.get(i));
        for (int key : d.keys) d.floatKey |= d.kinds[key] == FLOAT;
        return d;
    }

    /**
     * The records of one rows event ({@code op} i, u or d; {@code lines} one line per row image, an update's
     * before and after), or null when the sidecar must write them. {@code serverId}/{@code gtid}: the raw
     * header's values (null when absent).
     */
    List<Rec> records(long umsId, long tsMs, String file, long pos, Long serverId, String gtid, char op, byte[] lines) {
        int[] bounds = imageBounds(umsId, op, lines);
        if (bounds == null) return null;
        int images = bounds.length / 2;
        Out w = out; // reused: not a new 64 KiB buffer per rows event
        w.reset();
        // the source block up to "row": and the envelope's tail, once per event
        w.put(SOURCE);
        w.put(srcHead); w.num(tsMs); w.put(srcMiddle); w.num(tsMs * 1000); w.put(TS_NS); w.num(tsMs * 1_000_000);
        w.put(srcTail); w.num(serverId == null ? 0 : serverId);
        w.put(GTID);
        if (gtid == null) w.put(B_NULL); else if (!string(gtid, w)) return null;
        w.put(FILE);
        if (file == null || !string(file, w)) return null;
        w.put(POS); w.num(pos); w.put(ROW);
        byte[] source = w.toBytes();
        w.reset();
        w.put('"'); w.put(',');
        w.ascii("\"ts_ms\":"); w.num(tsMs); w.ascii(",\"ts_us\":"); w.num(tsMs * 1000);
        w.ascii(",\"ts_ns\":"); w.num(tsMs * 1_000_000); w.ascii(",\"transaction\":null}");
        byte[] tail = w.toBytes();
        byte[] id = bytes(Long.toString(umsId));
        List<Rec> recs = new ArrayList<>(op == 'u' ? images / 2 : images);
        int n = names.length;
        byte[][] before = new byte[n][], after = new byte[n][];
        for (int t = 0; t < images; t++) {
            byte[][] image = op == 'u' && t % 2 == 0 ? before : after;
            if (!convert(lines, bounds[2 * t], bounds[2 * t + 1], image)) return null;
            if (op == 'u' && t % 2 == 0) continue;
            List<Object[]> headers = List.of(new Object[] {UMS_ID, id}, new Object[] {UMS_UID, uid(id, t, w)},
                new Object[] {UMS_VERSION, version});
            byte[] row = bytes(Integer.toString(t));
            if (op == 'i') {
                recs.add(new Envelope(key(after, w), headers, 'c', null, after.clone(), source, row, tail));
            } else if (op == 'd') {
                byte[] key = key(after, w);
                recs.add(new Envelope(key, headers, 'd', after.clone(), null, source, row, tail));
                if (tombstones) recs.add(new Rec(key, null, headers));
            } else {
                byte[] oldKey = keyPayload(before, w), newKey = keyPayload(after, w);
                if (oldKey != null && !Arrays.equals(oldKey, newKey)) {
                    if (floatKey) return null; // Python compares the floats (-0.0 == 0.0), not their text
                    List<Object[]> newH = with(headers, NEW_KEY, newKey), oldH = with(headers, OLD_KEY, oldKey);
                    byte[] ok = wrapKey(oldKey, w), nk = wrapKey(newKey, w);
                    recs.add(new Envelope(ok, newH, 'd', before.clone(), null, source, row, tail));
                    if (tombstones) recs.add(new Rec(ok, null, newH));
                    recs.add(new Envelope(nk, oldH, 'c', null, after.clone(), source, row, tail));
                } else {
                    recs.add(new Envelope(wrapKey(newKey, w), headers, 'u', before.clone(), after.clone(), source, row, tail));
                }
            }
        }
        return recs;
    }

    private byte[] key(byte[][] image, Out w) { return wrapKey(keyPayload(image, w), w); }

    /** {@code {"id":1}}: the key columns' values; null without a primary key. */
    private byte[] keyPayload(byte[][] image, Out w) {
        if (keys.length == 0) return null;
        w.reset();
        w.put('{');
        for (int j = 0; j < keys.length; j++) {
            if (j > 0) w.put(',');
            w.put(names[keys[j]]);
            w.put(':');
            w.put(image[keys[j]]);
        }
        w.put('}');
        return w.toBytes();
    }

    private byte[] wrapKey(byte[] payload, Out w) {
        if (payload == null || !schemas) return payload;
        w.reset();
        w.put(keyPrefix);
        w.put(payload);
        w.put('}');
        return w.toBytes();
    }

    private static int copy(byte[] from, byte[] to, int at) {
        System.arraycopy(from, 0, to, at, from.length);
        return at + from.length;
    }

    /** The length of {@link #image}'s JSON: null, or the object of the columns' names and values. */
    private int imageLength(byte[][] values) {
        if (values == null) return B_NULL.length;
        int n = 2 + Math.max(0, names.length - 1); // '{', a ',' between columns, '}'
        for (int c = 0; c < names.length; c++) n += names[c].length + 1 + values[c].length;
        return n;
    }

    /** {@code null}, or {@code {"a":1,"b":2}}, written into b from at; returns the end. */
    private int image(byte[][] values, byte[] b, int at) {
        if (values == null) return copy(B_NULL, b, at);
        b[at++] = '{';
        for (int c = 0; c < names.length; c++) {
            if (c > 0) b[at++] = ',';
            at = copy(names[c], b, at);
            b[at++] = ':';
            at = copy(values[c], b, at);
        }
        b[at++] = '}';
        return at;
    }

    /** One line's tokens converted into {@code into}; false when the sidecar must convert them. */
    private boolean convert(byte[] line, int from, int to, byte[][] into) {
        int c = 0, i = from;
        while (i <= to) {
            if (c >= names.length) return false;
            int end = UmsTokens.tokenEnd(line, i, to);
            if (end < 0) return false;
            byte[] v = value(c, line, i, end);
            if (v == null) return false;
            if (v == NONE) v = fallbacks[c] == null ? B_NULL : fallbacks[c];
            into[c++] = v;
            i = end + 1;
        }
        return c == names.length;
    }

    /** The Connect JSON of column c's token line[s, e); NONE for Python's None, null when not certain. */
    private byte[] value(int c, byte[] b, int s, int e) {
        if (UmsTokens.isNull(b, s, e)) return B_NULL;
        if (e <= s) return null;
        boolean quoted = b[s] == '"';
        try {
            switch (kinds[c]) {
                case ID: {
                    byte f = b[s];
                    return f == '"' || f == '-' || (f >= '0' && f <= '9') ? Arrays.copyOfRange(b, s, e) : null;
                }
                case LONG: {
                    if (!quoted || !UmsTokens.integer(b, s + 1, e - 1)) return null;
                    if (e - s - 2 > 18) Long.parseLong(UmsTokens.ascii(b, s + 1, e - 1)); // orjson writes 64-bit integers only
                    return Arrays.copyOfRange(b, s + 1, e - 1);
                }
                case ULONG: {
                    if (!quoted || !UmsTokens.integer(b, s + 1, e - 1) || b[s + 1] == '-') return null;
                    return bytes(Long.toString(Long.parseUnsignedLong(UmsTokens.ascii(b, s + 1, e - 1))));
                }
                case UDEC: {
                    if (!quoted || !UmsTokens.integer(b, s + 1, e - 1)) return null;
                    return b64(new BigInteger(UmsTokens.ascii(b, s + 1, e - 1)).toByteArray(), Base64.getEncoder());
                }
                case DEC: return quoted ? decimal(b, s + 1, e - 1, params[c]) : null;
                case BOOL:
                    if (quoted || !UmsTokens.integer(b, s, e)) return null;
                    return e - s == 1 && b[s] == '0' ? FALSE : TRUE;
                case FLOAT: return floatJson(UmsTokens.ascii(b, s, e));
                case DATE: {
                    if (!quoted || e - s != 12) return null;
                    LocalDate d = UmsTokens.date(b, s + 1);
                    return d == null ? NONE : bytes(Long.toString(d.toEpochDay()));
                }
                case DT_MS: case DT_US: {
                    long[] us = UmsTokens.datetime(b, s, e);
                    if (us == null) return null;
                    if (us.length == 0) return NONE;
                    return bytes(Long.toString(kinds[c] == DT_US ? us[0] : Math.floorDiv(us[0], 1000)));
                }
                case TS: {
                    long[] us = UmsTokens.datetime(b, s, e);
                    if (us == null) return null;
                    if (us.length == 0) return NONE;
                    String text = UmsTokens.timestamp(b, s, us[0], params[c], "\"");
                    return text == null ? null : bytes(text);
                }
                case TIME_US: case TIME_MS: {
                    if (!quoted) return null;
                    Long us = UmsTokens.time(UmsTokens.ascii(b, s + 1, e - 1));
                    if (us == null) return null;
                    if (kinds[c] == TIME_US) return bytes(Long.toString(us));
                    long ms = Math.floorDiv(us, 1000);
                    return ms >= 0 && ms < 86_400_000L ? bytes(Long.toString(ms)) : NONE;
                }
                case BITS: {
                    int from = quoted ? s + 1 : s, to = quoted ? e - 1 : e;
                    byte[] le = UmsTokens.bits(b, from, to, params[c]);
                    return le == null ? null : b64(le, Base64.getEncoder());
                }
                case BIN_HEX: case BIN_B64: case BIN_B64URL: {
                    if (!quoted) return null;
                    byte[] raw = Base64.getDecoder().decode(UmsTokens.ascii(b, s + 1, e - 1));
                    if (kinds[c] == BIN_B64) return b64(raw, Base64.getEncoder());
                    if (kinds[c] == BIN_B64URL) return b64(raw, Base64.getUrlEncoder());
                    StringBuilder h = new StringBuilder(raw.length * 2 + 2).append('"');
                    for (byte x : raw) h.append(Character.forDigit(x >> 4 & 15, 16)).append(Character.forDigit(x & 15, 16));
                    return bytes(h.append('"').toString());
                }
                default: return null;
            }
        } catch (RuntimeException ex) { // a number out of range, a bad Base64 text, an inexact decimal: Python says
            return null;
        }
    }

    /**
     * A float token (Python's repr) as orjson writes the same double: the same shortest digits, plain from
     * 1e-5 (repr: from 1e-4) and an exponent without leading zeros ({@code 1e-07} -> {@code 1e-7}); null for
     * anything else.
     */
    static byte[] floatJson(String t) {
        if (!FLOAT_TEXT.matcher(t).matches()) return null;
        int ex = t.indexOf('e');
        if (ex < 0) return t.indexOf('.') < 0 ? null : bytes(t);
        String mantissa = t.substring(0, ex);
        int exp = Integer.parseInt(t.substring(ex + 1));
        if (exp == -5) {
            boolean neg = mantissa.startsWith("-");
            return bytes((neg ? "-" : "") + "0.0000" + mantissa.substring(neg ? 1 : 0).replace(".", ""));
        }
        return bytes(mantissa + "e" + (exp < 0 ? "-" : "+") + Math.abs(exp));
    }

    /**
     * A decimal token's text b[s, e) as a Connect Decimal at {@code scale} (the Base64 of the unscaled value's
     * two's complement, as {@code BigDecimal.setScale(scale, UNNECESSARY)} gives it); null for anything but
     * {@code -?[0-9]+(\.[0-9]+)?} or a value that is not exact at the scale. Up to 18 digits without BigDecimal.
     */
    static byte[] decimal(byte[] b, int s, int e, int scale) {
        long v = UmsTokens.unscaled(b, s, e, scale);
        if (v == UmsTokens.NOT_DECIMAL) return null;
        if (v == UmsTokens.WIDE) {
            BigDecimal d = new BigDecimal(UmsTokens.ascii(b, s, e)).setScale(scale, RoundingMode.UNNECESSARY);
            return b64(d.unscaledValue().toByteArray(), Base64.getEncoder());
        }
        byte[] be = new byte[UmsTokens.twosComplementSize(v)];
        UmsTokens.twosComplement(v, be, 0);
        return b64(be, Base64.getEncoder());
    }

    private static byte[] b64(byte[] raw, Base64.Encoder enc) {
        byte[] t = enc.encode(raw), out = new byte[t.length + 2];
        out[0] = '"';
        System.arraycopy(t, 0, out, 1, t.length);
        out[out.length - 1] = '"';
        return out;
    }

    /** s as orjson writes a str; false for a lone surrogate (orjson refuses it). */
    static boolean string(String s, Out w) {
        w.put('"');
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (ch < 0x80) { w.escAscii(ch); continue; }
            if (Character.isSurrogate(ch)) {
                if (!Character.isHighSurrogate(ch) || i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1)))
                    return false;
                w.put(s.substring(i, i + 2).getBytes(StandardCharsets.UTF_8));
                i++;
                continue;
            }
            w.put(String.valueOf(ch).getBytes(StandardCharsets.UTF_8));
        }
        w.put('"');
        return true;
    }

    private static byte[] bytes(String s) { return s.getBytes(StandardCharsets.UTF_8); }
}
