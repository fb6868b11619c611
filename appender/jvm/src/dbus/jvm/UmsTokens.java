package dbus.jvm;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.util.regex.Pattern;

/**
 * The UMS wire tokens of the decoder's lines as the per-row formats ({@link DebeziumJson}, {@link ConfluentAvro},
 * {@link CanalJson}) read them: where a line's next token ends, and the parsers of its integers, decimals, dates,
 * times and datetimes, each as Python reads the same text (ums.scalars, date.fromisoformat). Each answers "not
 * certain" (null, -1, a sentinel) for what it does not read exactly as Python does; the caller then declines the
 * record and the sidecar writes it. No allocation per value beyond what a parser returns.
 */
final class UmsTokens {
    static final long EPOCH_DAY_US = 86_400_000_000L;
    /** {@link #unscaled}'s answers for a text that is not an exact decimal at the scale, and for one wider than a
     *  long's 18 digits (both out of reach of an unscaled value of at most 18 digits). */
    static final long NOT_DECIMAL = Long.MIN_VALUE, WIDE = Long.MAX_VALUE;
    /** Compiled once: String.matches compiled its pattern on every value (a tenth of the appender's time). */
    private static final Pattern TIME_TEXT = Pattern.compile("-?[0-9]{2,9}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,6})?");

    private UmsTokens() {}

    /**
     * The end (exclusive) of the token starting at {@code i} of a line ending at {@code to}: a JSON string
     * (escapes skipped) or the text up to the next comma; -1 when the line is not a sequence of such tokens
     * (an unterminated string, text after a string's closing quote).
     */
    static int tokenEnd(byte[] line, int i, int to) {
        int end;
        if (i < to && line[i] == '"') {
            end = i + 1;
            while (end < to && line[end] != '"') end += line[end] == '\\' ? 2 : 1;
            if (end >= to) return -1;
            end++;
        } else {
            end = i;
            while (end < to && line[end] != ',') end++;
        }
        return end < to && line[end] != ',' ? -1 : end;
    }

    /** b[s, e) is the token {@code null}. */
    static boolean isNull(byte[] b, int s, int e) {
        return e - s == 4 && b[s] == 'n' && b[s + 1] == 'u' && b[s + 2] == 'l' && b[s + 3] == 'l';
    }

    /** b[s, e) is an integer as Python's str(int) writes it: an optional minus, digits, no leading zero. */
    static boolean integer(byte[] b, int s, int e) {
        int i = s < e && b[s] == '-' ? s + 1 : s;
        if (i >= e || (b[i] == '0' && e - i > 1)) return false;
        for (; i < e; i++) if (b[i] < '0' || b[i] > '9') return false;
        return true;
    }

    /** The n decimal digits at o as an int; -1 when one is not a digit. */
    static int digits(byte[] b, int o, int n) {
        int v = 0;
        for (int k = 0; k < n; k++) {
            int dgt = b[o + k] - '0';
            if (dgt < 0 || dgt > 9) return -1;
            v = v * 10 + dgt;
        }
        return v;
    }

    /**
     * The unscaled value at {@code scale} of a decimal text b[s, e) ({@code -?[0-9]+(\.[0-9]+)?}): NOT_DECIMAL
     * for any other text or one not exact at the scale (a non-zero digit past it), WIDE when the unscaled value
     * has more than 18 digits (leading zeros counted: the caller's BigDecimal path decides).
     */
    static long unscaled(byte[] b, int s, int e, int scale) {
        int i = s < e && b[s] == '-' ? s + 1 : s, intFrom = i;
        while (i < e && b[i] >= '0' && b[i] <= '9') i++;
        int intTo = i, fracFrom = i, fracTo = i;
        if (i == intFrom) return NOT_DECIMAL;
        if (i < e) {
            if (b[i] != '.') return NOT_DECIMAL;
            fracFrom = ++i;
            while (i < e && b[i] >= '0' && b[i] <= '9') i++;
            if (i == fracFrom || i != e) return NOT_DECIMAL;
            fracTo = i;
        }
        for (int k = fracFrom + scale; k < fracTo; k++) if (b[k] != '0') return NOT_DECIMAL; // inexact at the scale
        if (intTo - intFrom + scale > 18) return WIDE;
        long v = 0;
        for (int k = intFrom; k < intTo; k++) v = v * 10 + (b[k] - '0');
        for (int k = 0; k < scale; k++) v = v * 10 + (fracFrom + k < fracTo ? b[fracFrom + k] - '0' : 0);
        return b[s] == '-' ? -v : v;
    }

    /** An unsigned integer b[s, e) (a BIT column's value) as its {@code size} bytes, least significant first;
     *  null when it is not one or does not fit. */
    static byte[] bits(byte[] b, int s, int e, int size) {
        if (!integer(b, s, e) || b[s] == '-') return null;
        BigInteger x = new BigInteger(ascii(b, s, e));
        if (x.bitLength() > size * 8) return null;
        byte[] be = x.toByteArray(), le = new byte[size];
        for (int k = 0; k < size && k < be.length; k++) le[k] = be[be.length - 1 - k];
        return le;
    }

