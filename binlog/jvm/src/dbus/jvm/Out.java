package dbus.jvm;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** A growable byte buffer with the JSON writers the decoder needs (output is UTF-8, as json.dumps(ensure_ascii=False)). */
final class Out {
    byte[] buf = new byte[1 << 16];
    int len;

    void reset() { len = 0; }

    void ensure(int extra) {
        int need = len + extra;
        if (need > buf.length) buf = Arrays.copyOf(buf, Math.max(need, buf.length * 2));
    }

    void put(int b) {
        if (len == buf.length) ensure(1);
        buf[len++] = (byte) b;
    }

    void put(byte[] b) {
        ensure(b.length);
        System.arraycopy(b, 0, buf, len, b.length);
        len += b.length;
    }

    void ascii(String s) {
        int n = s.length();
        ensure(n);
        for (int i = 0; i < n; i++) buf[len++] = (byte) s.charAt(i);
    }

    /** Decimal text of v (no allocation). */
    void num(long v) {
        if (v == Long.MIN_VALUE) { ascii("-9223372036854775808"); return; }
        ensure(20);
        if (v < 0) { buf[len++] = '-'; v = -v; }
        int start = len;
        do { buf[len++] = (byte) ('0' + (int) (v % 10)); v /= 10; } while (v != 0);
        for (int i = start, j = len - 1; i < j; i++, j--) { byte t = buf[i]; buf[i] = buf[j]; buf[j] = t; }
    }

    void unsigned(long v) {
        if (v >= 0) num(v); else ascii(Long.toUnsignedString(v));
    }

    /** v (>= 0) zero-padded to at least width digits, as Python's %0Nd. */
    void pad(long v, int width) {
        if (v < 0) throw new IllegalStateException("negative");
        ensure(20 + width);
        int start = len;
        do { buf[len++] = (byte) ('0' + (int) (v % 10)); v /= 10; } while (v != 0);
        while (len - start < width) buf[len++] = '0';
        for (int i = start, j = len - 1; i < j; i++, j--) { byte t = buf[i]; buf[i] = buf[j]; buf[j] = t; }
    }

