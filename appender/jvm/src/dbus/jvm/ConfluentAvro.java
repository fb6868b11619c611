package dbus.jvm;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.regex.Pattern;

/**
 * avro records of one table version's rows events, from the decoder's lines: what
 * {@code ums.formats.formatter("avro", options, schema_ids)} writes through the appender's per-row path
 * ({@code PartitionProcessor._rows_per_row}), byte for byte (tests/unit/test_jvm_rowformats.py holds the two to
 * each other): key and value in the Confluent wire format (byte 0, the 4-byte schema id, then Avro binary: zigzag
 * varints, a union its branch index then the value, bytes and strings length-prefixed, decimals as the unscaled
 * two's complement bytes, dates and times as their logical types' numbers). No registry here: the sidecar
 * registered the schemas when it wrote the version's first record, and its description (appender/rowshape_avro.py)
 * carries the two ids' prefixes, the source block's constant parts and an Avro kind per column. A value this class
 * cannot convert with certainty makes {@link #records} answer null: the record then goes to the sidecar, which
 * writes it (or its dead letter).
 */
final class ConfluentAvro extends PerRowFormat {
    static final String FORMAT = "avro";
    private static final byte[] OP_C = text("c"), OP_U = text("u"), OP_D = text("d");
    /** A converter's answer "Python's None" (a zero date): the column's NOT NULL fallback, or null. */
    private static final byte[] NONE = new byte[0];
    /** A null token: the union's null branch. */
    private static final byte[] NULL = new byte[0];
    private static final Pattern NUMBER = Pattern.compile("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?");

    /** The column kinds it writes (PerRowFormat's vocabulary). */
    private static final long TAKES = takes(BOOL, INT, LONG, ULONG, UDEC, DEC, FLOAT, DOUBLE, DATE, DT_MS, DT_US, TS,
        TIME_US, TIME_MS, STR, BYTES, BITS, BIN_HEX, BIN_B64, BIN_B64URL);

    byte[] version;
    boolean tombstones, floatKey;
    byte[] keyPrefix, valuePrefix, srcHead, srcMiddle, srcTail;
    byte[][] fallbacks;
    boolean[] optional;
    int[] kinds, params, keys;
    byte[][] keyNames;          // the key columns' field names as JSON strings (a key change's headers)

    /** The description fields from {@code i} on (appender/rowshape_avro.py, after the record limit, schema and
     *  table): ums_version, tombstones, key prefix (null: no primary key), value prefix, source head, middle and
     *  tail, column count, per column (kind, optional 0/1, fallback or null), key columns, their names in JSON. */
    static ConfluentAvro parse(List<byte[]> a, int i) {
        ConfluentAvro d = new ConfluentAvro();
        d.version = a.get(i++);
        d.tombstones = "1".equals(Sidecar.string(a.get(i++)));
        d.keyPrefix = a.get(i++);
        d.valuePrefix = a.get(i++);
        d.srcHead = a.get(i++);
        d.srcMiddle = a.get(i++);
        d.srcTail = a.get(i++);
        int n = Integer.parseInt(Sidecar.string(a.get(i++)));
        d.fallbacks = new byte[n][];
        d.optional = new boolean[n];
        d.kinds = new int[n];
        d.params = new int[n];
        for (int c = 0; c < n; c++) {
            String kind = Sidecar.string(a.get(i++));
            d.optional[c] = "1".equals(Sidecar.string(a.get(i++)));
            d.fallbacks[c] = a.get(i++);
            columnKind(FORMAT, TAKES, kind, c, d.kinds, d.params);
        }
        d.keys = keys(a.get(i++));
        d.keyNames = new byte[d.keys.length][];
        for (int j = 0; j < d.keys.length; j++) d.keyNames[j] = a.get(i++);
        for (int key : d.keys) d.floatKey |= d.kinds[key] == FLOAT || d.kinds[key] == DOUBLE;
        return d;
    }

