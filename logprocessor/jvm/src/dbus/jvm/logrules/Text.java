package dbus.jvm.logrules;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;

/**
 * logprocessor/javatext.py in Java: the original's commons-lang/java.lang string semantics as the Python
 * reference reproduces them, positions in code points as Python counts them; and Python's repr and str.strip for
 * the messages and paths that operators.py words with them.
 */
final class Text {
    private Text() {}

    /** Character.isWhitespace's set, javatext.JAVA_WHITESPACE. */
    static final String JAVA_WHITESPACE = " \t\n\u000b\u000c\r\u001c\u001d\u001e\u001f\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
        + "\u2008\u2009\u200a\u2028\u2029\u205f\u3000";
    /** Python's str.isspace set. */
    static final String PY_SPACE = "\t\n\u000b\u000c\r\u001c\u001d\u001e\u001f \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
        + "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000";

    static boolean in(String set, int cp) {
        return set.indexOf(cp) >= 0;
    }

    static String pyStrip(String s) {
        return strip(s, PY_SPACE, true, true);
    }

    /** Python's str.strip/lstrip/rstrip(chars): code points of {@code chars} off the ends. */
    static String strip(String s, String chars, boolean left, boolean right) {
        int a = 0, b = s.length();
        if (left) while (a < b) { int cp = s.codePointAt(a); if (!in(chars, cp)) break; a += Character.charCount(cp); }
        if (right) while (b > a) { int cp = s.codePointBefore(b); if (!in(chars, cp)) break; b -= Character.charCount(cp); }
        return s.substring(a, b);
    }

