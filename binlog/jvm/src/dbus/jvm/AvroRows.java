package dbus.jvm;

import java.math.BigInteger;
import java.util.Base64;

/**
 * The Avro binary encoding of each row image's user columns, from the JSON lines {@link RowsDecoder} wrote:
 * what {@code ums.avro} writes for those fields of a tuple (appender/avrorows.py adds the system fields).
 *
 * <p>Per column, its kind (from the table map, as {@code ums.types.ums_type_for} types it): {@code I} an int
 * (zig-zag varint), {@code L} a UMS long (the decimal text as decimal(20, 0) bytes: big-endian two's complement
 * in {@code (bitLength(|x|) + 8) >> 3} bytes, as fastavro writes it), {@code D} a double (8 bytes little-endian),
 * {@code B} bytes (the Base64 text decoded), {@code S} a string (the JSON string's UTF-8); lower case when the
 * column is nullable, a union {@code ["null", T]}: 0 for null, 2 and the value otherwise.
 *
 * <p>{@link #section} gives, after the kinds (one ASCII letter per column), the image count n (u32 little-endian),
 * n + 1 offsets (u32 little-endian, into what follows) and the images' Avro bytes; or null when a token is not
 * what its kind expects (Python then writes the Avro from the JSON lines). Python compares the kinds with its
 * own schema's before using the bytes, so a type the two sides see differently can never pass.
 */
final class AvroRows {
    private final Out out = new Out();
    private final Out area = new Out();
    private int[] offsets = new int[1024];

    static byte kind(TableMap.Col c) {
        byte k;
        switch (c.kind) {
            case TableMap.K_I8: case TableMap.K_U8: case TableMap.K_I16: case TableMap.K_U16: case TableMap.K_I24:
            case TableMap.K_U24: case TableMap.K_I32: case TableMap.K_YEAR:
                k = 'I'; break;
            case TableMap.K_U32: case TableMap.K_I64: case TableMap.K_U64: k = 'L'; break;
            case TableMap.K_BIT: k = (byte) (c.bits <= 31 ? 'I' : 'L'); break;
            case TableMap.K_FLOAT: case TableMap.K_DOUBLE: k = 'D'; break;
            case TableMap.K_BINARY: k = 'B'; break;
            case TableMap.K_SKIP_FIXED: case TableMap.K_SKIP_PREFIXED: return 0;
            default: k = 'S';
        }
        return c.nullable ? (byte) (k | 0x20) : k;
    }

    /** The Avro section of {@code json} (lines of {@code cols.length} columns), or null. */
    byte[] section(byte[] json, int from, int to, TableMap.Col[] cols) {
        int n = cols.length;
        byte[] kinds = new byte[n];
        for (int i = 0; i < n; i++) if ((kinds[i] = kind(cols[i])) == 0) return null;
        area.reset();
        int rows = 0, p = from;
        while (p < to) {
            if (rows + 2 > offsets.length) offsets = java.util.Arrays.copyOf(offsets, offsets.length * 2);
            offsets[rows++] = area.len;
            for (int i = 0; i < n; i++) {
                if (i > 0) { if (p >= to || json[p] != ',') return null; p++; }
                p = value(json, p, to, kinds[i]);
                if (p < 0) return null;
            }
            if (p < to) { if (json[p] != '\n') return null; p++; if (p == to) return null; }
        }
        offsets[rows] = area.len;
        out.reset();
        out.put(kinds);
        u32(rows);
        for (int i = 0; i <= rows; i++) u32(offsets[i]);
        out.ensure(area.len);
        System.arraycopy(area.buf, 0, out.buf, out.len, area.len);
        out.len += area.len;
        return out.toBytes();
    }

    private void u32(int v) {
        out.ensure(4);
        out.buf[out.len++] = (byte) v;
        out.buf[out.len++] = (byte) (v >>> 8);
        out.buf[out.len++] = (byte) (v >>> 16);
        out.buf[out.len++] = (byte) (v >>> 24);
    }