    @Override
    List<DebeziumJson.Rec> records(long umsId, long tsMs, String file, long pos, Long serverId, String gtid,
                                   char op, byte[] lines) {
        int[] bounds = imageBounds(umsId, op, lines);
        if (bounds == null || file == null) return null;
        int images = bounds.length / 2;
        if (op == 'u' && floatKey) return null; // Python compares the key's floats (-0.0 == 0.0, NaN), not bytes
        long tsUs, tsNs;
        try {
            tsUs = Math.multiplyExact(tsMs, 1000L);
            tsNs = Math.multiplyExact(tsMs, 1_000_000L);
        } catch (ArithmeticException e) {
            return null;
        }
        byte[] fileText = utf8Text(file);
        if (fileText == null) return null;
        Out w = new Out();
        // the source block up to "row" (varying per record), and the envelope's tail, once per event
        w.put(srcHead); zigzag(w, tsMs); w.put(srcMiddle);
        w.put(2); zigzag(w, tsUs); w.put(2); zigzag(w, tsNs);
        w.put(srcTail); zigzag(w, serverId == null ? 0 : serverId);
        if (gtid == null) w.put(0);
        else {
            byte[] g = utf8Text(gtid);
            if (g == null) return null;
            w.put(2);
            w.put(g);
        }
        w.put(fileText); zigzag(w, pos);
        byte[] source = w.toBytes();
        w.reset();
        w.put(2); zigzag(w, tsMs); w.put(2); zigzag(w, tsUs); w.put(2); zigzag(w, tsNs); w.put(0);
        byte[] tail = w.toBytes();
        byte[] id = ascii(Long.toString(umsId));
        List<DebeziumJson.Rec> out = new ArrayList<>();
        int n = kinds.length;
        byte[][] before = new byte[n][], after = new byte[n][];
        for (int t = 0; t < images; t++) {
            byte[][] image = op == 'u' && t % 2 == 0 ? before : after;
            if (!convert(lines, bounds[2 * t], bounds[2 * t + 1], image)) return null;
            if (op == 'u' && t % 2 == 0) continue;
            List<Object[]> headers = List.of(new Object[] {UMS_ID, id}, new Object[] {UMS_UID, uid(id, t, w)},
                new Object[] {UMS_VERSION, version});
            if (op == 'i') {
                byte[] key = key(after, w);
                if (key == NONE) return null;
                out.add(new DebeziumJson.Rec(key, envelope(OP_C, null, after, source, t, tail, w), headers));
            } else if (op == 'd') {
                byte[] key = key(after, w);
                if (key == NONE) return null;
                out.add(new DebeziumJson.Rec(key, envelope(OP_D, after, null, source, t, tail, w), headers));
                if (tombstones) out.add(new DebeziumJson.Rec(key, null, headers));
            } else {
                byte[] oldKey = key(before, w), newKey = key(after, w);
                if (oldKey == NONE || newKey == NONE) return null;
                if (Arrays.equals(oldKey, newKey)) {
                    out.add(new DebeziumJson.Rec(newKey, envelope(OP_U, before, after, source, t, tail, w), headers));
                    continue;
                }
                // a key change: a delete of the old key (and its tombstone), a create of the new one, each with
                // the other key in JSON (debezium.events)
                byte[] oldJson = keyJson(before, w), newJson = keyJson(after, w);
                if (oldJson == null || newJson == null) return null;
                List<Object[]> newH = with(headers, DebeziumJson.NEW_KEY, newJson),
                    oldH = with(headers, DebeziumJson.OLD_KEY, oldJson);
                out.add(new DebeziumJson.Rec(oldKey, envelope(OP_D, before, null, source, t, tail, w), newH));
                if (tombstones) out.add(new DebeziumJson.Rec(oldKey, null, newH));
                out.add(new DebeziumJson.Rec(newKey, envelope(OP_C, null, after, source, t, tail, w), oldH));
            }
        }
        return out;
    }

    /** The key: its prefix and the key columns' values (a record of non-optional fields); null without a primary
     *  key, NONE when a key value is null (Python refuses it). */
    private byte[] key(byte[][] image, Out w) {
        if (keyPrefix == null || keys.length == 0) return null;
        w.reset();
        w.put(keyPrefix);
        for (int k : keys) {
            byte[] v = image[k];
            if (v == NULL) return NONE;
            w.put(v);
        }
        return w.toBytes();
    }

    /** The key's Connect values in JSON as debezium.dump_json writes them ({@code {"id":1}}: bytes in Base64),
     *  read back from their Avro bytes; null when not certain. */
    private byte[] keyJson(byte[][] image, Out w) {
        w.reset();
        w.put('{');
        for (int j = 0; j < keys.length; j++) {
            if (j > 0) w.put(',');
            w.put(keyNames[j]);
            w.put(':');
            byte[] v = image[keys[j]];
            switch (kinds[keys[j]]) {
                case BOOL: w.ascii(v[0] == 0 ? "false" : "true"); break;
                case INT: case LONG: case ULONG: case DATE: case DT_MS: case DT_US: case TIME_US: case TIME_MS:
                    w.num(unzigzag(v)); break;
                case UDEC: case DEC: case BYTES: case BITS: {
                    w.put('"');
                    w.put(Base64.getEncoder().encode(Arrays.copyOfRange(v, unzigzagSize(v), v.length)));
                    w.put('"');
                    break;
                }
                case TS: case STR: case BIN_HEX: case BIN_B64: case BIN_B64URL: {
                    int from = unzigzagSize(v);
                    if (!w.utf8String(v, from, v.length - from)) return null;
                    break;
                }
                default: return null; // floats: declined before
            }
        }
        w.put('}');
        return w.toBytes();
    }

