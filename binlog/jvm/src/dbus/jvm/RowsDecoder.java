package dbus.jvm;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.util.concurrent.ConcurrentHashMap;
import java.util.zip.CRC32;

/**
 * Raw event contract v1 record (binlog/rawevent.py) -> UMS JSON texts of its row images, byte for byte what
 * {@code dumps_compact} gives for the values of {@code ums.values.encode_column} of {@code binlog.rows.decode_rows(event)}:
 * one line per image (insert: after, delete: before, update: before0, after0, before1, ...), columns joined
 * by ",", lines by "\n". {@link #decode} returns null for anything it does not reproduce exactly (the caller
 * then decodes in Python). Not thread-safe: one instance per thread; the table-map cache is shared.
 */
public final class RowsDecoder {
    private static final int HEADER_LEN = 19, CRC_LEN = 4, TABLE_MAP_EVENT = 19;
    private static final int CACHE_MAX = 1024;
    private static final ConcurrentHashMap<ByteBuffer, TableMap> CACHE = new ConcurrentHashMap<>();

    private final Out out = new Out();
    private final CRC32 crc32 = new CRC32();
    /** Why the last decode returned null (for tests and logs). */
    public String why;
    /** Test mode: unsupported columns are written as ? and columns are separated by NUL, to compare the rest. */
    boolean lenient;

    /** The UTF-8 lines of the record's row images, or null when not handled here. */
    public byte[] decode(byte[] value) {
        why = null;
        try {
            return run(value);
        } catch (RuntimeException e) {
            why = "exception: " + e;
            return null;
        }
    }

    private byte[] fail(String reason) { why = reason; return null; }

    private final AvroRows avro = new AvroRows();

    /** The header of the last record given to {@link #decode} (null when it did not parse). */
    Header lastHeader;

    /** The table map of the last record {@link #decode} rendered (same instance for the same map bytes and types). */
    TableMap lastTable() { return lastMap; }

    /**
     * {@link #decode}, then (when it gave lines) a NUL and the lines' Avro section ({@link AvroRows}); the lines
     * alone when the Avro section cannot be written.
     */
    public byte[] decodeWithAvro(byte[] value) {
        byte[] json = decode(value);
        if (json == null || json.length == 0) return json;
        byte[] section = avro.section(json, 0, json.length, lastMap.cols);
        if (section == null) return json;
        byte[] both = new byte[json.length + 1 + section.length];
        System.arraycopy(json, 0, both, 0, json.length);
        System.arraycopy(section, 0, both, json.length + 1, section.length);
        return both;
    }

    private byte[] run(byte[] v) {
        if (v == null || v.length < 8 || v[0] != 'D' || v[1] != 'B' || v[2] != 'R') return fail("not a raw event");
        if (v[3] != 1) return fail("version");
        long hlen = u32be(v, 4);
        if (8 + hlen > v.length) return fail("truncated header");
        int bodyOff = 8 + (int) hlen;
        if (!validUtf8(v, 8, bodyOff)) return fail("header not UTF-8");
        Header h = Header.parse(v, 8, (int) hlen);
        lastHeader = h;
        if (h == null) return fail("header not parsed");
        if (!"rows".equals(h.str("kind"))) return fail("kind");
        if (h.values.containsKey("chunk")) return fail("chunk");
        for (String k : new String[] {"file", "pos", "next_pos", "ts", "schema", "table", "event_type", "crc", "tm_len"})
            if (!h.values.containsKey(k)) return fail("header lacks " + k);
        long eventType = h.integer("event_type");
        long tmLen = h.integer("tm_len");
        Object crcFlag = h.values.get("crc");
        if (!(crcFlag instanceof Boolean)) return fail("crc not a bool");
        boolean crc = (Boolean) crcFlag;
        String schema = h.str("schema"), table = h.str("table");
        if (schema == null || table == null) return fail("schema/table not strings");
        int bodyLen = v.length - bodyOff;
        if (!(0 < tmLen && tmLen < bodyLen)) return fail("tm_len");
        char op;
        int version;
        switch ((int) eventType) {
            case 23: op = 'i'; version = 1; break;
            case 30: op = 'i'; version = 2; break;
            case 24: op = 'u'; version = 1; break;
            case 31: op = 'u'; version = 2; break;
            case 25: op = 'd'; version = 1; break;
            case 32: op = 'd'; version = 2; break;
            default: return fail("event type");
        }
        if (eventType != (int) eventType) return fail("event type");
        Boolean mariadb = flavor(h, (int) eventType);
        if (mariadb == null) return fail("flavor");
        int tmOff = bodyOff, tmSize = (int) tmLen;
        int rOff = tmOff + tmSize, rSize = v.length - rOff;
        if (!checkEvent(v, tmOff, tmSize, crc, TABLE_MAP_EVENT)) return fail("table map event check");
        if (!checkEvent(v, rOff, rSize, crc, (int) eventType)) return fail("rows event check");
        java.util.Map<String, String> types = java.util.Collections.emptyMap();
        Object t = h.values.get("types");
        if (t instanceof java.util.Map) {
            @SuppressWarnings("unchecked") java.util.Map<String, String> m = (java.util.Map<String, String>) t;
            types = m;
        } else if (t != null && t != Header.NULL) return fail("types not an object of strings");
        TableMap tm = tableMap(v, tmOff, tmSize, crc, mariadb, types);
        if (!tm.schema.equals(schema) || !tm.table.equals(table)) return fail("table map names another table");
        if (tm.unsupported != null && !lenient) return fail(tm.unsupported);
        return rows(v, rOff, rSize, crc, op, version, tm);
    }

