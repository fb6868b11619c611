package dbus.jvm.logrules;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** jsontext.JsonPath: the subset of Jayway JsonPath the jsonPath operator accepts, found as jsontext finds it. */
final class JsonPath {
    static final String WS = "[\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
    private static final String NAME = "[^.\\[\\]()\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000*]+";
    private static final String QUOTED = "'(?:[^'\\\\]|\\\\[^\\n])*'|\"(?:[^\"\\\\]|\\\\[^\\n])*\"";
    private static final Pattern TOKEN = Pattern.compile(
        "\\.\\.(?<scan>" + NAME + ")"
        + "|\\.\\.\\[" + WS + "*(?<scanq>" + QUOTED + ")" + WS + "*\\]"
        + "|\\.(?<star>\\*)"
        + "|\\.(?<name>" + NAME + ")"
        + "|\\[" + WS + "*(?<quoted>" + QUOTED + ")" + WS + "*\\]"
        + "|\\[" + WS + "*(?<index>-?[0-9]+)" + WS + "*\\]"
        + "|\\[" + WS + "*(?<all>\\*)" + WS + "*\\]");
    private static final Pattern UNQUOTE = Pattern.compile("\\\\([^\\n])");
    private static final String SUBSET = "$.a.b, $['a.b'], $.a[0], $.a[-1], $.a[*], $.*, $..a";

    static final int KEY = 0, INDEX = 1, ALL = 2, SCAN = 3;
    final int[] kinds;
    final Object[] args;
    final boolean definite;

    private JsonPath(int[] kinds, Object[] args) {
        this.kinds = kinds;
        this.args = args;
        boolean d = true;
        for (int k : kinds) d &= k == KEY || k == INDEX;
        this.definite = d;
    }

    static JsonPath compile(String text) throws Engine.LineError {
        if (text == null || Text.pyStrip(text).isEmpty()) throw new Engine.LineError("the JsonPath is missing");
        String body = Text.pyStrip(text);
        body = body.startsWith("$") ? body.substring(1) : body.startsWith("[") ? body : "." + body;
        List<Integer> kinds = new ArrayList<>();
        List<Object> args = new ArrayList<>();
        Matcher m = TOKEN.matcher(body);
        int pos = 0;
        while (pos < body.length()) {
            m.region(pos, body.length());
            if (!m.lookingAt())
                throw new Engine.LineError("JsonPath " + Text.repr(text) + ": " + Text.repr(body.substring(pos))
                    + " is outside the supported subset (" + SUBSET + ")");
            if (m.group("scan") != null || m.group("scanq") != null) {
                kinds.add(SCAN);
                args.add(m.group("scan") != null ? m.group("scan") : unquote(m.group("scanq")));
            } else if (m.group("star") != null || m.group("all") != null) {
                kinds.add(ALL);
                args.add("*");
            } else if (m.group("name") != null || m.group("quoted") != null) {
                kinds.add(KEY);
                args.add(m.group("name") != null ? m.group("name") : unquote(m.group("quoted")));
            } else {
                kinds.add(INDEX);
                args.add(Text.saturatedInt(m.group("index")));
            }
            pos = m.end();
        }
        int[] k = new int[kinds.size()];
        for (int i = 0; i < k.length; i++) k[i] = kinds.get(i);
        return new JsonPath(k, args.toArray());
    }

    private static String unquote(String q) {
        return UNQUOTE.matcher(q.substring(1, q.length() - 1)).replaceAll("$1");
    }

    List<Object> find(Object doc) {
        List<Object> nodes = new ArrayList<>();
        nodes.add(doc);
        for (int s = 0; s < kinds.length; s++) {
            List<Object> next = new ArrayList<>();
            for (Object node : nodes) step(kinds[s], args[s], node, next);
            nodes = next;
        }
        return nodes;
    }

    @SuppressWarnings("unchecked")
    private static void step(int kind, Object arg, Object node, List<Object> out) {
        if (kind == KEY) {
            if (node instanceof Map && ((Map<String, Object>) node).containsKey(arg)) out.add(((Map<String, Object>) node).get(arg));
        } else if (kind == INDEX) {
            if (node instanceof List) {
                List<Object> l = (List<Object>) node;
                long i = (Integer) arg;
                if (-l.size() <= i && i < l.size()) out.add(l.get((int) (i < 0 ? i + l.size() : i)));
            }
        } else if (kind == ALL) {
            if (node instanceof Map) out.addAll(((Map<String, Object>) node).values());
            else if (node instanceof List) out.addAll((List<Object>) node);
        } else scan((String) arg, node, out);
    }

    @SuppressWarnings("unchecked")
    private static void scan(String key, Object node, List<Object> out) {
        if (node instanceof Map) {
            Map<String, Object> m = (Map<String, Object>) node;
            if (m.containsKey(key)) out.add(m.get(key));
            for (Object v : m.values()) scan(key, v, out);
        } else if (node instanceof List) {
            for (Object v : (List<Object>) node) scan(key, v, out);
        }
    }
}