    /** The long an Avro varint at the start of v holds. */
    private static long unzigzag(byte[] v) {
        long n = 0;
        int shift = 0;
        for (byte x : v) {
            n |= (long) (x & 0x7F) << shift;
            if ((x & 0x80) == 0) break;
            shift += 7;
        }
        return (n >>> 1) ^ -(n & 1);
    }

    /** How many bytes the varint at the start of v takes (a length prefix). */
    private static int unzigzagSize(byte[] v) {
        int k = 0;
        while ((v[k] & 0x80) != 0) k++;
        return k + 1;
    }

    private byte[] envelope(byte[] op, byte[][] old, byte[][] now, byte[] source, int row, byte[] tail, Out w) {
        w.reset();
        w.put(valuePrefix);
        image(old, w);
        image(now, w);
        w.put(source);
        zigzag(w, row);
        w.put(0); // thread: null
        w.put(0); // query: null
        w.put(op);
        w.put(tail);
        return w.toBytes();
    }

    /** A row image: the optional Value record (["null", Value]), its fields in order. */
    private void image(byte[][] values, Out w) {
        if (values == null) { w.put(0); return; }
        w.put(2);
        for (int c = 0; c < values.length; c++) {
            byte[] v = values[c];
            if (optional[c]) {
                if (v == NULL) { w.put(0); continue; }
                w.put(2);
            }
            w.put(v);
        }
    }

    /** One line's tokens converted into {@code into} (each column's Avro bytes without its union index, or NULL);
     *  false when the sidecar must convert them. */
    private boolean convert(byte[] line, int from, int to, byte[][] into) {
        int c = 0, i = from;
        while (i <= to) {
            if (c >= kinds.length) return false;
            int end = UmsTokens.tokenEnd(line, i, to);
            if (end < 0) return false;
            byte[] v = value(c, line, i, end);
            if (v == null) return false;
            if (v == NONE) v = fallbacks[c] == null ? NULL : fallbacks[c];
            if (v == NULL && !optional[c]) return false; // Python cannot write a null in a NOT NULL field
            into[c++] = v;
            i = end + 1;
        }
        return c == kinds.length;
    }