    private static Boolean flavor(Header h, int eventType) {
        Object f = h.values.get("flavor");
        if ("mariadb".equals(f)) return true;
        if ("mysql".equals(f)) return false;
        Object g = h.values.get("gtid");
        String gtid;
        if (g == null || g == Header.NULL || Boolean.FALSE.equals(g)) gtid = "";
        else if (g instanceof String) gtid = (String) g;
        else return null;
        if (!gtid.isEmpty()) {
            for (int i = 0; i < gtid.length(); i++) if (gtid.charAt(i) >= 0x80 || gtid.charAt(i) == '\n') return null;
            return gtid.matches("[0-9]+-[0-9]+-[0-9]+");
        }
        return eventType == 23 || eventType == 24 || eventType == 25;
    }

    private boolean checkEvent(byte[] v, int off, int size, boolean crc, int type) {
        if (size < HEADER_LEN + (crc ? CRC_LEN : 0)) return false;
        if ((v[off + 4] & 0xFF) != type) return false;
        if (u32le(v, off + 9) != size) return false;
        if (crc) {
            crc32.reset();
            crc32.update(v, off, size - CRC_LEN);
            if (crc32.getValue() != u32le(v, off + size - CRC_LEN)) return false;
        }
        return true;
    }

    // the last table map this decoder used: consecutive records of one table skip the shared cache
    private byte[] lastKey;
    private TableMap lastMap;

    private static final byte[] NO_TYPES = new byte[0];