    /** How many bytes v's minimal two's complement takes (BigInteger.toByteArray's length). */
    static int twosComplementSize(long v) {
        return (64 - Long.numberOfLeadingZeros(v < 0 ? ~v : v)) / 8 + 1;
    }

    /** v's minimal two's complement, big-endian, into out[at, at + twosComplementSize(v)). */
    static void twosComplement(long v, byte[] out, int at) {
        int n = twosComplementSize(v);
        for (int k = at + n - 1; k >= at; k--, v >>= 8) out[k] = (byte) v;
    }

    /** yyyy-MM-dd at o as Python's date.fromisoformat reads it; null where it raises (a zero date, and any
     *  text that is not digits and dashes: a caller that must decline those checks {@link #dateDigits} first). */
    static LocalDate date(byte[] b, int o) {
        if (b[o + 4] != '-' || b[o + 7] != '-') return null;
        int y = digits(b, o, 4), m = digits(b, o + 5, 2), d = digits(b, o + 8, 2);
        if (y < 1 || m < 1 || m > 12 || d < 1) return null;
        LocalDate first = LocalDate.of(y, m, 1);
        return d > first.lengthOfMonth() ? null : first.withDayOfMonth(d);
    }

    /** yyyy-MM-dd at o, all digits (what date.fromisoformat reads as such). */
    static boolean dateDigits(byte[] b, int o) {
        return b[o + 4] == '-' && b[o + 7] == '-' && digits(b, o, 4) >= 0 && digits(b, o + 5, 2) >= 0
            && digits(b, o + 8, 2) >= 0;
    }

    /**
     * "yyyy-MM-dd HH:mm:ss[.f{1,6}]" (quoted, b[s, e)) -> {µs since the epoch}; {} for Python's None (a zero
     * date, an hour past 23...); null when not certain. The date's dashes are not checked: a date part that is
     * digits but not dashes is Python's None here (DebeziumJson); {@link ConfluentAvro} declines it.
     */
    static long[] datetime(byte[] b, int s, int e) {
        int n = e - s - 2;
        if (b[s] != '"' || b[e - 1] != '"' || n < 19 || n == 20 || n > 26) return null;
        int o = s + 1;
        if (b[o + 10] != ' ' || b[o + 13] != ':' || b[o + 16] != ':' || (n > 19 && b[o + 19] != '.')) return null;
        int hh = digits(b, o + 11, 2), mm = digits(b, o + 14, 2), ss = digits(b, o + 17, 2);
        long frac = 0;
        for (int k = 0; k < 6; k++) {
            int at = o + 20 + k;
            int dgt = at < o + n ? b[at] - '0' : 0;
            if (dgt < 0 || dgt > 9) return null;
            frac = frac * 10 + dgt;
        }
        if (hh < 0 || mm < 0 || ss < 0 || digits(b, o, 4) < 0 || digits(b, o + 5, 2) < 0 || digits(b, o + 8, 2) < 0)
            return null;
        LocalDate d = date(b, o);
        if (d == null || hh > 23 || mm > 59 || ss > 59) return new long[0];
        return new long[] {d.toEpochDay() * EPOCH_DAY_US + (hh * 3600L + mm * 60L + ss) * 1_000_000L + frac};
    }

    /**
     * A datetime token b[s, e) read by {@link #datetime} as {@code us} in Connect's ZonedTimestamp text
     * ({@code yyyy-MM-ddTHH:mm:ss[.f]Z}: the fraction's {@code fsp} digits, all six at 0 when not zero), between
     * two {@code quote}s; null when the value has digits past fsp (not certain).
     */
    static String timestamp(byte[] b, int s, long us, int fsp, String quote) {
        long micros = Math.floorMod(us, 1_000_000L);
        String digits = Long.toString(1_000_000 + micros).substring(1), frac; // %06d
        if (fsp == 0) frac = micros == 0 ? "" : "." + digits;
        else {
            for (int k = fsp; k < 6; k++) if (digits.charAt(k) != '0') return null;
            frac = "." + digits.substring(0, fsp);
        }
        return quote + ascii(b, s + 1, s + 11) + "T" + ascii(b, s + 12, s + 20) + frac + "Z" + quote;
    }

    /** ums.scalars.parse_time in µs: [-]HH:MM:SS[.ffffff] (two to nine hour digits); null when not one. */
    static Long time(String t) {
        if (!TIME_TEXT.matcher(t).matches()) return null;
        boolean neg = t.startsWith("-");
        String[] p = (neg ? t.substring(1) : t).split("[:.]");
        long us = (Long.parseLong(p[0]) * 3600 + Long.parseLong(p[1]) * 60 + Long.parseLong(p[2])) * 1_000_000L;
        if (p.length > 3) us += Long.parseLong((p[3] + "00000").substring(0, 6));
        return neg ? -us : us;
    }

    /** b[s, e) as a String, a char a byte (the tokens parsed as text are ASCII). */
    static String ascii(byte[] b, int s, int e) { return new String(b, s, e - s, StandardCharsets.ISO_8859_1); }
}
