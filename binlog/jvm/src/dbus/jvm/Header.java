package dbus.jvm;

import java.util.HashMap;
import java.util.Map;

/**
 * A flat JSON object parsed by hand (the raw event header). Values: String, Long (integers only), Boolean,
 * NULL, or OTHER for anything this decoder does not need to read exactly (floats, arrays, objects).
 */
final class Header {
    static final Object NULL = new Object(), OTHER = new Object();

    private final byte[] s;
    private int p;
    private final int end;
    final Map<String, Object> values = new HashMap<>();

    private Header(byte[] s, int off, int end) { this.s = s; this.p = off; this.end = end; }

    /** The parsed object, or null when the text is not a JSON object this parser reads. */
    static Header parse(byte[] s, int off, int len) {
        Header h = new Header(s, off, off + len);
        try {
            return h.object() ? h : null;
        } catch (RuntimeException e) {
            return null;
        }
    }

    private void ws() { while (p < end && (s[p] == ' ' || s[p] == '\t' || s[p] == '\n' || s[p] == '\r')) p++; }

    private boolean object() {
        ws();
        if (p >= end || s[p] != '{') return false;
        p++;
        ws();
        if (p < end && s[p] == '}') { p++; ws(); return p == end; }
        while (true) {
            ws();
            String k = string();
            if (k == null) return false;
            ws();
            if (p >= end || s[p] != ':') return false;
            p++;
            ws();
            Object v = value();
            if (v == null) return false;
            values.put(k, v);
            ws();
            if (p >= end) return false;
            if (s[p] == ',') { p++; continue; }
            if (s[p] == '}') { p++; ws(); return p == end; }
            return false;
        }
    }

    private Object value() {
        if (p >= end) return null;
        byte c = s[p];
        if (c == '"') return string();
        if (c == 't') return lit("true", Boolean.TRUE);
        if (c == 'f') return lit("false", Boolean.FALSE);
        if (c == 'n') return lit("null", NULL);
        if (c == '{') { // a flat object of strings (the "types" map) is kept, anything else skipped
            int at = p;
            Map<String, String> flat = flatObject();
            if (flat != null) return flat;
            p = at;
            return skipNested() ? OTHER : null;
        }
        if (c == '[') return skipNested() ? OTHER : null;
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        return null;
    }

    /** {"k": "v", ...} with string values only (a duplicate key keeps the last, as Python's json does). */
    private Map<String, String> flatObject() {
        Map<String, String> m = new java.util.TreeMap<>();
        p++;
        ws();
        if (p < end && s[p] == '}') { p++; return m; }
        while (true) {
            ws();
            String k = string();
            if (k == null) return null;
            ws();
            if (p >= end || s[p] != ':') return null;
            p++;
            ws();
            if (p >= end || s[p] != '"') return null;
            String v = string();
            if (v == null) return null;
            m.put(k, v);
            ws();
            if (p >= end) return null;
            if (s[p] == ',') { p++; continue; }
            if (s[p] == '}') { p++; return m; }
            return null;
        }
    }

    private Object lit(String word, Object v) {
        for (int i = 0; i < word.length(); i++) if (p + i >= end || s[p + i] != word.charAt(i)) return null;
        p += word.length();
        return v;
    }

    private Object number() {
        int start = p;
        if (s[p] == '-') p++;
        int digits = p;
        while (p < end && s[p] >= '0' && s[p] <= '9') p++;
        if (p == digits) return null;
        boolean integer = true;
        while (p < end && (s[p] == '.' || s[p] == 'e' || s[p] == 'E' || s[p] == '+' || s[p] == '-' || (s[p] >= '0' && s[p] <= '9'))) {
            integer = false;
            p++;
        }
        if (!integer) return OTHER;
        if (p - digits > 1 && s[digits] == '0') return null;
        if (p - start > 18) return OTHER;
        return Long.parseLong(new String(s, start, p - start, java.nio.charset.StandardCharsets.US_ASCII));
    }

    private boolean skipNested() {
        int depth = 0;
        while (p < end) {
            byte c = s[p];
            if (c == '"') { if (string() == null) return false; continue; }
            if (c == '[' || c == '{') depth++;
            else if (c == ']' || c == '}') { depth--; if (depth == 0) { p++; return true; } }
            p++;
        }
        return false;
    }

    private String string() {
        if (p >= end || s[p] != '"') return null;
        p++;
        StringBuilder b = null;
        int start = p;
        while (p < end) {
            byte c = s[p];
            if (c == '"') {
                String tail = new String(s, start, p - start, java.nio.charset.StandardCharsets.UTF_8);
                p++;
                return b == null ? tail : b.append(tail).toString();
            }
            if ((c & 0xFF) < 0x20) return null;
            if (c == '\\') {
                if (b == null) b = new StringBuilder();
                b.append(new String(s, start, p - start, java.nio.charset.StandardCharsets.UTF_8));
                p++;
                if (p >= end) return null;
                byte e = s[p++];
                switch (e) {
                    case '"': b.append('"'); break;
                    case '\\': b.append('\\'); break;
                    case '/': b.append('/'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'n': b.append('\n'); break;
                    case 'r': b.append('\r'); break;
                    case 't': b.append('\t'); break;
                    case 'u': {
                        if (p + 4 > end) return null;
                        b.append((char) Integer.parseInt(new String(s, p, 4, java.nio.charset.StandardCharsets.US_ASCII), 16));
                        p += 4;
                        break;
                    }
                    default: return null;
                }
                start = p;
                continue;
            }
            p++;
        }
        return null;
    }

    String str(String key) { Object v = values.get(key); return v instanceof String ? (String) v : null; }

    /** The row change of a rows event ({@code i}, {@code u}, {@code d} by its {@code event_type}, v1 or v2), 0
     *  for any other event. */
    char op() {
        Object t = values.get("event_type");
        if (!(t instanceof Long)) return 0;
        switch ((int) (long) (Long) t) {
            case 23: case 30: return 'i';
            case 24: case 31: return 'u';
            case 25: case 32: return 'd';
            default: return 0;
        }
    }

    long integer(String key) {
        Object v = values.get(key);
        if (!(v instanceof Long)) throw new IllegalStateException("not an integer: " + key);
        return (Long) v;
    }
}