    /** The types map as key bytes: name NUL type NUL ..., in name order (the map is a TreeMap). */
    private static byte[] typesKey(java.util.Map<String, String> types) {
        if (types.isEmpty()) return NO_TYPES;
        StringBuilder b = new StringBuilder();
        for (java.util.Map.Entry<String, String> e : new java.util.TreeMap<>(types).entrySet())
            b.append(e.getKey()).append('\0').append(e.getValue()).append('\0');
        return b.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    // key: table-map body, then the types key, then the flavor byte
    private TableMap tableMap(byte[] v, int off, int size, boolean crc, boolean mariadb, java.util.Map<String, String> types) {
        int from = off + HEADER_LEN, to = off + size - (crc ? CRC_LEN : 0);
        byte[] tk = typesKey(types);
        byte[] last = lastKey;
        if (last != null && last.length == to - from + tk.length + 1 && last[last.length - 1] == (byte) (mariadb ? 1 : 0)
            && java.util.Arrays.equals(v, from, to, last, 0, to - from)
            && java.util.Arrays.equals(tk, 0, tk.length, last, to - from, to - from + tk.length)) return lastMap;
        return sharedTableMap(v, off, size, crc, mariadb, types, tk);
    }

    private TableMap sharedTableMap(byte[] v, int off, int size, boolean crc, boolean mariadb,
                                    java.util.Map<String, String> types, byte[] tk) {
        int from = off + HEADER_LEN, to = off + size - (crc ? CRC_LEN : 0);
        byte[] key = new byte[to - from + tk.length + 1];
        System.arraycopy(v, from, key, 0, to - from);
        System.arraycopy(tk, 0, key, to - from, tk.length);
        key[key.length - 1] = (byte) (mariadb ? 1 : 0);
        ByteBuffer k = ByteBuffer.wrap(key);
        TableMap tm = CACHE.get(k);
        if (tm == null) {
            tm = TableMap.parse(v, off, size, crc, mariadb, types);
            if (CACHE.size() >= CACHE_MAX) CACHE.clear();
            CACHE.put(k, tm);
        }
        lastKey = key;
        lastMap = tm;
        return tm;
    }

    // ---------------------------------------------------------------- rows

    private byte[] rows(byte[] d, int off, int size, boolean crc, char op, int version, TableMap tm) {
        int o = off + HEADER_LEN;
        int end = off + size - (crc ? CRC_LEN : 0);
        long tableId = 0;
        for (int i = 5; i >= 0; i--) tableId = tableId << 8 | (d[o + i] & 0xFF);
        if (tableId != tm.tableId) return fail("table id");
        o += 8;
        if (version == 2) {
            int extra = u16le(d, o);
            if (extra < 2) return fail("extra data");
            o += extra;
        }
        if (o >= end) return fail("truncated");
        int first = d[o] & 0xFF;
        if (first >= 251) return fail("column count");
        int width = first;
        o++;
        if (width != tm.width) return fail("width");
        int nb = (width + 7) / 8;
        int images = op == 'u' ? 2 : 1;
        for (int k = 0; k < images; k++) {
            if (o + nb > end) return fail("truncated");
            for (int i = 0; i < nb; i++) {
                int want = i < nb - 1 || width % 8 == 0 ? 0xFF : (1 << (width % 8)) - 1;
                if ((d[o + i] & 0xFF) != want) return fail("row image not FULL");
            }
            o += nb;
        }
        Out w = out;
        w.reset();
        TableMap.Col[] cols = tm.cols;
        boolean firstLine = true;
        while (o < end) {
            for (int k = 0; k < images; k++) {
                if (!firstLine) w.put('\n');
                firstLine = false;
                o = image(d, o, end, cols, nb, w);
                if (o < 0) return null;
            }
        }
        if (o != end) return fail("rows overrun");
        return w.toBytes();
    }

    /** One row image at o: its JSON line into w; the offset after it, or -1 (why set). */
    private int image(byte[] d, int o, int end, TableMap.Col[] cols, int nb, Out w) {
        if (o + nb > end) { why = "truncated"; return -1; }
        int nulls = o;
        o += nb;
        for (int i = 0; i < cols.length; i++) {
            if (i > 0) w.put(lenient ? 0 : ',');
            if ((d[nulls + (i >> 3)] >> (i & 7) & 1) != 0) { w.ascii("null"); continue; }
            o = column(d, o, end, cols[i], w);
            if (o < 0) return -1;
        }
        return o;
    }

    private int need(int o, int n, int end) {
        if (n < 0 || o + n > end || o + n < o) throw new IndexOutOfBoundsException("truncated");
        return o;
    }

    private int column(byte[] d, int o, int end, TableMap.Col c, Out w) {
        switch (c.kind) {
            case TableMap.K_I8: need(o, 1, end); w.num(d[o]); return o + 1;
            case TableMap.K_U8: need(o, 1, end); w.num(d[o] & 0xFF); return o + 1;
            case TableMap.K_I16: need(o, 2, end); w.num((short) u16le(d, o)); return o + 2;
            case TableMap.K_U16: need(o, 2, end); w.num(u16le(d, o)); return o + 2;
            case TableMap.K_I24: { need(o, 3, end); int x = u24le(d, o); w.num(x << 8 >> 8); return o + 3; }
            case TableMap.K_U24: need(o, 3, end); w.num(u24le(d, o)); return o + 3;
            case TableMap.K_I32: need(o, 4, end); w.num((int) u32le(d, o)); return o + 4;
            case TableMap.K_U32: need(o, 4, end); w.put('"'); w.num(u32le(d, o)); w.put('"'); return o + 4;
            case TableMap.K_I64: need(o, 8, end); w.put('"'); w.num(u64le(d, o)); w.put('"'); return o + 8;
            case TableMap.K_U64: need(o, 8, end); w.put('"'); w.unsigned(u64le(d, o)); w.put('"'); return o + 8;
            case TableMap.K_YEAR: { need(o, 1, end); int y = d[o] & 0xFF; w.num(y == 0 ? 0 : 1900 + y); return o + 1; }
            case TableMap.K_DECIMAL: return decimal(d, o, end, c, w);
            case TableMap.K_DATETIME2: return datetime2(d, o, end, c, w);
            case TableMap.K_TIMESTAMP2: return timestamp2(d, o, end, c, w);
            case TableMap.K_DATE: {
                need(o, 3, end);
                int x = u24le(d, o);
                if (x >> 9 > 9999) { why = "year beyond 9999"; return -1; } // ums.values refuses it too
                w.put('"'); w.pad(x >> 9, 4); w.put('-'); w.pad(x >> 5 & 0xF, 2); w.put('-'); w.pad(x & 0x1F, 2); w.put('"');
                return o + 3;
            }
            case TableMap.K_TIME2: return time2(d, o, end, c, w);
            case TableMap.K_UTF8: case TableMap.K_CP1252: case TableMap.K_ASCII: case TableMap.K_BINARY: {
                need(o, c.lenSize, end);
                long n = 0;
                for (int i = c.lenSize - 1; i >= 0; i--) n = n << 8 | (d[o + i] & 0xFF);
                o += c.lenSize;
                if (n > end - o) throw new IndexOutOfBoundsException("truncated");
                int len = (int) n;
                boolean ok;
                if (c.kind == TableMap.K_UTF8) ok = w.utf8String(d, o, len);
                else if (c.kind == TableMap.K_BINARY) { w.base64(d, o, len, c.padTo); ok = true; }
                else ok = w.byteString(d, o, len, c.kind == TableMap.K_ASCII);
                if (!ok) { why = "text does not decode in its charset"; return -1; }
                return o + len;
            }
            case TableMap.K_ENUM: {
                need(o, c.lenSize, end);
                int idx = c.lenSize == 1 ? d[o] & 0xFF : u16le(d, o);
                if (idx >= c.members.length) { why = "enum index"; return -1; }
                w.put('"'); w.put(c.members[idx]); w.put('"');
                return o + c.lenSize;
            }
            case TableMap.K_SET: {
                need(o, c.lenSize, end);
                long mask = 0;
                for (int i = c.lenSize - 1; i >= 0; i--) mask = mask << 8 | (d[o + i] & 0xFF);
                w.put('"');
                boolean first = true;
                for (int i = 0; i < c.members.length; i++) {
                    if ((mask >>> i & 1) == 0) continue;
                    if (!first) w.put(',');
                    first = false;
                    w.put(c.members[i]);
                }
                w.put('"');
                return o + c.lenSize;
            }
            case TableMap.K_BIT: {
                need(o, c.bytes, end);
                long x = 0;
                for (int i = 0; i < c.bytes; i++) x = x << 8 | (d[o + i] & 0xFF);
                if (c.bits <= 31) {
                    if (x > Integer.MAX_VALUE) { why = "bit value out of int range"; return -1; }
                    w.num(x);
                } else { w.put('"'); w.unsigned(x); w.put('"'); }
                return o + c.bytes;
            }
            case TableMap.K_FLOAT: {
                need(o, 4, end);
                float f = Float.intBitsToFloat((int) u32le(d, o));
                if (!floatRepr(f, w)) { why = "float not finite"; return -1; }
                return o + 4;
            }
            case TableMap.K_DOUBLE: {
                need(o, 8, end);
                if (!doubleRepr(Double.longBitsToDouble(u64le(d, o)), w)) { why = "double not finite"; return -1; }
                return o + 8;
            }
            case TableMap.K_INET4: case TableMap.K_INET6: case TableMap.K_UUID: {
                need(o, 1, end);
                int n = d[o] & 0xFF, size = c.maxLength;
                o++;
                if (n > size) { why = "inet/uuid value longer than its column"; return -1; }
                need(o, n, end);
                byte[] b = new byte[size]; // the binlog drops trailing zero bytes
                System.arraycopy(d, o, b, 0, n);
                w.put('"');
                if (c.kind == TableMap.K_INET4) inet4(b, 0, w);
                else if (c.kind == TableMap.K_INET6) inet6(b, w);
                else uuid(b, w);
                w.put('"');
                return o + n;
            }
            case TableMap.K_SKIP_FIXED: need(o, c.padTo, end); w.put('?'); return o + c.padTo;
            case TableMap.K_SKIP_PREFIXED: {
                need(o, c.lenSize, end);
                long n = 0;
                for (int i = c.lenSize - 1; i >= 0; i--) n = n << 8 | (d[o + i] & 0xFF);
                w.put('?');
                return o + c.lenSize + (int) n;
            }
            default: throw new IllegalStateException("kind " + c.kind);
        }
    }

    private static final long[] POW10 = {1L, 10L, 100L, 1000L, 10000L, 100000L, 1000000L, 10000000L, 100000000L, 1000000000L};
    private final byte[] digits = new byte[96];

    /** DECIMAL: MySQL's packed form -> exact text with scale digits (the reference decoder's string). */
    private int decimal(byte[] d, int o, int end, TableMap.Col c, Out w) {
        int size = c.decimalSize;
        need(o, size, end);
        boolean neg = (d[o] & 0x80) == 0; // top bit flipped: 0 = negative
        int mask = neg ? 0xFF : 0;
        int pos = o, nd = 0;
        for (int g = 0; g < c.groupBytes.length; g++) {
            int gb = c.groupBytes[g], gd = c.groupDigits[g];
            long part = 0;
            for (int i = 0; i < gb; i++) {
                int b = (d[pos + i] & 0xFF) ^ mask;
                if (pos + i == o) b ^= 0x80;
                part = part << 8 | b;
            }
            pos += gb;
            if (part >= POW10[gd]) { why = "decimal group out of range"; return -1; }
            for (int k = gd - 1; k >= 0; k--) { digits[nd + k] = (byte) ('0' + part % 10); part /= 10; }
            nd += gd;
        }
        // unscaled integer text ('%0{scale+1}d'), then the point before the last scale digits
        int s = 0;
        while (s < nd - 1 && digits[s] == '0') s++;
        int scale = c.scale;
        int len = nd - s;
        int zeros = Math.max(0, scale + 1 - len);
        int total = len + zeros, intDigits = total - scale;
        w.put('"');
        if (neg) w.put('-');
        for (int i = 0; i < total; i++) {
            if (i == intDigits) w.put('.');
            w.put(i < zeros ? '0' : digits[s + i - zeros]);
        }
        w.put('"');
        return o + size;
    }

    private static long frac(byte[] d, int o, int fsize) {
        long x = 0;
        for (int i = 0; i < fsize; i++) x = x << 8 | (d[o + i] & 0xFF);
        return x;
    }

    private static final long[] FRAC_MULT = {1, 10000, 100, 1};

    /** DATETIME2 as the reference decoder + ums.values write it: '%04d-%02d-%02d %02d:%02d:%02d' +
     *  ('.%06d' % us)[:fsp+1]; a fraction with digits beyond fsp (damaged bytes) is refused there, null here. */
    private int datetime2(byte[] d, int o, int end, TableMap.Col c, Out w) {
        int fsize = (c.fsp + 1) / 2;
        need(o, 5 + fsize, end);
        long x = 0;
        for (int i = 0; i < 5; i++) x = x << 8 | (d[o + i] & 0xFF);
        x -= 0x8000000000L;
        if (x < 0) { why = "negative datetime"; return -1; }
        long ymd = x >> 17, hms = x & 0x1FFFF;
        long ym = ymd >> 5;
        if (ym / 13 > 9999) { why = "year beyond 9999"; return -1; } // ums.values refuses it too
        w.put('"');
        w.pad(ym / 13, 4); w.put('-'); w.pad(ym % 13, 2); w.put('-'); w.pad(ymd & 0x1F, 2); w.put(' ');
        w.pad(hms >> 12, 2); w.put(':'); w.pad(hms >> 6 & 0x3F, 2); w.put(':'); w.pad(hms & 0x3F, 2);
        if (fsize > 0) {
            long us = frac(d, o + 5, fsize) * FRAC_MULT[fsize];
            if (!fractionFits(us, c.fsp)) { why = "fraction beyond fsp"; return -1; }
            int start = w.len;
            w.pad(us, 6);
            w.len = start + c.fsp; // ('.%06d' % us)[:fsp + 1]
            w.ensure(1);
            System.arraycopy(w.buf, start, w.buf, start + 1, c.fsp);
            w.buf[start] = '.';
            w.len = start + 1 + c.fsp;
        }
        w.put('"');
        return o + 5 + fsize;
    }

    /** TIMESTAMP2: epoch seconds (BE) + fraction, as UTC text with fsp digits; zero as MySQL's zero text. */
    private int timestamp2(byte[] d, int o, int end, TableMap.Col c, Out w) {
        int fsize = (c.fsp + 1) / 2;
        need(o, 4 + fsize, end);
        long secs = u32be(d, o);
        long us = fsize > 0 ? frac(d, o + 4, fsize) * FRAC_MULT[fsize] : 0;
        w.put('"');
        if (secs == 0) {
            w.ascii("0000-00-00 00:00:00");
            if (c.fsp > 0) { w.put('.'); for (int i = 0; i < c.fsp; i++) w.put('0'); }
            w.put('"');
            return o + 4 + fsize;
        }
        long total = secs * 1_000_000L + us;
        long sec = total / 1_000_000L, micros = total % 1_000_000L;
        if (!fractionFits(micros, c.fsp)) { why = "fraction beyond fsp"; return -1; }
        long days = sec / 86400, rem = sec % 86400;
        civil(days, w);
        w.put(' ');
        w.pad(rem / 3600, 2); w.put(':'); w.pad(rem / 60 % 60, 2); w.put(':'); w.pad(rem % 60, 2);
        fraction(micros, c.fsp, w);
        w.put('"');
        return o + 4 + fsize;
    }

    private static boolean fractionFits(long micros, int fsp) { return micros % POW10[6 - fsp] == 0; }

    private static void fraction(long micros, int fsp, Out w) {
        if (fsp == 0) return;
        w.put('.');
        w.pad(micros / POW10[6 - fsp], fsp);
    }

    /** Days since 1970-01-01 -> YYYY-MM-DD (Howard Hinnant's civil_from_days). */
    private static void civil(long z, Out w) {
        z += 719468;
        long era = (z >= 0 ? z : z - 146096) / 146097;
        long doe = z - era * 146097;
        long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        long y = yoe + era * 400;
        long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        long mp = (5 * doy + 2) / 153;
        long dd = doy - (153 * mp + 2) / 5 + 1;
        long m = mp < 10 ? mp + 3 : mp - 9;
        if (m <= 2) y++;
        w.pad(y, 4); w.put('-'); w.pad(m, 2); w.put('-'); w.pad(dd, 2);
    }

    /** TIME2 (my_time_packed_from_binary) -> format_time(timedelta, fsp). */
    private int time2(byte[] d, int o, int end, TableMap.Col c, Out w) {
        int size = (c.fsp + 1) / 2;
        long packed;
        int used;
        if (size == 3) {
            need(o, 6, end);
            long x = 0;
            for (int i = 0; i < 6; i++) x = x << 8 | (d[o + i] & 0xFF);
            packed = x - 0x800000000000L;
            used = 6;
        } else {
            need(o, 3 + size, end);
            long whole = ((d[o] & 0xFF) << 16 | (d[o + 1] & 0xFF) << 8 | (d[o + 2] & 0xFF)) - 0x800000L;
            long fr = size > 0 ? frac(d, o + 3, size) : 0;
            if (whole < 0 && fr != 0) { whole += 1; fr -= 1L << (8 * size); }
            packed = (whole << 24) + fr * POW10[6 - 2 * size];
            used = 3 + size;
        }
        long sign = packed < 0 ? -1 : 1;
        if (packed < 0) packed = -packed;
        long hms = packed >> 24;
        long total = sign * ((((hms >> 12) & 0x3FF) * 3600L + ((hms >> 6) & 0x3F) * 60L + (hms & 0x3F)) * 1_000_000L
            + (packed & 0xFFFFFF));
        long abs = Math.abs(total);
        long secs = abs / 1_000_000L, micros = abs % 1_000_000L;
        if (!fractionFits(micros, c.fsp)) { why = "fraction beyond fsp"; return -1; }
        w.put('"');
        if (total < 0) w.put('-');
        w.pad(secs / 3600, 2); w.put(':'); w.pad(secs % 3600 / 60, 2); w.put(':'); w.pad(secs % 60, 2);
        fraction(micros, c.fsp, w);
        w.put('"');
        return o + used;
    }

    /** FLOAT as Python's float32_repr gives it and json.dumps prints it; false for NaN/infinity. */
    static boolean floatRepr(float f, Out w) {
        if (Float.isNaN(f) || Float.isInfinite(f)) return false;
        if (f == 0) { w.ascii(Float.floatToRawIntBits(f) < 0 ? "-0.0" : "0.0"); return true; }
        BigDecimal exact = new BigDecimal((double) f);
        for (int digits = 1; digits <= 9; digits++) { // '%.{digits}g' % value, first that packs back
            BigDecimal cand = exact.round(new MathContext(digits, RoundingMode.HALF_EVEN));
            double back = Double.parseDouble(cand.toString());
            if (!Double.isInfinite(back) && (float) back == f) { repr(cand, w); return true; }
        }
        return false; // Python keeps the double then: not reproduced here
    }

    /**
     * DOUBLE as Python's repr (json.dumps): the shortest decimal that reads back as the same double, the
     * nearest one when several have that length (ties to even); false for NaN/infinity.
     */
    static boolean doubleRepr(double x, Out w) {
        if (Double.isNaN(x) || Double.isInfinite(x)) return false;
        if (x == 0) { w.ascii(Double.doubleToRawLongBits(x) < 0 ? "-0.0" : "0.0"); return true; }
        BigDecimal exact = new BigDecimal(x);
        boolean boundary = (Double.doubleToRawLongBits(x) & 0xFFFFFFFFFFFFFL) == 0
            && (Double.doubleToRawLongBits(x) & 0x7FF0000000000000L) > 0x0010000000000000L;
        // round-tripping is monotonic in the digit count: binary search the shortest
        int lo = 1, hi = 17;
        BigDecimal best = null;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            BigDecimal c = shortestAt(exact, x, mid, boundary);
            if (c != null) { best = c; hi = mid - 1; } else lo = mid + 1;
        }
        if (best == null) return false;
        repr(best, w);
        return true;
    }