    /** One token at p of kind k into the area; the offset after it, or -1. */
    private int value(byte[] j, int p, int to, byte k) {
        boolean nullable = (k & 0x20) != 0;
        k = (byte) (k & ~0x20);
        if (p + 4 <= to && j[p] == 'n' && j[p + 1] == 'u' && j[p + 2] == 'l' && j[p + 3] == 'l') {
            if (!nullable) return -1;
            area.put(0);
            return p + 4;
        }
        if (nullable) area.put(2);
        switch (k) {
            case 'I': {
                int e = number(j, p, to);
                if (e < 0) return -1;
                long v;
                try { v = Long.parseLong(new String(j, p, e - p, java.nio.charset.StandardCharsets.US_ASCII)); }
                catch (NumberFormatException x) { return -1; }
                if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) return -1;
                varint(v << 1 ^ v >> 63);
                return e;
            }
            case 'D': {
                int e = number(j, p, to);
                if (e < 0) return -1;
                double v;
                try { v = Double.parseDouble(new String(j, p, e - p, java.nio.charset.StandardCharsets.US_ASCII)); }
                catch (NumberFormatException x) { return -1; }
                if (Double.isNaN(v) || Double.isInfinite(v)) return -1;
                long b = Double.doubleToRawLongBits(v);
                area.ensure(8);
                for (int i = 0; i < 8; i++) area.buf[area.len++] = (byte) (b >>> (8 * i));
                return e;
            }
            case 'L': {
                int e = string(j, p, to, false);
                if (e < 0 || e - p < 3) return -1;
                for (int i = p + 1; i < e - 1; i++) {
                    byte c = j[i];
                    if (!(c >= '0' && c <= '9') && !(c == '-' && i == p + 1)) return -1;
                }
                BigInteger x;
                try { x = new BigInteger(new String(j, p + 1, e - p - 2, java.nio.charset.StandardCharsets.US_ASCII)); }
                catch (NumberFormatException ex) { return -1; }
                BigInteger abs = x.abs();
                if (abs.compareTo(DECIMAL_LIMIT) >= 0) return -1;
                int size = (abs.bitLength() + 8) >> 3;
                byte[] min = x.toByteArray(); // minimal two's complement, never longer than size: sign-extend
                varint((long) size << 1);
                area.ensure(size);
                byte fill = (byte) (x.signum() < 0 ? 0xFF : 0);
                for (int i = min.length; i < size; i++) area.buf[area.len++] = fill;
                area.put(min);
                return e;
            }
            case 'B': {
                int e = string(j, p, to, false);
                if (e < 0) return -1;
                byte[] raw;
                try { raw = Base64.getDecoder().decode(java.nio.ByteBuffer.wrap(j, p + 1, e - p - 2)).array(); }
                catch (IllegalArgumentException ex) { return -1; }
                varint((long) raw.length << 1);
                area.put(raw);
                return e;
            }
            default: return string(j, p, to, true); // 'S'
        }
    }

    private static final BigInteger DECIMAL_LIMIT = BigInteger.TEN.pow(20);

    /** The end of a JSON number at p (digits, sign, '.', exponent), or -1. */
    private static int number(byte[] j, int p, int to) {
        int e = p;
        while (e < to) {
            byte c = j[e];
            if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') e++;
            else break;
        }
        return e > p ? e : -1;
    }

    /**
     * The end of the JSON string at p (after its closing quote), or -1; with {@code write} its UTF-8, length
     * first, into the area (escapes resolved: the decoder writes \" \\ \n \r \t \b \f and \\u00xx).
     */
    private int string(byte[] j, int p, int to, boolean write) {
        if (p >= to || j[p] != '"') return -1;
        int i = p + 1;
        boolean escaped = false;
        while (i < to && j[i] != '"') {
            if (j[i] == '\\') { escaped = true; i += 2; } else i++;
        }
        if (i >= to) return -1;
        if (!write) return escaped ? -1 : i + 1;
        if (!escaped) {
            varint((long) (i - p - 1) << 1);
            area.ensure(i - p - 1);
            System.arraycopy(j, p + 1, area.buf, area.len, i - p - 1);
            area.len += i - p - 1;
            return i + 1;
        }
        byte[] s = new byte[i - p - 1];
        int n = 0;
        for (int q = p + 1; q < i; q++) {
            byte c = j[q];
            if (c != '\\') { s[n++] = c; continue; }
            byte x = j[++q];
            switch (x) {
                case '"': s[n++] = '"'; break;
                case '\\': s[n++] = '\\'; break;
                case '/': s[n++] = '/'; break;
                case 'n': s[n++] = '\n'; break;
                case 'r': s[n++] = '\r'; break;
                case 't': s[n++] = '\t'; break;
                case 'b': s[n++] = '\b'; break;
                case 'f': s[n++] = '\f'; break;
                case 'u': {
                    if (q + 4 >= i) return -1;
                    int cp = 0;
                    for (int h = 1; h <= 4; h++) {
                        int d = Character.digit(j[q + h], 16);
                        if (d < 0) return -1;
                        cp = cp << 4 | d;
                    }
                    if (cp >= 0x80) return -1; // the decoder escapes ASCII controls only
                    s[n++] = (byte) cp;
                    q += 4;
                    break;
                }
                default: return -1;
            }
        }
        varint((long) n << 1);
        area.ensure(n);
        System.arraycopy(s, 0, area.buf, area.len, n);
        area.len += n;
        return i + 1;
    }

    /** An already zig-zagged value as Avro's base-128 varint. */
    private void varint(long z) {
        area.ensure(10);
        while ((z & ~0x7FL) != 0) {
            area.buf[area.len++] = (byte) ((z & 0x7F) | 0x80);
            z >>>= 7;
        }
        area.buf[area.len++] = (byte) z;
    }
}
