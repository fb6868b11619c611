package dbus.jvm.logrules;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The log rule engine in the JVM: the 16 operators of logprocessor/operators.py (the reference, with the golden
 * cases of tests/golden/logrules), a group on a line as {@code operators.run_group} runs it, and a line through
 * every table's groups ({@link #runLine}) (docs/logs.md, How rules run on Spark).
 *
 * <p>A row is a list of cells (null: a regexExtract group that did not take part); after saveAs every cell is text
 * (a DOUBLE as {@code Double.toString}, what Spark's cast writes). A rule that breaks on a line throws
 * {@link LineError}; the group turns it into its message {@code group 'g' rule 3 (toIndex): reason}, worded as
 * operators.py words it. Nothing here throws past {@link #runGroup}: an unexpected exception is a line error too.
 *
 * <p>Every regex runs on a cell within the rule set's budget ({@code regex_budget_ms}, {@link Budget}): a line over
 * it fails its group with the code {@link Budget#CODE} ({@link Result#code}), the processor's dead letter
 * {@code LOG_RULE_BUDGET}, and the next line runs as usual.
 */
public final class Engine {
    private Engine() {}

    public static final class LineError extends Exception {
        private static final long serialVersionUID = 1L;
        public LineError(String reason) { super(reason, null, false, false); }
    }

    static final String AFTER_SAVE_AS = "a rule after saveAs (saveAs must be the group's last rule)";
    static final List<String> EXCLUDED_KEYS = Arrays.asList("path", "@timestamp", "@version", "host", "message", "type");

    // ---------------------------------------------------------------- the rule model

    static final int ALL = 0, INDEX = 1, RANGE = 2, LIST = 3;
    private static final Pattern S_INDEX = Pattern.compile("-?[0-9]+"), S_RANGE = Pattern.compile("-?[0-9]+:-?[0-9]*"),
        S_LIST = Pattern.compile("-?([0-9]+)(,-?[0-9]+)+");

    static final class Scope {
        final int kind;
        final long[] values;
        final Long end; // range: null = to the end
        final boolean emptyAsWritten;

        Scope(int kind, long[] values, Long end, boolean empty) {
            this.kind = kind;
            this.values = values;
            this.end = end;
            this.emptyAsWritten = empty;
        }

        /** grammar.parse_scope; the message is what ValueError says. */
        static Scope parse(String text) throws LineError {
            if (text == null) throw new LineError("ruleScope is missing");
            if (text.equals("*") || text.equals("0:")) return new Scope(ALL, new long[0], null, false);
            if (S_INDEX.matcher(text).matches()) return new Scope(INDEX, new long[] {Text.saturated(text)}, null, false);
            if (S_RANGE.matcher(text).matches()) {
                int colon = text.indexOf(':');
                String a = text.substring(0, colon), b = text.substring(colon + 1);
                if (b.equals("-")) throw new LineError("invalid literal for int() with base 10: '-'");
                return new Scope(RANGE, new long[] {Text.saturated(a)}, b.isEmpty() ? null : Text.saturated(b),
                    !b.isEmpty() && a.equals(b));
            }
            if (S_LIST.matcher(text).matches()) {
                String[] parts = text.split(",");
                long[] v = new long[parts.length];
                for (int i = 0; i < v.length; i++) v[i] = Text.saturated(parts[i]);
                return new Scope(LIST, v, null, false);
            }
            throw new LineError("ruleScope " + Text.repr(text) + " is none of *, k, a:b, a:, i,j,k");
        }
    }

    static final class Entry {
        final String scope, param, operate, ruleType, subStart, subStartType, subEnd, subEndType, filterKey, name, type;
        final long budgetMs; // each run of this entry's regex on a cell
        private Scope parsedScope;
        private String scopeError;
        private Pattern regex;
        private String regexError;
        private JsonPath path;
        private String pathError;

        Entry(JsonNode o, long budgetMs) {
            this.budgetMs = budgetMs;
            scope = text(o, "ruleScope");
            param = text(o, "ruleParamter");
            operate = text(o, "ruleOperate");
            ruleType = text(o, "ruleType");
            subStart = text(o, "subStart");
            subStartType = text(o, "subStartType");
            subEnd = text(o, "subEnd");
            subEndType = text(o, "subEndType");
            filterKey = text(o, "filterKey");
            name = text(o, "name");
            type = text(o, "type");
            try {
                parsedScope = Scope.parse(scope);
            } catch (LineError e) {
                scopeError = "ruleScope: " + e.getMessage();
            }
            if (param != null) {
                try {
                    regex = Pattern.compile(param);
                } catch (PatternSyntaxException | StackOverflowError e) {
                    regexError = "ruleParamter " + Text.repr(param) + " is not a valid regex: " + firstLine(e.getMessage());
                }
            }
        }

        private static String text(JsonNode o, String key) {
            JsonNode v = o.get(key);
            return v == null || v.isNull() ? null : v.isTextual() ? v.asText() : v.toString();
        }

        Scope scope() throws LineError {
            if (parsedScope == null) throw new LineError(scopeError);
            return parsedScope;
        }

        /** operators._regex. */
        Pattern regex() throws LineError {
            if (param == null) throw new LineError("ruleParamter (the regex) is missing");
            if (regex == null) throw new LineError(regexError);
            return regex;
        }

        JsonPath path() throws LineError {
            if (path == null && pathError == null) {
                try {
                    path = JsonPath.compile(param);
                } catch (LineError e) {
                    pathError = e.getMessage();
                }
            }
            if (path == null) throw new LineError(pathError);
            return path;
        }
    }

    static String firstLine(String m) {
        if (m == null) return "";
        int nl = m.indexOf('\n');
        return nl < 0 ? m : m.substring(0, nl);
    }

    static final class Rule {
        final String op;
        final Entry[] grammar;

        Rule(String op, Entry[] grammar) {
            this.op = op;
            this.grammar = grammar;
        }
    }

    public static final class Group {
        public final String table, name;
        final Rule[] rules;

        Group(String table, String name, Rule[] rules) {
            this.table = table;
            this.name = name;
            this.rules = rules;
        }
    }

    /**
     * A rule set: {"multi": bool, "regex_budget_ms": ms, "groups": [{"table", "group", "rules": [{"op", "grammar":
     * [entry]}]}]} (no budget: {@link Budget#DEFAULT_MS}).
     */
    public static final class RuleSet {
        public final boolean multi;
        public final Group[] groups;

        RuleSet(boolean multi, Group[] groups) {
            this.multi = multi;
            this.groups = groups;
        }
    }

    private static final ObjectMapper MAPPER = new ObjectMapper();

    public static RuleSet ruleSet(String json) {
        try {
            JsonNode doc = MAPPER.readTree(json);
            long budgetMs = budgetMs(doc);
            List<Group> groups = new ArrayList<>();
            for (JsonNode g : doc.get("groups")) groups.add(group(g, budgetMs));
            return new RuleSet(doc.path("multi").asBoolean(true), groups.toArray(new Group[0]));
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("log rules: not a rule set: " + e.getMessage(), e);
        }
    }

    private static long budgetMs(JsonNode doc) {
        long ms = doc.path("regex_budget_ms").asLong(Budget.DEFAULT_MS);
        if (ms < 1) throw new IllegalArgumentException("log rules: regex_budget_ms " + ms + ": at least 1");
        return ms;
    }

    /** One group: {"group", "rules", "regex_budget_ms" (optional)}. */
    public static Group group(String json) {
        try {
            JsonNode g = MAPPER.readTree(json);
            return group(g, budgetMs(g));
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("log rules: not a group: " + e.getMessage(), e);
        }
    }

    static Group group(JsonNode g, long budgetMs) {
        List<Rule> rules = new ArrayList<>();
        for (JsonNode r : g.get("rules")) {
            List<Entry> entries = new ArrayList<>();
            for (JsonNode e : r.path("grammar")) entries.add(new Entry(e, budgetMs));
            rules.add(new Rule(r.get("op").asText(), entries.toArray(new Entry[0])));
        }
        return new Group(g.path("table").asText(null), g.get("group").asText(), rules.toArray(new Rule[0]));
    }

    /**
     * What the engine refuses in a rule set before it runs (publishing and the processor's start ask, {@link
     * dbus.jvm.LogRulesCheck}): each regex a rule hands to Java ({@code regexExtract}; {@code filter} and {@code
     * keyFilter} of ruleType regex; {@code split} and {@code replace} of any ruleType but string) that {@link
     * java.util.regex.Pattern} does not compile, as {@code group 'g' rule 3 (split): ruleParamter '(?P<x>a)' is not a
     * valid Java regex: ...}. The Python grammar check refuses the rest first (logprocessor/grammar.py); a pattern
     * only Java refuses would otherwise fail every line of its group.
     */
    public static List<String> problems(RuleSet set) {
        List<String> out = new ArrayList<>();
        for (Group g : set.groups) {
            for (int i = 0; i < g.rules.length; i++) {
                Rule r = g.rules[i];
                for (Entry e : r.grammar) {
                    if (e.regexError == null || !takesRegex(r.op, e)) continue;
                    String where = "group " + Text.repr(g.name) + " rule " + (i + 1) + " (" + r.op + ")";
                    out.add(where + ": " + e.regexError.replace(" is not a valid regex: ", " is not a valid Java regex: "));
                }
            }
        }
        return out;
    }

    static boolean takesRegex(String op, Entry e) {
        switch (op) {
            case "regexExtract": return true;
            case "filter":
            case "keyFilter": return "regex".equals(e.ruleType);
            case "split":
            case "replace": return !"string".equals(e.ruleType);
            default: return false;
        }
    }

    // ---------------------------------------------------------------- groups and tables

    /** A group's rows (empty: not accepted), or its line error and the error's dead-letter code. */
    public static final class Result {
        public final List<List<String>> rows;
        public final String error;
        public final String code; // with error: null (a rule broke: LOG_LINE_RULE_ERROR) or Budget.CODE

        Result(List<List<String>> rows, String error) {
            this(rows, error, null);
        }

        Result(List<List<String>> rows, String error, String code) {
            this.rows = rows;
            this.error = error;
            this.code = code;
        }
    }

    static final List<List<String>> NONE = Collections.emptyList();

    /** operators.run_group over {@code rows} (the rules as given: with_save_as is the caller's). Never throws. */
    public static Result runGroup(Group g, List<List<String>> rows) {
        Rule[] rules = g.rules;
        for (int i = 0; i < rules.length; i++) {
            Rule rule = rules[i];
            try {
                if (i > 0 && rules[i - 1].op.equals("saveAs")) throw new LineError(AFTER_SAVE_AS);
                rows = apply(rule, rows);
            } catch (LineError e) {
                return new Result(NONE, failure(g, i, rule, e.getMessage()));
            } catch (Budget.Exceeded e) {
                return new Result(NONE, failure(g, i, rule, e.getMessage()), Budget.CODE);
            } catch (RuntimeException | StackOverflowError | OutOfMemoryError e) {
                return new Result(NONE, failure(g, i, rule, "internal error: " + e));
            }
            if (rows.isEmpty()) break;
        }
        return new Result(rows, null);
    }

    private static String failure(Group g, int i, Rule rule, String reason) {
        return "group " + Text.repr(g.name) + " rule " + (i + 1) + " (" + rule.op + "): " + reason;
    }

    public static Result runGroup(Group g, String line) {
        List<List<String>> rows = new ArrayList<>(1);
        List<String> row = new ArrayList<>(1);
        row.add(line);
        rows.add(row);
        return runGroup(g, rows);
    }

    /** One line through a rule set: rows per table, the line errors, whether nothing took it. */
    public interface LineSink {
        void row(String table, int index, List<String> row);
        void error(String table, String error);

        /** A line error with its code: null for a rule that broke (LOG_LINE_RULE_ERROR), or Budget.CODE. */
        default void error(String table, String code, String error) {
            error(table, error);
        }
    }

    /** Returns whether some table took the line (not unmatched). */
    public static boolean runLine(RuleSet set, String line, LineSink sink) {
        Group[] groups = set.groups;
        if (set.multi) {
            Result[] results = new Result[groups.length];
            boolean any = false;
            for (int i = 0; i < groups.length; i++) {
                results[i] = runGroup(groups[i], line);
                any |= !results[i].rows.isEmpty();
            }
            // rows table by table (tables in order of their first group), errors group by group
            boolean[] done = new boolean[groups.length];
            for (int i = 0; i < groups.length; i++) {
                if (done[i]) continue;
                String table = groups[i].table;
                int index = 0;
                for (int j = i; j < groups.length; j++) {
                    if (done[j] || !groups[j].table.equals(table)) continue;
                    done[j] = true;
                    for (List<String> row : results[j].rows) sink.row(table, index++, row);
                }
            }
            for (int i = 0; i < groups.length; i++)
                if (results[i].error != null) sink.error(groups[i].table, results[i].code, results[i].error);
            return any;
        }
        for (Group g : groups) {
            Result r = runGroup(g, line);
            if (!r.rows.isEmpty()) {
                int index = 0;
                for (List<String> row : r.rows) sink.row(g.table, index++, row);
                return true;
            }
            if (r.error != null) sink.error(g.table, r.code, r.error);
        }
        return false;
    }

    // ---------------------------------------------------------------- shared pieces

    static List<List<String>> apply(Rule rule, List<List<String>> rows) throws LineError {
        Entry[] g = rule.grammar;
        switch (rule.op) {
            case "flattenUms": return flattenUms(g, rows);
            case "keyFilter": return keyFilter(g, rows);
            case "toIndex": return toIndex(g, rows);
            case "filter": return filter(g, rows);
            case "trim": return perRow(g, rows, Engine::trimCell);
            case "replace": return replace(g, rows);
            case "split": return perRow(g, rows, Engine::splitCell);
            case "subString": return perRow(g, rows, Engine::subStringCell);
            case "concat": return concat(g, rows);
            case "select": return select(g, rows);
            case "saveAs": return saveAs(g, rows);
            case "prefixOrAppend": return perRow(g, rows, Engine::prefixCell);
            case "regexExtract": return perRow(g, rows, Engine::extractCell);
            case "jsonPath": return jsonPath(g, rows);
            case "excludeField": return excludeField(g, rows);
            case "flattenJsonArray": return flattenJsonArray(g, rows);
            default: throw new LineError("unknown operator " + Text.repr(rule.op));
        }
    }

    private static LineError negative(Entry e, long c, int n) {
        return new LineError("ruleScope " + Text.repr(e.scope) + " selects column " + c + " of a " + n + "-column row");
    }

    /** operators._in_range: the entry's columns below n, in order; a column still negative breaks the line. */
    static int[] inRange(Entry e, int n) throws LineError {
        Scope s = e.scope();
        switch (s.kind) {
            case ALL: {
                int[] out = new int[n];
                for (int i = 0; i < n; i++) out[i] = i;
                return out;
            }
            case RANGE: {
                if (s.emptyAsWritten) return new int[0];
                long start = s.values[0] < 0 ? s.values[0] + n : s.values[0];
                long end = s.end == null ? n : s.end < 0 ? s.end + n : s.end;
                if (start >= end) return new int[0];
                if (start < 0) throw negative(e, start, n);
                long stop = Math.min(end, n);
                if (start >= stop) return new int[0];
                int[] out = new int[(int) (stop - start)];
                for (int i = 0; i < out.length; i++) out[i] = (int) start + i;
                return out;
            }
            default: {
                int[] out = new int[s.values.length];
                int k = 0;
                for (long v : s.values) {
                    long c = v < 0 ? v + n : v;
                    if (c < 0) throw negative(e, c, n);
                    if (c < n) out[k++] = (int) c;
                }
                return k == out.length ? out : Arrays.copyOf(out, k);
            }
        }
    }

    static String notNull(String value, int col) throws LineError {
        if (value == null) throw new LineError("column " + col + " is null");
        return value;
    }

    /** The last column 0 read as an object on this thread, by identity: keyFilter then toIndex read the same text
     * (the operators never change a parsed object). {text, object or null, a Supplier of it or null}. */
    private static final ThreadLocal<Object[]> LAST_COLUMN0 = ThreadLocal.withInitial(() -> new Object[3]);

    /**
     * The object {@code text} reads as, for the next line on this thread that is this very text: the shipper's record,
     * already read by the adapter ({@code read} gives what {@link Json#parseObject} gives for it, or null when it
     * cannot tell: then column 0 is read as usual). Called before the line is run; {@code read} only when a rule reads
     * column 0 as JSON.
     */
    public static void primeColumn0(String text, Supplier<Map<String, Object>> read) {
        Object[] last = LAST_COLUMN0.get();
        last[0] = text;
        last[1] = null;
        last[2] = read;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> column0(List<String> row) throws LineError {
        if (row.isEmpty()) throw new LineError("the row has no column 0");
        String text = row.get(0);
        Object[] last = LAST_COLUMN0.get();
        if (text != null && last[0] == text) {
            if (last[1] != null) return (Map<String, Object>) last[1];
            if (last[2] != null) {
                Map<String, Object> obj = ((Supplier<Map<String, Object>>) last[2]).get();
                last[2] = null;
                if (obj != null) {
                    last[1] = obj;
                    return obj;
                }
            }
        }
        try {
            Map<String, Object> obj = Json.parseObject(text);
            last[0] = text;
            last[1] = obj;
            last[2] = null;
            return obj;
        } catch (Json.Error err) {
            throw new LineError("column 0: " + err.getMessage());
        }
    }

    interface Cells {
        List<String> cells(Entry e, String value, int col) throws LineError;
    }

    /** operators._rebuild: each in-range scope column replaced by its cells (last entry wins), rebuilt by position. */
    static List<String> rebuild(List<String> row, Entry[] grammar, Cells cells) throws LineError {
        int n = row.size();
        List<List<String>> fresh = null;
        for (Entry e : grammar) {
            for (int col : inRange(e, n)) {
                if (fresh == null) fresh = new ArrayList<>(Collections.nCopies(n, (List<String>) null));
                fresh.set(col, cells.cells(e, row.get(col), col));
            }
        }
        if (fresh == null) return new ArrayList<>(row);
        List<String> out = new ArrayList<>(n + 4);
        for (int i = 0; i < n; i++) {
            List<String> c = fresh.get(i);
            if (c == null) out.add(row.get(i));
            else out.addAll(c);
        }
        return out;
    }

    static List<List<String>> perRow(Entry[] grammar, List<List<String>> rows, Cells cells) throws LineError {
        List<List<String>> out = new ArrayList<>(rows.size());
        for (List<String> row : rows) out.add(rebuild(row, grammar, cells));
        return out;
    }

    private static List<String> one(String v) {
        List<String> l = new ArrayList<>(1);
        l.add(v);
        return l;
    }

    // ---------------------------------------------------------------- filters

    static List<List<String>> flattenUms(Entry[] grammar, List<List<String>> rows) throws LineError {
        List<List<String>> out = new ArrayList<>();
        for (List<String> row : rows) {
            String ns = Json.asText(column0(row).get("namespace"));
            if (ns == null) continue;
            for (Entry e : grammar) {
                if (e.param != null && ns.contains(e.param)) {
                    out.add(row);
                    break;
                }
            }
        }
        return out;
    }

    /** operators._test: null when the entry's ruleType is neither string nor regex. */
    static Boolean test(Entry e, String value, int col) throws LineError {
        boolean hit;
        if ("string".equals(e.ruleType)) {
            hit = value != null && e.param != null && value.contains(e.param);
        } else if ("regex".equals(e.ruleType)) {
            Pattern rx = e.regex();
            if (value == null && col >= 0) throw new LineError("column " + col + " is null");
            hit = value != null && Budget.matcher(rx, value, e.budgetMs).find();
        } else return null;
        return "==".equals(e.operate) ? hit : !hit;
    }

    static List<List<String>> keyFilter(Entry[] grammar, List<List<String>> rows) throws LineError {
        List<List<String>> out = new ArrayList<>();
        for (List<String> row : rows) {
            if (grammar.length == 0) continue;
            Map<String, Object> obj = column0(row);
            for (Entry e : grammar) {
                String v = e.filterKey == null ? null : Json.asText(obj.get(e.filterKey));
                if (Boolean.TRUE.equals(test(e, v, -1))) {
                    out.add(row);
                    break;
                }
            }
        }
        return out;
    }

    static List<List<String>> filter(Entry[] grammar, List<List<String>> rows) throws LineError {
        List<List<String>> out = new ArrayList<>();
        for (List<String> row : rows) {
            int n = row.size();
            boolean ok = false;
            for (Entry e : grammar) {
                Scope s = e.scope();
                if (s.kind == INDEX || s.kind == LIST) {
                    for (long v : s.values) if ((v < 0 ? v + n : v) < 0) throw negative(e, v + n, n);
                    for (long v : s.values) {
                        long c = v < 0 ? v + n : v;
                        Boolean verdict = test(e, c < n ? row.get((int) c) : "", (int) Math.min(c, Integer.MAX_VALUE));
                        if (verdict != null) ok = verdict;
                    }
                } else {
                    int[] cols = inRange(e, n);
                    for (int c : cols) {
                        Boolean verdict = test(e, row.get(c), c);
                        if (verdict != null) ok = verdict;
                    }
                    boolean beyond;
                    if (s.kind == ALL) beyond = false;
                    else {
                        long start = s.values[0] < 0 ? s.values[0] + n : s.values[0];
                        long end = s.end == null ? n : s.end < 0 ? s.end + n : s.end;
                        beyond = !s.emptyAsWritten && start < end && end > n;
                    }
                    if (beyond) {
                        Boolean verdict = test(e, "", n);
                        if (verdict != null) ok = verdict;
                    }
                }
            }
            if (ok) out.add(row);
        }
        return out;
    }

    // ---------------------------------------------------------------- JSON to columns

    static List<List<String>> toIndex(Entry[] grammar, List<List<String>> rows) throws LineError {
        List<List<String>> out = new ArrayList<>(rows.size());
        for (List<String> row : rows) {
            Map<String, Object> obj = column0(row);
            int n = row.size();
            TreeMap<Long, String> slots = new TreeMap<>();
            for (Entry e : grammar) {
                Scope s = e.scope();
                Long slot = null;
                if (s.kind == ALL) slot = n > 0 ? 0L : null;
                else if (s.kind == INDEX || s.kind == LIST) slot = s.values[0] < 0 ? s.values[0] + n : s.values[0];
                else if (!s.emptyAsWritten) {
                    long start = s.values[0] < 0 ? s.values[0] + n : s.values[0];
                    long end = s.end == null ? n : s.end < 0 ? s.end + n : s.end;
                    slot = start < end ? start : null;
                }
                if (slot == null) throw new LineError("ruleScope " + Text.repr(e.scope) + " selects no column");
                if (slot < 0) throw negative(e, slot, n);
                String v = e.param == null ? null : Json.asText(obj.get(e.param));
                slots.put(slot, v == null || v.isEmpty() ? "" : v);
            }
            out.add(new ArrayList<>(slots.values()));
        }
        return out;
    }

    static List<List<String>> excludeField(Entry[] grammar, List<List<String>> rows) throws LineError {
        List<List<String>> out = new ArrayList<>(rows.size());
        for (List<String> row : rows) {
            Map<String, Object> obj = column0(row);
            Map<String, Object> kept = new LinkedHashMap<>(obj);
            for (String k : EXCLUDED_KEYS) kept.remove(k);
            out.add(one(Json.dumps(kept)));
        }
        return out;
    }

    private static Object jsonForPath(String value, int col) throws LineError {
        String text = value == null ? "" : value;
        try {
            return Json.parse(text);
        } catch (Json.Error err) {
            String t = Text.pyStrip(text);
            if (!t.isEmpty() && (t.charAt(0) == '{' || t.charAt(0) == '['))
                throw new LineError("column " + col + ": not JSON: " + err.getMessage());
            return text;
        }
    }

    static String jsonPathCell(Entry e, String value, int col) throws LineError {
        JsonPath path = e.path();
        List<Object> hits = path.find(jsonForPath(value, col));
        if (path.definite && hits.isEmpty()) return "";
        Object found = path.definite ? hits.get(0) : hits;
        return found instanceof String ? (String) found : Json.dumps(found);
    }

    static List<List<String>> jsonPath(Entry[] grammar, List<List<String>> rows) throws LineError {
        List<List<String>> out = new ArrayList<>(rows.size());
        for (List<String> row : rows) {
            List<String> added = new ArrayList<>(row);
            for (Entry e : grammar) for (int c : inRange(e, row.size())) added.add(jsonPathCell(e, row.get(c), c));
            out.add(added);
        }
        return out;
    }

    /** operators._flatten_array: the elements' texts, null when not a JSON array. */
    @SuppressWarnings("unchecked")
    static List<String> flattenArray(String value) {
        if (value == null || value.isEmpty()) return new ArrayList<>();
        Object arr;
        try {
            arr = Json.parse(value);
        } catch (Json.Error err) {
            return null;
        }
        if (!(arr instanceof List)) return null;
        List<String> out = new ArrayList<>();
        for (Object x : (List<Object>) arr) out.add(x == null ? "" : Json.asText(x));
        return out;
    }

    private static final Pattern NOT_DOTTED = Pattern.compile("[$\\[\\]*()?@'\"]");

    @SuppressWarnings("unchecked")
    static List<String> flattenPath(String value, String path, int col) throws LineError {
        String[] keys = path.split("\\.", -1);
        Map<String, Object> obj;
        try {
            boolean empty = false;
            for (String k : keys) empty |= k.isEmpty();
            if (empty || NOT_DOTTED.matcher(path).find())
                throw new Json.Error("path " + Text.repr(path) + " is not keys joined by dots (order.items)");
            obj = Json.parseObject(value);
        } catch (Json.Error err) {
            throw new LineError("column " + col + ": " + err.getMessage());
        }
        List<String> out = new ArrayList<>();
        if (obj.containsKey(path)) {
            Object arr = obj.get(path);
            if (arr instanceof List) for (Object x : (List<Object>) arr) out.add(Json.dumps(with(obj, path, x)));
            return out;
        }
        Object parent = obj;
        for (int i = 0; i < keys.length - 1; i++) {
            if (!(parent instanceof Map) || !((Map<String, Object>) parent).containsKey(keys[i])) return out;
            parent = ((Map<String, Object>) parent).get(keys[i]);
        }
        Object arr = parent instanceof Map ? ((Map<String, Object>) parent).get(keys[keys.length - 1]) : null;
        if (!(arr instanceof List)) return out;
        List<Object> copies = new ArrayList<>();
        for (Object x : (List<Object>) arr) copies.add(with((Map<String, Object>) parent, keys[keys.length - 1], x));
        out.add(Json.dumps(setIn(obj, keys, 0, keys.length - 1, copies)));
        return out;
    }

    private static Map<String, Object> with(Map<String, Object> obj, String key, Object value) {
        Map<String, Object> m = new LinkedHashMap<>(obj);
        m.put(key, value);
        return m;
    }

    @SuppressWarnings("unchecked")
    private static Object setIn(Object obj, String[] keys, int from, int to, Object value) {
        if (from == to) return value;
        Map<String, Object> m = (Map<String, Object>) obj;
        return with(m, keys[from], setIn(m.get(keys[from]), keys, from + 1, to, value));
    }

    static List<List<String>> flattenJsonArray(Entry[] grammar, List<List<String>> rows) throws LineError {
        List<List<String>> out = new ArrayList<>();
        for (List<String> row : rows) {
            for (Entry e : grammar) {
                for (int col : inRange(e, row.size())) {
                    List<String> values;
                    if (e.param != null && !e.param.isEmpty()) values = flattenPath(row.get(col), e.param, col);
                    else if ((values = flattenArray(row.get(col))) == null) break;
                    for (String v : values) {
                        List<String> r = new ArrayList<>(row);
                        r.set(col, v);
                        out.add(r);
                    }
                }
            }
        }
        return out;
    }

    // ---------------------------------------------------------------- column rewrites

    static List<String> trimCell(Entry e, String value, int col) {
        if (value == null) return one(null);
        String chars = e.param == null ? Text.JAVA_WHITESPACE : e.param;
        if ("left".equals(e.operate)) return one(Text.strip(value, chars, true, false));
        if ("right".equals(e.operate)) return one(Text.strip(value, chars, false, true));
        if ("both".equals(e.operate)) return one(Text.strip(value, chars, true, true));
        return one(Text.deleteChars(value, e.param));
    }

    static String replaceCell(Entry e, String value) throws LineError {
        if (value == null) return null;
        String replacement = e.operate == null ? "" : e.operate;
        if ("string".equals(e.ruleType)) return e.param == null || e.param.isEmpty() ? value : value.replace(e.param, replacement);
        if (e.param == null) return value;
        Matcher m = Budget.matcher(e.regex(), value, e.budgetMs);
        if (!m.find()) return value;
        // Matcher.replaceAll would also take an empty match between a surrogate pair's halves, splitting the
        // character (Python's re, counting code points, never stops there): such a match is skipped, as
        // Budget.split skips it
        StringBuilder b = new StringBuilder(value.length() + 16);
        try {
            do {
                int at = m.start();
                if (at == m.end() && at > 0 && at < value.length() && Character.isLowSurrogate(value.charAt(at))
                        && Character.isHighSurrogate(value.charAt(at - 1))) continue;
                m.appendReplacement(b, replacement);
            } while (m.find());
        } catch (IllegalArgumentException | IndexOutOfBoundsException err) {
            throw new LineError("ruleOperate " + Text.repr(replacement) + ": " + err.getMessage());
        }
        return m.appendTail(b).toString();
    }

    static List<List<String>> replace(Entry[] grammar, List<List<String>> rows) throws LineError {
        List<List<String>> out = new ArrayList<>(rows.size());
        for (List<String> row : rows) {
            List<String> fresh = new ArrayList<>(row);
            for (Entry e : grammar) for (int c : inRange(e, fresh.size())) fresh.set(c, replaceCell(e, fresh.get(c)));
            out.add(fresh);
        }
        return out;
    }

    static List<String> splitCell(Entry e, String value, int col) throws LineError {
        String text = notNull(value, col);
        if ("string".equals(e.ruleType)) return Text.splitByWholeSeparator(text, e.param);
        return new ArrayList<>(Arrays.asList(Budget.split(e.regex(), text, e.budgetMs)));
    }

    static List<String> subStringCell(Entry e, String value, int col) {
        String a = e.subStartType, b = e.subEndType;
        long start;
        Long end;
        if ("index".equals(a) && "index".equals(b)) {
            start = Text.toInt(e.subStart);
            end = e.subEnd == null ? null : (long) Text.toInt(e.subEnd);
        } else if ("index".equals(a) && "string".equals(b)) {
            String marker = e.subEnd == null ? "" : e.subEnd;
            start = Text.toInt(e.subStart);
            end = (long) Text.lastIndexOf(value, marker) + Text.cpLen(marker);
        } else if ("string".equals(a) && "index".equals(b)) {
            start = Text.indexOf(value, e.subStart);
            end = e.subEnd == null ? null : (long) Text.toInt(e.subEnd);
        } else if ("string".equals(a) && "string".equals(b)) {
            start = Text.indexOf(value, e.subStart);
            end = e.subEnd == null ? null : (long) Text.lastIndexOf(value, e.subEnd) + Text.cpLen(e.subEnd);
        } else return new ArrayList<>();
        return one(Text.substring(value, start, end));
    }

    static List<String> prefixCell(Entry e, String value, int col) {
        String param = e.param == null ? "" : e.param, text = value == null ? "" : value;
        return one("before".equals(e.operate) ? param + text : text + param);
    }

    static List<String> extractCell(Entry e, String value, int col) throws LineError {
        Pattern rx = e.regex();
        Matcher m = Budget.matcher(rx, notNull(value, col), e.budgetMs);
        List<String> out = new ArrayList<>();
        if (m.find()) for (int i = 1; i <= m.groupCount(); i++) out.add(m.group(i));
        return out;
    }

    static List<List<String>> concat(Entry[] grammar, List<List<String>> rows) throws LineError {
        List<List<String>> out = new ArrayList<>(rows.size());
        for (List<String> row : rows) {
            int n = row.size();
            Map<Integer, List<String>> joined = new java.util.HashMap<>();
            boolean[] used = new boolean[n];
            for (Entry e : grammar) {
                int[] cols = inRange(e, n);
                if (cols.length == 0) continue;
                StringBuilder b = new StringBuilder();
                String sep = e.param == null ? "" : e.param;
                for (int i = 0; i < cols.length; i++) {
                    if (i > 0) b.append(sep);
                    String v = row.get(cols[i]);
                    if (v != null) b.append(v);
                }
                joined.computeIfAbsent(cols[0], k -> new ArrayList<>()).add(b.toString());
                for (int c : cols) used[c] = true;
            }
            List<String> r = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                List<String> j = joined.get(i);
                if (j != null) r.addAll(j);
                else if (!used[i]) r.add(row.get(i));
            }
            out.add(r);
        }
        return out;
    }

    static List<List<String>> select(Entry[] grammar, List<List<String>> rows) throws LineError {
        List<List<String>> out = new ArrayList<>(rows.size());
        for (List<String> row : rows) {
            List<String> r = new ArrayList<>();
            for (Entry e : grammar) for (int c : inRange(e, row.size())) r.add(row.get(c));
            out.add(r);
        }
        return out;
    }

    // ---------------------------------------------------------------- saveAs

    static String typedValue(Entry e, String value) throws LineError {
        if (value == null) return null;
        if (e.type == null) throw new LineError("saveAs " + Text.repr(e.name) + " has no type");
        String kind = e.type.toUpperCase(java.util.Locale.ROOT);
        switch (kind) {
            case "LONG": {
                String canonical = Text.longText(value);
                return canonical == null ? value : canonical;
            }
            case "DOUBLE": {
                Double d = Text.doubleValue(value);
                if (d == null)
                    throw new LineError("saveAs column " + Text.repr(e.name) + " (DOUBLE): " + Text.repr(value) + " is not a number");
                return Double.toString(d);
            }
            case "DATETIME":
            case "TIMESTAMP":
                return Text.datetimeText(value);
            default:
                return value;
        }
    }

    static List<List<String>> saveAs(Entry[] grammar, List<List<String>> rows) throws LineError {
        List<long[]> keyed = new ArrayList<>();
        for (int i = 0; i < grammar.length; i++) {
            long k = Text.decimal(grammar[i].scope);
            if (k >= 0) keyed.add(new long[] {k, i});
        }
        keyed.sort((x, y) -> x[0] != y[0] ? Long.compare(x[0], y[0]) : Long.compare(x[1], y[1]));
        List<List<String>> out = new ArrayList<>(rows.size());
        for (List<String> row : rows) {
            List<String> r = new ArrayList<>(keyed.size());
            for (long[] ke : keyed) r.add(typedValue(grammar[(int) ke[1]], ke[0] < row.size() ? row.get((int) ke[0]) : ""));
            out.add(r);
        }
        return out;
    }
}