    private static BigDecimal shortestAt(BigDecimal exact, double x, int digits, boolean boundary) {
        BigDecimal c = exact.round(new MathContext(digits, RoundingMode.HALF_EVEN));
        if (Double.parseDouble(c.toString()) == x) return c;
        if (!boundary) return null;
        // at a power of two the interval below is half as wide: the nearest may miss where the other side fits
        for (RoundingMode m : new RoundingMode[] {RoundingMode.FLOOR, RoundingMode.CEILING}) {
            BigDecimal o = exact.round(new MathContext(digits, m));
            if (Double.parseDouble(o.toString()) == x) return o;
        }
        return null;
    }

    /** Python's float repr layout of a (non-zero) decimal: fixed for 1e-4 <= |x| < 1e16, else d.ddde+XX. */
    private static void repr(BigDecimal r, Out w) {
        r = r.stripTrailingZeros();
        String unscaled = r.unscaledValue().abs().toString();
        int nd = unscaled.length();
        int decpt = nd - r.scale(); // value = 0.DIGITS x 10^decpt
        if (r.signum() < 0) w.put('-');
        if (decpt > -4 && decpt <= 16) {
            if (decpt <= 0) {
                w.ascii("0.");
                for (int i = 0; i < -decpt; i++) w.put('0');
                w.ascii(unscaled);
            } else if (decpt >= nd) {
                w.ascii(unscaled);
                for (int i = nd; i < decpt; i++) w.put('0');
                w.ascii(".0");
            } else {
                w.ascii(unscaled.substring(0, decpt));
                w.put('.');
                w.ascii(unscaled.substring(decpt));
            }
        } else {
            w.put(unscaled.charAt(0));
            if (nd > 1) { w.put('.'); w.ascii(unscaled.substring(1)); }
            int e = decpt - 1;
            w.put('e');
            w.put(e < 0 ? '-' : '+');
            if (Math.abs(e) < 10) w.put('0');
            w.num(Math.abs(e));
        }
    }