    /** The Avro bytes of column c's token b[s, e); NULL for a null token, NONE for Python's None, null when not
     *  certain. */
    private byte[] value(int c, byte[] b, int s, int e) {
        if (UmsTokens.isNull(b, s, e)) return NULL;
        if (e <= s) return null;
        boolean quoted = b[s] == '"';
        int from = quoted ? s + 1 : s, to = quoted ? e - 1 : e;
        if (quoted && (e - s < 2 || b[e - 1] != '"')) return null;
        try {
            switch (kinds[c]) {
                case BOOL:
                    if (quoted || !UmsTokens.integer(b, s, e)) return null;
                    return new byte[] {(byte) (e - s == 1 && b[s] == '0' ? 0 : 1)};
                case INT:
                    if (quoted || !UmsTokens.integer(b, s, e)) return null;
                    return zigzag(parseLong(b, s, e));
                case LONG:
                    if (!UmsTokens.integer(b, from, to)) return null;
                    return zigzag(parseLong(b, from, to));
                case ULONG:
                    if (!UmsTokens.integer(b, from, to) || b[from] == '-') return null;
                    return zigzag(Long.parseUnsignedLong(UmsTokens.ascii(b, from, to)));
                case UDEC: {
                    if (!UmsTokens.integer(b, from, to)) return null;
                    return blob(new BigInteger(UmsTokens.ascii(b, from, to)).toByteArray());
                }
                case DEC: {
                    if (!quoted) return null;
                    long v = UmsTokens.unscaled(b, from, to, params[c]);
                    if (v == UmsTokens.NOT_DECIMAL) return null;
                    if (v == UmsTokens.WIDE) {
                        BigDecimal d = new BigDecimal(UmsTokens.ascii(b, from, to)).setScale(params[c],
                            RoundingMode.UNNECESSARY);
                        return blob(d.unscaledValue().toByteArray());
                    }
                    int size = UmsTokens.twosComplementSize(v); // below 64: its zigzag is one byte
                    byte[] out = new byte[1 + size];
                    out[0] = (byte) (size << 1);
                    UmsTokens.twosComplement(v, out, 1);
                    return out;
                }
                case FLOAT: case DOUBLE: {
                    String t = UmsTokens.ascii(b, from, to);
                    if (!NUMBER.matcher(t).matches()) return null;
                    double d = Double.parseDouble(t);
                    if (Double.isInfinite(d)) return null;
                    if (!quoted && d == 0 && t.indexOf('.') < 0 && t.indexOf('e') < 0 && t.indexOf('E') < 0)
                        d = 0.0; // json.loads reads -0 as the int 0, and float(0) is 0.0
                    if (kinds[c] == DOUBLE) return ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN).putDouble(d).array();
                    float f = (float) d;
                    if (Float.isInfinite(f)) return null; // struct.pack('<f') overflows
                    return ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN).putFloat(f).array();
                }
                case DATE: {
                    if (!quoted || to - from != 10) return null;
                    if (!UmsTokens.dateDigits(b, from)) return null;
                    LocalDate d = UmsTokens.date(b, from);
                    return d == null ? NONE : zigzag(d.toEpochDay());
                }
                case DT_MS: case DT_US: {
                    long[] us = datetime(b, s, e);
                    if (us == null) return null;
                    if (us.length == 0) return NONE;
                    return zigzag(kinds[c] == DT_US ? us[0] : Math.floorDiv(us[0], 1000));
                }
                case TS: {
                    long[] us = datetime(b, s, e);
                    if (us == null) return null;
                    if (us.length == 0) return NONE;
                    String iso = UmsTokens.timestamp(b, s, us[0], params[c], "");
                    return iso == null ? null : text(iso);
                }
                case TIME_US: case TIME_MS: {
                    if (!quoted) return null;
                    Long us = UmsTokens.time(UmsTokens.ascii(b, from, to));
                    if (us == null) return null;
                    if (kinds[c] == TIME_US) return zigzag(us);
                    long ms = Math.floorDiv(us, 1000);
                    return ms >= 0 && ms < 86_400_000L ? zigzag(ms) : NONE;
                }
                case STR: {
                    if (!quoted) return null;
                    byte[] utf8 = jsonString(b, from, to);
                    return utf8 == null ? null : blob(utf8);
                }
                case BYTES: {
                    if (!quoted) return null;
                    byte[] raw = base64(b, from, to);
                    return raw == null ? null : blob(raw);
                }
                case BITS: {
                    byte[] le = UmsTokens.bits(b, from, to, params[c]);
                    return le == null ? null : blob(le);
                }
                case BIN_HEX: case BIN_B64: case BIN_B64URL: {
                    if (!quoted) return null;
                    byte[] raw = base64(b, from, to);
                    if (raw == null) return null;
                    if (kinds[c] == BIN_B64) return blob(Base64.getEncoder().encode(raw));
                    if (kinds[c] == BIN_B64URL) return blob(Base64.getUrlEncoder().encode(raw));
                    byte[] h = new byte[raw.length * 2];
                    for (int k = 0; k < raw.length; k++) {
                        h[2 * k] = (byte) Character.forDigit(raw[k] >> 4 & 15, 16);
                        h[2 * k + 1] = (byte) Character.forDigit(raw[k] & 15, 16);
                    }
                    return blob(h);
                }
                default: return null;
            }
        } catch (RuntimeException ex) { // a number out of range, an inexact decimal: Python says
            return null;
        }
    }

    /** An integer b[s, e) (checked by {@link #integer}) as a long; throws when out of range. */
    private static long parseLong(byte[] b, int s, int e) {
        boolean neg = b[s] == '-';
        int i = neg ? s + 1 : s;
        if (e - i > 18) return Long.parseLong(UmsTokens.ascii(b, s, e));
        long v = 0;
        for (; i < e; i++) v = v * 10 + (b[i] - '0');
        return neg ? -v : v;
    }

    /** Avro's long: zigzag, then base-128 varint (avro.py's ``zigzag``). */
    static void zigzag(Out w, long v) {
        long n = (v << 1) ^ (v >> 63);
        while ((n & ~0x7FL) != 0) {
            w.put((int) ((n & 0x7F) | 0x80));
            n >>>= 7;
        }
        w.put((int) n);
    }

    /** zigzag(v) as its own bytes. */
    static byte[] zigzag(long v) {
        long n = (v << 1) ^ (v >> 63);
        int size = 1;
        for (long m = n >>> 7; m != 0; m >>>= 7) size++;
        byte[] out = new byte[size];
        for (int k = 0; k < size - 1; k++, n >>>= 7) out[k] = (byte) ((n & 0x7F) | 0x80);
        out[size - 1] = (byte) n;
        return out;
    }

    /** Avro bytes (and a string's UTF-8): the length, then the bytes. */
    private static byte[] blob(byte[] raw) {
        byte[] size = zigzag(raw.length), out = Arrays.copyOf(size, size.length + raw.length);
        System.arraycopy(raw, 0, out, size.length, raw.length);
        return out;
    }

    private static byte[] text(String s) { return blob(s.getBytes(StandardCharsets.UTF_8)); }

    /** s as an Avro string; null when it holds a lone surrogate (Python's encode refuses it). */
    private static byte[] utf8Text(String s) {
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (!Character.isSurrogate(ch)) continue;
            if (!Character.isHighSurrogate(ch) || i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1)))
                return null;
            i++;
        }
        return text(s);
    }

    /** The UTF-8 bytes of a JSON string's body b[s, e) as json.loads then str.encode give them; null for what
     *  they refuse (invalid UTF-8, a control character, a bad escape, a lone surrogate). */
    static byte[] jsonString(byte[] b, int s, int e) {
        int ascii = s;
        while (ascii < e && b[ascii] >= 0x20 && b[ascii] != '\\') ascii++; // >= 0x20 and < 0x80 (signed bytes)
        if (ascii == e) return Arrays.copyOfRange(b, s, e);
        boolean plain = true;
        for (int i = s; i < e; i++) {
            int x = b[i] & 0xFF;
            if (x < 0x20) return null;
            if (x == '\\') { plain = false; break; }
        }
        CharsetDecoder dec = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT);
        String raw;
        try {
            raw = dec.decode(ByteBuffer.wrap(b, s, e - s)).toString();
        } catch (CharacterCodingException ex) {
            return null;
        }
        if (plain) return Arrays.copyOfRange(b, s, e);
        StringBuilder out = new StringBuilder(raw.length());
        for (int i = 0; i < raw.length(); i++) {
            char ch = raw.charAt(i);
            if (ch != '\\') { out.append(ch); continue; }
            if (++i >= raw.length()) return null;
            char x = raw.charAt(i);
            switch (x) {
                case '"': case '\\': case '/': out.append(x); break;
                case 'b': out.append('\b'); break;
                case 'f': out.append('\f'); break;
                case 'n': out.append('\n'); break;
                case 'r': out.append('\r'); break;
                case 't': out.append('\t'); break;
                case 'u': {
                    if (i + 4 >= raw.length()) return null;
                    String hex = raw.substring(i + 1, i + 5);
                    for (int k = 0; k < 4; k++) if ("0123456789abcdefABCDEF".indexOf(hex.charAt(k)) < 0) return null;
                    out.append((char) Integer.parseInt(hex, 16));
                    i += 4;
                    break;
                }
                default: return null;
            }
        }
        String t = out.toString();
        for (int i = 0; i < t.length(); i++) {
            char ch = t.charAt(i);
            if (!Character.isSurrogate(ch)) continue;
            if (!Character.isHighSurrogate(ch) || i + 1 >= t.length() || !Character.isLowSurrogate(t.charAt(i + 1)))
                return null;
            i++;
        }
        return t.getBytes(StandardCharsets.UTF_8);
    }

    /** Base64 text b[s, e) decoded, when canonical (padded, no stray bits: what Python's b64decode reads the
     *  same); null otherwise. */
    private static byte[] base64(byte[] b, int s, int e) {
        if ((e - s) % 4 != 0) return null;
        for (int i = s; i < e; i++) if (b[i] == '\\') return null;
        byte[] text = Arrays.copyOfRange(b, s, e);
        byte[] raw = Base64.getDecoder().decode(text);
        return Arrays.equals(Base64.getEncoder().encode(raw), text) ? raw : null;
    }

    /** {@link UmsTokens#datetime}, declining a date part without its dashes (DebeziumJson writes it as Python's
     *  None). */
    private static long[] datetime(byte[] b, int s, int e) {
        long[] us = UmsTokens.datetime(b, s, e);
        return us != null && (b[s + 5] != '-' || b[s + 8] != '-') ? null : us;
    }


    private static byte[] ascii(String s) { return s.getBytes(StandardCharsets.US_ASCII); }
}
