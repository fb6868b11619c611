package dbus.jvm.logrules;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;

/**
 * JSON text as logprocessor/jsontext.py reads and writes it: strict JSON read by Jackson's streaming parser,
 * numbers kept as written ({@link Num}), objects in input order ({@link LinkedHashMap}, a repeated key keeps its
 * first place and its last value, as a Python dict), {@code null} as Java null; written compact, strings escaped as
 * Python's {@code json.dumps(..., ensure_ascii=False)} does.
 */
public final class Json {
    private Json() {}

    /** A JSON number: its text as written. */
    public static final class Num {
        final String text;
        public Num(String text) { this.text = text; }
        @Override public String toString() { return text; }
        @Override public boolean equals(Object o) { return o instanceof Num && ((Num) o).text.equals(text); }
        @Override public int hashCode() { return text.hashCode(); }
    }

    /** Text that is not JSON (the message: what Jackson says, first line). */
    public static final class Error extends Exception {
        private static final long serialVersionUID = 1L;
        Error(String m) { super(m, null, false, false); }
    }

    /**
     * Objects and arrays inside one another that a rule reads (jsontext.MAX_DEPTH): deeper is "not JSON: nested too
     * deeply" in both engines, so they decide alike at any depth.
     */
    public static final int MAX_DEPTH = 512;

    private static final JsonFactory FACTORY = JsonFactory.builder()
        .streamReadConstraints(StreamReadConstraints.builder()
            .maxNumberLength(Integer.MAX_VALUE).maxStringLength(Integer.MAX_VALUE).maxNameLength(Integer.MAX_VALUE)
            .maxNestingDepth(MAX_DEPTH).build())
        .disable(JsonFactory.Feature.CANONICALIZE_FIELD_NAMES)
        .disable(JsonFactory.Feature.INTERN_FIELD_NAMES)
        .build();

    /** jsontext.loads: one strict JSON value, nothing after it but whitespace. */
    public static Object parse(String text) throws Error {
        if (!text.isEmpty() && text.charAt(0) == '\uFEFF') throw new Error("Unexpected UTF-8 BOM");
        try (JsonParser p = FACTORY.createParser(text)) {
            JsonToken t = p.nextToken();
            if (t == null) throw new Error("Expecting value: the text is empty");
            Object v = read(p, t);
            if (p.nextToken() != null) throw new Error("Extra data after the value");
            return v;
        } catch (JsonProcessingException e) {
            String m = e.getOriginalMessage();
            m = m == null ? e.getClass().getSimpleName() : m;
            int nl = m.indexOf('\n');
            throw new Error(nl < 0 ? m : m.substring(0, nl));
        } catch (IOException | RuntimeException | StackOverflowError e) {
            throw new Error(String.valueOf(e.getMessage()));
        }
    }

    private static Object read(JsonParser p, JsonToken t) throws IOException {
        switch (t) {
            case START_OBJECT: {
                Map<String, Object> m = new LinkedHashMap<>();
                while ((t = p.nextToken()) != JsonToken.END_OBJECT) {
                    String k = p.currentName();
                    m.put(k, read(p, p.nextToken()));
                }
                return m;
            }
            case START_ARRAY: {
                List<Object> a = new ArrayList<>();
                while ((t = p.nextToken()) != JsonToken.END_ARRAY) a.add(read(p, t));
                return a;
            }
            case VALUE_STRING: return p.getText();
            case VALUE_NUMBER_INT:
            case VALUE_NUMBER_FLOAT: return new Num(p.getText());
            case VALUE_TRUE: return Boolean.TRUE;
            case VALUE_FALSE: return Boolean.FALSE;
            case VALUE_NULL: return null;
            default: throw new IOException("unexpected token " + t);
        }
    }

    /** jsontext.loads_object: a JSON object, or an Error naming what the text is instead. */
    @SuppressWarnings("unchecked")
    public static Map<String, Object> parseObject(String text) throws Error {
        if (text == null) throw new Error("null is not a JSON object");
        Object v;
        try {
            v = parse(text);
        } catch (Error e) {
            throw new Error("not a JSON object (not JSON: " + e.getMessage() + ")");
        }
        if (!(v instanceof Map)) throw new Error("not a JSON object (" + kind(v) + ")");
        return (Map<String, Object>) v;
    }

    static String kind(Object v) {
        if (v instanceof List) return "an array";
        if (v instanceof Num) return "a number";
        if (v instanceof String) return "a string";
        return v == null ? "null" : v.toString();
    }

    /** fastjson's getString (jsontext.as_text): a string as is, null null, anything else its JSON text. */
    public static String asText(Object v) {
        if (v == null) return null;
        if (v instanceof String) return (String) v;
        return dumps(v);
    }

    public static String dumps(Object v) {
        StringBuilder b = new StringBuilder();
        dump(v, b);
        return b.toString();
    }

    @SuppressWarnings("unchecked")
    static void dump(Object v, StringBuilder b) {
        if (v == null) b.append("null");
        else if (v instanceof String) quote((String) v, b);
        else if (v instanceof Num) b.append(((Num) v).text);
        else if (v instanceof Boolean) b.append(((Boolean) v) ? "true" : "false");
        else if (v instanceof Map) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : ((Map<String, Object>) v).entrySet()) {
                if (!first) b.append(',');
                first = false;
                quote(e.getKey(), b);
                b.append(':');
                dump(e.getValue(), b);
            }
            b.append('}');
        } else {
            b.append('[');
            boolean first = true;
            for (Object x : (List<Object>) v) {
                if (!first) b.append(',');
                first = false;
                dump(x, b);
            }
            b.append(']');
        }
    }

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    static void quote(String s, StringBuilder b) {
        b.append('"');
        for (int i = 0, n = s.length(); i < n; i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                case '\b': b.append("\\b"); break;
                case '\f': b.append("\\f"); break;
                default:
                    if (c < 0x20) b.append("\\u00").append(HEX[c >> 4]).append(HEX[c & 15]);
                    else b.append(c);
            }
        }
        b.append('"');
    }
}