    // ---------------------------------------------------------------- MariaDB INET4 / INET6 / UUID text

    /** INET4 as SELECT prints it: dotted quad. */
    static void inet4(byte[] b, int from, Out w) {
        for (int i = 0; i < 4; i++) { if (i > 0) w.put('.'); w.num(b[from + i] & 0xFF); }
    }

    private static final byte[] HEX = "0123456789abcdef".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    /**
     * INET6 as SELECT prints it (MariaDB's inet_ntop; binlog/rows.py's inet6_text): lowercase hex groups
     * without leading zeros, the first longest run of zero groups (even one) as "::", and a dotted quad at the end
     * when that run is groups 0-5 (IPv4-compatible) or groups 0-4 followed by ffff (IPv4-mapped).
     */
    static void inet6(byte[] b, Out w) {
        int[] g = new int[8];
        for (int i = 0; i < 8; i++) g[i] = (b[2 * i] & 0xFF) << 8 | (b[2 * i + 1] & 0xFF);
        int pos = 0, len = 0, start = -1;
        for (int i = 0; i <= 8; i++) {
            if (i < 8 && g[i] == 0) { if (start < 0) start = i; }
            else if (start >= 0) { if (i - start > len) { pos = start; len = i - start; } start = -1; }
        }
        if (len < 1) pos = -1; // MariaDB compresses a single zero group too
        if (pos == 0 && (len == 6 || (len == 5 && g[5] == 0xFFFF))) {
            w.ascii(len == 6 ? "::" : "::ffff:");
            inet4(b, 12, w);
            return;
        }
        for (int i = 0; i < 8; i++) {
            if (i == pos) { w.ascii("::"); i += len - 1; continue; }
            if (i > 0 && i != pos + len) w.put(':');
            hexGroup(g[i], w);
        }
    }