    static String deleteChars(String s, String chars) {
        if (chars == null || chars.isEmpty()) return s;
        StringBuilder out = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); ) {
            int cp = s.codePointAt(i);
            if (!in(chars, cp)) out.appendCodePoint(cp);
            i += Character.charCount(cp);
        }
        return out.toString();
    }

    /** StringUtils.splitByWholeSeparatorPreserveAllTokens as javatext reproduces it. */
    static List<String> splitByWholeSeparator(String value, String sep) {
        List<String> out = new ArrayList<>();
        if (value.isEmpty()) return out;
        if (sep == null || sep.isEmpty()) {
            int start = 0;
            for (int i = 0; i < value.length(); ) {
                int cp = value.codePointAt(i);
                int w = Character.charCount(cp);
                if (in(JAVA_WHITESPACE, cp)) { out.add(value.substring(start, i)); start = i + w; }
                i += w;
            }
            out.add(value.substring(start));
            return out;
        }
        int start = 0, at;
        while ((at = value.indexOf(sep, start)) >= 0) { out.add(value.substring(start, at)); start = at + sep.length(); }
        out.add(value.substring(start));
        return out;
    }

    /** Python's int() of text matching [+-]?\d+ (Unicode decimal digits), or null. */
    /** pyInt's value of 1 to 18 ASCII digits (a sign when {@code signed}), else Long.MIN_VALUE (pyInt decides). */
    static long asciiLong(String text, boolean signed) {
        if (text == null) return Long.MIN_VALUE;
        int n = text.length(), i = 0;
        boolean neg = false;
        if (signed && n > 0 && (text.charAt(0) == '+' || text.charAt(0) == '-')) {
            neg = text.charAt(0) == '-';
            i = 1;
        }
        if (i == n || n - i > 18) return Long.MIN_VALUE;
        long v = 0;
        for (; i < n; i++) {
            char c = text.charAt(i);
            if (c < '0' || c > '9') return Long.MIN_VALUE;
            v = v * 10 + (c - '0');
        }
        return neg ? -v : v;
    }

    static BigInteger pyInt(String text) {
        if (text == null || text.isEmpty()) return null;
        int i = 0;
        boolean neg = false;
        if (text.charAt(0) == '+' || text.charAt(0) == '-') { neg = text.charAt(0) == '-'; i = 1; }
        if (i == text.length()) return null;
        StringBuilder digits = new StringBuilder();
        while (i < text.length()) {
            int cp = text.codePointAt(i);
            if (Character.getType(cp) != Character.DECIMAL_DIGIT_NUMBER) return null;
            digits.append((char) ('0' + Character.digit(cp, 10)));
            i += Character.charCount(cp);
        }
        BigInteger n = new BigInteger(digits.toString());
        return neg ? n.negate() : n;
    }

    private static final BigInteger INT_MIN = BigInteger.valueOf(Integer.MIN_VALUE), INT_MAX = BigInteger.valueOf(Integer.MAX_VALUE),
        LONG_MIN = BigInteger.valueOf(Long.MIN_VALUE), LONG_MAX = BigInteger.valueOf(Long.MAX_VALUE),
        SAT_MIN = BigInteger.valueOf(Long.MIN_VALUE / 4), SAT_MAX = BigInteger.valueOf(Long.MAX_VALUE / 4);

    /** NumberUtils.toInt. */
    static int toInt(String text) {
        BigInteger n = pyInt(text);
        return n == null || n.compareTo(INT_MIN) < 0 || n.compareTo(INT_MAX) > 0 ? 0 : n.intValue();
    }

    /** Long.valueOf(text).toString(), or null. */
    static String longText(String text) {
        long fast = asciiLong(text, true);
        if (fast != Long.MIN_VALUE) return Long.toString(fast);
        BigInteger n = pyInt(text);
        return n == null || n.compareTo(LONG_MIN) < 0 || n.compareTo(LONG_MAX) > 0 ? null : n.toString();
    }

    /** An integer (ASCII digits, optional '-') clamped to +-2^61: a scope or a path index. */
    static long saturated(String text) {
        BigInteger n = new BigInteger(text);
        return n.max(SAT_MIN).min(SAT_MAX).longValue();
    }

    static int saturatedInt(String text) {
        BigInteger n = new BigInteger(text);
        return n.max(INT_MIN).min(INT_MAX).intValue();
    }

    /** Python's str.isdecimal() and int() of it, clamped; -1 when not decimal. */
    static long decimal(String text) {
        if (text == null || text.isEmpty() || text.charAt(0) == '+' || text.charAt(0) == '-') return -1;
        long fast = asciiLong(text, false);
        if (fast != Long.MIN_VALUE) return Math.min(fast, SAT_MAX.longValue());
        BigInteger n = pyInt(text);
        return n == null ? -1 : n.min(SAT_MAX).longValue();
    }

    /** Double.valueOf when finite, else null. */
    static Double doubleValue(String value) {
        String t = value.trim();
        try {
            double d = Double.parseDouble(t);
            return Double.isFinite(d) ? d : null;
        } catch (NumberFormatException e) {
            return null;
        }
    }

    static int cpLen(String s) {
        return s.codePointCount(0, s.length());
    }

    static int indexOf(String value, String search) {
        if (value == null || search == null) return -1;
        int i = value.indexOf(search);
        return i < 0 ? -1 : value.codePointCount(0, i);
    }

    static int lastIndexOf(String value, String search) {
        if (value == null || search == null) return -1;
        int i = value.lastIndexOf(search);
        return i < 0 ? -1 : value.codePointCount(0, i);
    }

    /** StringUtils.substring (javatext.substring), positions in code points; {@code end} null: to the end. */
    static String substring(String value, long start, Long end) {
        if (value == null) return null;
        long n = cpLen(value);
        if (end == null) {
            start = Math.max(start < 0 ? start + n : start, 0);
            return start > n ? "" : cpSub(value, start, n);
        }
        long e = Math.min(end < 0 ? end + n : end, n);
        start = start < 0 ? start + n : start;
        if (start > e) return "";
        long a = Math.max(start, 0), b = Math.max(e, 0);
        return a >= b ? "" : cpSub(value, a, b);
    }

    static String cpSub(String s, long a, long b) {
        int i = s.offsetByCodePoints(0, (int) a);
        int j = s.offsetByCodePoints(i, (int) (b - a));
        return s.substring(i, j);
    }

    /** operators._datetime_text. */
    static String datetimeText(String text) {
        if (text.indexOf(' ') < 0 && text.indexOf(':') >= 0) text = text.replaceFirst(":", " ");
        return cpLen(text) <= 26 ? text : cpSub(text, 0, 26);
    }

    /** Python's repr of a str (or "None"). */
    static String repr(String s) {
        if (s == null) return "None";
        char q = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
        StringBuilder b = new StringBuilder(s.length() + 2).append(q);
        for (int i = 0; i < s.length(); ) {
            int cp = s.codePointAt(i);
            i += Character.charCount(cp);
            if (cp == q || cp == '\\') b.append('\\').appendCodePoint(cp);
            else if (cp == '\n') b.append("\\n");
            else if (cp == '\r') b.append("\\r");
            else if (cp == '\t') b.append("\\t");
            else if (cp < 0x20 || cp == 0x7f || !printable(cp)) {
                if (cp < 0x100) b.append(String.format("\\x%02x", cp));
                else if (cp < 0x10000) b.append(String.format("\\u%04x", cp));
                else b.append(String.format("\\U%08x", cp));
            } else b.appendCodePoint(cp);
        }
        return b.append(q).toString();
    }

    private static boolean printable(int cp) {
        if (cp == ' ') return true;
        switch (Character.getType(cp)) {
            case Character.CONTROL: case Character.FORMAT: case Character.SURROGATE: case Character.PRIVATE_USE:
            case Character.UNASSIGNED: case Character.LINE_SEPARATOR: case Character.PARAGRAPH_SEPARATOR:
            case Character.SPACE_SEPARATOR:
                return false;
            default:
                return true;
        }
    }
}