    private static final byte[] HEX = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);

    /** One escaped code point below 0x80 (json.dumps: \" \\ \n \r \t \b \f, other controls \\u00xx). */
    void escAscii(int c) {
        switch (c) {
            case '"': put('\\'); put('"'); return;
            case '\\': put('\\'); put('\\'); return;
            case '\n': put('\\'); put('n'); return;
            case '\r': put('\\'); put('r'); return;
            case '\t': put('\\'); put('t'); return;
            case '\b': put('\\'); put('b'); return;
            case '\f': put('\\'); put('f'); return;
            default:
                if (c < 0x20) {
                    ensure(6);
                    buf[len++] = '\\'; buf[len++] = 'u'; buf[len++] = '0'; buf[len++] = '0';
                    buf[len++] = HEX[c >> 4]; buf[len++] = HEX[c & 15];
                } else put(c);
        }
    }

    /**
     * A JSON string of UTF-8 bytes src[off, off+n), validated as strictly as Python's utf-8 codec (no overlongs,
     * no surrogates, nothing above U+10FFFF); false (and the buffer in an undefined state) when invalid.
     */
    boolean utf8String(byte[] src, int off, int n) {
        ensure(n + 2);
        buf[len++] = '"';
        int end = off + n;
        int i = off;
        while (i < end) {
            int b = src[i];
            if (b >= 0) {
                if (b >= 0x20 && b != '"' && b != '\\') {
                    if (len == buf.length) ensure(1);
                    buf[len++] = (byte) b;
                } else escAscii(b);
                i++;
                continue;
            }
            b &= 0xFF;
            int k;
            if (b >= 0xC2 && b <= 0xDF) {
                if (i + 1 >= end || (src[i + 1] & 0xC0) != 0x80) return false;
                k = 2;
            } else if (b >= 0xE0 && b <= 0xEF) {
                if (i + 2 >= end) return false;
                int b1 = src[i + 1] & 0xFF;
                if ((b1 & 0xC0) != 0x80 || (src[i + 2] & 0xC0) != 0x80) return false;
                if (b == 0xE0 && b1 < 0xA0) return false;   // overlong
                if (b == 0xED && b1 >= 0xA0) return false;  // surrogate
                k = 3;
            } else if (b >= 0xF0 && b <= 0xF4) {
                if (i + 3 >= end) return false;
                int b1 = src[i + 1] & 0xFF;
                if ((b1 & 0xC0) != 0x80 || (src[i + 2] & 0xC0) != 0x80 || (src[i + 3] & 0xC0) != 0x80) return false;
                if (b == 0xF0 && b1 < 0x90) return false;   // overlong
                if (b == 0xF4 && b1 >= 0x90) return false;  // above U+10FFFF
                k = 4;
            } else return false;
            ensure(k);
            System.arraycopy(src, i, buf, len, k);
            len += k;
            i += k;
        }
        put('"');
        return true;
    }

    /** cp1252 (Python's codec for MySQL latin1); -1 for the five bytes Python's cp1252 cannot decode. */
    static final int[] CP1252_HIGH = {
        0x20AC, -1, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, -1, 0x017D, -1,
        -1, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, -1, 0x017E, 0x0178};

    /** A JSON string of single-byte text: cp1252 (latin1) or, with ascii, ASCII only; false when undecodable. */
    boolean byteString(byte[] src, int off, int n, boolean ascii) {
        ensure(n * 3 + 2);
        buf[len++] = '"';
        for (int i = off, end = off + n; i < end; i++) {
            int b = src[i];
            if (b >= 0) { if (b >= 0x20 && b != '"' && b != '\\') put(b); else escAscii(b); continue; }
            if (ascii) return false;
            b &= 0xFF;
            int cp = b < 0xA0 ? CP1252_HIGH[b - 0x80] : b;
            if (cp < 0) return false;
            ensure(3);
            if (cp < 0x800) { buf[len++] = (byte) (0xC0 | cp >> 6); buf[len++] = (byte) (0x80 | cp & 0x3F); }
            else {
                buf[len++] = (byte) (0xE0 | cp >> 12); buf[len++] = (byte) (0x80 | cp >> 6 & 0x3F);
                buf[len++] = (byte) (0x80 | cp & 0x3F);
            }
        }
        put('"');
        return true;
    }

    private static final byte[] B64 =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".getBytes(StandardCharsets.US_ASCII);

    /** A JSON string of the standard padded Base64 of src[off, off+n) followed by pad zero bytes. */
    void base64(byte[] src, int off, int n, int padTo) {
        int total = Math.max(n, padTo);
        ensure((total + 2) / 3 * 4 + 2);
        buf[len++] = '"';
        int i = 0;
        for (; i + 3 <= total; i += 3) {
            int v = at(src, off, n, i) << 16 | at(src, off, n, i + 1) << 8 | at(src, off, n, i + 2);
            buf[len++] = B64[v >> 18 & 63]; buf[len++] = B64[v >> 12 & 63];
            buf[len++] = B64[v >> 6 & 63]; buf[len++] = B64[v & 63];
        }
        int rest = total - i;
        if (rest == 1) {
            int v = at(src, off, n, i) << 16;
            buf[len++] = B64[v >> 18 & 63]; buf[len++] = B64[v >> 12 & 63]; buf[len++] = '='; buf[len++] = '=';
        } else if (rest == 2) {
            int v = at(src, off, n, i) << 16 | at(src, off, n, i + 1) << 8;
            buf[len++] = B64[v >> 18 & 63]; buf[len++] = B64[v >> 12 & 63]; buf[len++] = B64[v >> 6 & 63];
            buf[len++] = '=';
        }
        buf[len++] = '"';
    }

    private static int at(byte[] src, int off, int n, int i) { return i < n ? src[off + i] & 0xFF : 0; }

    byte[] toBytes() { return Arrays.copyOf(buf, len); }
}