    private static void hexGroup(int x, Out w) {
        boolean started = false;
        for (int shift = 12; shift >= 0; shift -= 4) {
            int nib = x >> shift & 0xF;
            if (nib != 0 || started || shift == 0) { w.put(HEX[nib]); started = true; }
        }
    }

    /** UUID as SELECT prints it: lowercase 8-4-4-4-12 hex of the bytes in the binlog's order. */
    static void uuid(byte[] b, Out w) {
        for (int i = 0; i < 16; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10) w.put('-');
            w.put(HEX[(b[i] >> 4) & 0xF]);
            w.put(HEX[b[i] & 0xF]);
        }
    }

    // ---------------------------------------------------------------- little helpers

    static boolean validUtf8(byte[] s, int from, int to) {
        int i = from;
        while (i < to) {
            int b = s[i] & 0xFF;
            if (b < 0x80) { i++; continue; }
            int k;
            if (b >= 0xC2 && b <= 0xDF) k = 2;
            else if (b >= 0xE0 && b <= 0xEF) k = 3;
            else if (b >= 0xF0 && b <= 0xF4) k = 4;
            else return false;
            if (i + k > to) return false;
            for (int j = 1; j < k; j++) if ((s[i + j] & 0xC0) != 0x80) return false;
            int b1 = s[i + 1] & 0xFF;
            if (b == 0xE0 && b1 < 0xA0 || b == 0xED && b1 >= 0xA0 || b == 0xF0 && b1 < 0x90 || b == 0xF4 && b1 >= 0x90) return false;
            i += k;
        }
        return true;
    }

    private static int u16le(byte[] d, int o) { return (d[o] & 0xFF) | (d[o + 1] & 0xFF) << 8; }
    private static int u24le(byte[] d, int o) { return (d[o] & 0xFF) | (d[o + 1] & 0xFF) << 8 | (d[o + 2] & 0xFF) << 16; }
    private static long u32le(byte[] d, int o) { return (u16le(d, o) | (long) u16le(d, o + 2) << 16) & 0xFFFFFFFFL; }
    private static long u32be(byte[] d, int o) {
        return ((long) (d[o] & 0xFF) << 24 | (d[o + 1] & 0xFF) << 16 | (d[o + 2] & 0xFF) << 8 | (d[o + 3] & 0xFF));
    }
    private static long u64le(byte[] d, int o) { return u32le(d, o) | u32le(d, o + 4) << 32; }
}
