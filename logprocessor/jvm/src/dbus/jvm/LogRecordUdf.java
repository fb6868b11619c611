package dbus.jvm;

import java.nio.charset.StandardCharsets;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF6;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import dbus.jvm.logrules.Engine;

/**
 * The log processor's whole projection in one call per Kafka record (logprocessor/record_jvm.py registers one per
 * source and rule set; docs/logs.md, How rules run on Spark): {@code (value, key, topic, partition, offset,
 * timestamp_ms) -> array<struct<topic: string, key: binary, value: string, metric: string>>}, the outputs of the
 * record in this order (tests/unit/log_oracle.py joins the Python references into the same, byte for byte):
 *
 * <ol>
 *   <li>per table that took rows of the record's lines, its UMS message ({@link LogUms}) keyed
 *       {@code data_increment_data.<namespace>.<event ms>.wh_placeholder};
 *   <li>per line no table took and that broke no rule: the line, to the unknown topic, keyed by the host;
 *   <li>per line error a dead letter {@code LOG_LINE_RULE_ERROR} ({@code LOG_RULE_BUDGET} when a regex ran over
 *       {@code regex_budget_ms} on the line), then per row whose {@code ums_id_} is out of range one
 *       {@code LOG_LINE_UMS_ID_RANGE};
 *   <li>the record's dead letter when the adapter ({@link LogAdapter}) refused it;
 *   <li>a heartbeat record: a heartbeat UMS to every table's result topic ({@code ok}, then aborted tables
 *       {@code abort}).
 * </ol>
 *
 * A dead letter is dbuslib/deadletter.py's JSON as Spark's {@code to_json} writes it (compact, Jackson's escapes),
 * keyed by the record's own key bytes. {@code metric} is the metric contract of logprocessor/metrics.py (its one
 * home): {@code <kind>\t<host>\t<name>\t<n>} with kind {@code rows} (n: the message's tuples), {@code unknown},
 * {@code error} (name: the code; host empty when the record could not be read), {@code heartbeat} (n: this JVM's
 * clock when it handled the record minus the heartbeat's own time, in ms).
 *
 * <p>After a reload the spec also holds the rule sets it replaces ({@code earlier}: each {@code {"until": {partition:
 * offset}, "spec": <their spec>}}, oldest first, logprocessor/switch.py): a record before a set's {@code until} in its
 * partition is shaped by that set, wholly (its rules, versions, namespaces, messages), so the lines a restarted query
 * reads again keep the shape they had before the switch offsets the reload answered.
 */
public final class LogRecordUdf implements UDF6<byte[], byte[], String, Integer, Long, Long, List<Row>> {
    private static final long serialVersionUID = 1L;
    static final String LINE_ERROR = "LOG_LINE_RULE_ERROR";
    static final String ID_RANGE = "LOG_LINE_UMS_ID_RANGE";

    private final String rules;
    private transient Engine.RuleSet set;
    private final LogAdapter adapter;
    private final LogUms ums;
    private final String[] namespaces; // per table: the namespace before the host
    private final String[] topics; // per table: its result topic
    private final String[] abortedTables, abortedNamespaces, abortedTopics;
    private final String heartbeatHead, heartbeatMiddle;
    private final String unknownTopic, deadLetterTopic, stage;
    private final String unattributed; // null unless the source masks columns
    private final long maxValueBytes;
    private final String tooBigHead, tooBigTail;
    private final String timezone;
    private transient ZoneId zone;
    private final LogRecordUdf[] earlier; // the rule sets before the switches, oldest first
    private final List<Map<Integer, Long>> until; // per earlier set: partition -> the offset it applies until

    /** {@code spec}: the JSON logprocessor/record_jvm.py {@code spec} writes. */
    public LogRecordUdf(String spec) {
        JsonNode s;
        try {
            s = new ObjectMapper().readTree(spec);
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("LogRecordUdf: not a spec: " + e.getMessage(), e);
        }
        JsonNode a = s.get("adapter");
        java.util.Set<String> files = null; // a heartbeat from any path
        if (a.path("heartbeat_files").isArray()) {
            files = new java.util.HashSet<>();
            for (JsonNode f : a.get("heartbeat_files")) files.add(f.asText());
        }
        adapter = new LogAdapter(a.get("type").asText(), a.get("heartbeat_type").asText(), a.get("max_record_bytes").asLong(),
            a.get("json_host").isNull() ? null : a.get("json_host").asText(), a.get("timezone").asText(), files);
        rules = s.get("rules").asText();
        set = LogRulesUdf.ruleSet(rules); // a rule set the engine cannot read fails here, at registration
        JsonNode t = s.get("tables");
        int n = t.size();
        namespaces = new String[n];
        topics = new String[n];
        String[] names = new String[n], middles = new String[n], types = new String[n];
        for (int k = 0; k < n; k++) {
            names[k] = t.get(k).get("table").asText();
            namespaces[k] = t.get(k).get("namespace").asText();
            topics[k] = t.get(k).get("topic").asText();
            middles[k] = t.get(k).get("middle").asText();
            types[k] = t.get(k).get("types").asText();
        }
        String sep = LogUms.SEPARATOR;
        ums = n == 0 ? null : new LogUms(s.get("head").asText(), String.join(sep, names), String.join(sep, middles),
            String.join(sep, types));
        JsonNode ab = s.get("aborted");
        abortedTables = new String[ab.size()];
        abortedNamespaces = new String[ab.size()];
        abortedTopics = new String[ab.size()];
        for (int k = 0; k < ab.size(); k++) {
            abortedTables[k] = ab.get(k).get("table").asText();
            abortedNamespaces[k] = ab.get(k).get("namespace").asText();
            abortedTopics[k] = ab.get(k).get("topic").asText();
        }
        heartbeatHead = s.get("heartbeat_head").asText();
        heartbeatMiddle = s.get("heartbeat_middle").asText();
        unknownTopic = s.get("unknown_topic").asText();
        deadLetterTopic = s.get("dead_letter_topic").asText();
        stage = s.get("stage").asText();
        unattributed = s.get("unattributed").isNull() ? null : s.get("unattributed").asText();
        maxValueBytes = s.get("max_value_bytes").asLong();
        tooBigHead = s.get("too_big").get(0).asText();
        tooBigTail = s.get("too_big").get(1).asText();
        timezone = s.get("timezone").asText();
        zone();
        JsonNode e = s.path("earlier");
        earlier = new LogRecordUdf[e.size()];
        until = new ArrayList<>(e.size());
        for (int k = 0; k < e.size(); k++) {
            earlier[k] = new LogRecordUdf(e.get(k).get("spec").asText());
            Map<Integer, Long> u = new HashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> it = e.get(k).get("until").fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> f = it.next();
                u.put(Integer.valueOf(f.getKey()), f.getValue().asLong());
            }
            until.add(u);
        }
    }

    /** The index of the rule set that shapes the record (p, o): an earlier set's, or {@link #versions()} - 1 (this one). */
    int version(int p, long o) {
        for (int k = 0; k < earlier.length; k++) {
            Long u = until.get(k).get(p);
            if (u != null && o < u) return k;
        }
        return earlier.length;
    }

    /** How many rule sets: the earlier ones and this one. */
    int versions() {
        return earlier.length + 1;
    }

    /** The rule set of index {@code k} ({@link #version}). */
    LogRecordUdf at(int k) {
        return k < earlier.length ? earlier[k] : this;
    }

    private ZoneId zone() {
        ZoneId z = zone;
        if (z == null) zone = z = ZoneId.of(timezone);
        return z;
    }

    private Engine.RuleSet ruleSet() {
        Engine.RuleSet s = set;
        if (s == null) set = s = LogRulesUdf.ruleSet(rules);
        return s;
    }

    /** One line's results (the rules UDF's LINE_TYPE). */
    private static final class LineResult implements Engine.LineSink {
        final List<String> rowTables = new ArrayList<>(2);
        final List<Integer> rowIndexes = new ArrayList<>(2);
        final List<List<String>> rows = new ArrayList<>(2);
        final List<String> errors = new ArrayList<>(0);
        final List<String> codes = new ArrayList<>(0); // per error: its dead letter's code
        boolean unmatched;

        @Override public void row(String table, int index, List<String> row) {
            rowTables.add(table);
            rowIndexes.add(index);
            rows.add(row);
        }

        @Override public void error(String table, String error) {
            error(table, null, error);
        }

        @Override public void error(String table, String code, String error) {
            errors.add("table " + table + ": " + error);
            codes.add(code == null ? LINE_ERROR : code);
        }
    }

    @Override
    public List<Row> call(byte[] value, byte[] key, String topic, Integer partition, Long offset, Long timestampMs) {
        List<Row> out = new ArrayList<>(2);
        if (partition == null || offset == null) return out;
        List<Row> others = new ArrayList<>(1);
        LogRecordUdf u = at(version(partition, offset));
        LogMessages messages = u.messages(Integer.MAX_VALUE);
        u.handle(value, key, topic, partition, offset, timestampMs, messages, others, out);
        if (messages != null) messages.flush(out);
        out.addAll(others);
        return out;
    }

    /** Open messages of this rule set's tables, of {@code budget} bytes at most; null when it has no table. */
    LogMessages messages(int budget) {
        return ums == null ? null : new LogMessages(ums, topics, budget);
    }

    /**
     * One record: its tables' rows into {@code messages} (a message at its budget goes to {@code out} at once), every
     * other output of the record to {@code others} in {@link #call}'s order.
     */
    void handle(byte[] value, byte[] key, String topic, int p, long o, Long timestampMs, LogMessages messages,
            List<Row> others, List<Row> out) {
        long now = System.currentTimeMillis();
        LogAdapter.Adapted a = adapter.adapt(value, key, p, o, timestampMs == null ? 0 : timestampMs);
        if (a.code != null) {
            others.add(deadLetter(value, key, topic, p, o, a.code, a.message, ""));
            return;
        }
        String host = a.host;
        String hostPart = host.indexOf('%') < 0 && host.indexOf('.') < 0 ? host
            : host.replace("%", "%25").replace(".", "%2E");
        String[] lines = a.lines;
        if (lines.length == 1 && lines[0] == a.text && a.record != null) { // toIndex need not read it again
            LogAdapter.Obj record = a.record;
            Engine.primeColumn0(a.text, () -> LogAdapter.asRulesObject(record));
        }
        LineResult[] results = new LineResult[lines.length];
        Engine.RuleSet s = ruleSet();
        for (int l = 0; l < lines.length; l++) {
            LineResult r = new LineResult();
            r.unmatched = !Engine.runLine(s, lines[l], r);
            results[l] = r;
        }
        // the tables' rows: a row whose ums_id_ is out of range is a dead letter below
        if (messages != null && lines.length > 0 && LogUms.inRange(p, o)) {
            String[] ns = null;
            String ts = null;
            int[] indexes = null;
            for (LineResult r : results) {
                for (int i = 0; i < r.rows.size(); i++) {
                    int k = ums.table(r.rowTables.get(i));
                    if (k < 0) continue;
                    if (ns == null) {
                        ns = new String[namespaces.length];
                        indexes = new int[namespaces.length];
                        ts = LogUms.umsTs(a.eventMs, zone());
                    }
                    int index = indexes[k]++;
                    if (index > LogUms.MAX_INDEX) continue;
                    if (ns[k] == null) ns[k] = namespaces[k] + hostPart + ".0";
                    messages.row(k, host, ns[k], p, o, index, ts, a.eventMs, r.rows.get(i), out);
                }
            }
        }
        // the unknown lines
        byte[] hostKey = null;
        for (int l = 0; l < lines.length; l++) {
            if (results[l].unmatched && results[l].errors.isEmpty()) {
                if (hostKey == null) hostKey = bytes(host);
                others.add(RowFactory.create(unknownTopic, hostKey, lines[l], "unknown\t" + host + "\t\t1"));
            }
        }
        // the line errors, then the rows out of ums_id_'s range
        for (LineResult r : results)
            for (int i = 0; i < r.errors.size(); i++)
                others.add(deadLetter(value, key, topic, p, o, r.codes.get(i), r.errors.get(i), host));
        for (LineResult r : results) {
            for (int i = 0; i < r.rows.size(); i++) {
                String problem = LogUms.idProblem(p, o, r.rowIndexes.get(i));
                if (problem != null) others.add(deadLetter(value, key, topic, p, o, ID_RANGE, problem, host));
            }
        }
        // a heartbeat
        if (a.heartbeat) {
            String ts = LogUms.umsTs(a.heartbeatMs, zone());
            String idText = LogUms.inRange(p, o) ? Long.toString(LogUms.umsId(p, o, 0)) : null;
            String latency = Long.toString(now - a.heartbeatMs);
            if (ums != null) {
                for (int k = 0; k < namespaces.length; k++)
                    others.add(heartbeat(topics[k], namespaces[k] + hostPart + ".0", a, "ok", idText, ts, host, ums.tables[k], latency));
            }
            for (int k = 0; k < abortedTables.length; k++)
                others.add(heartbeat(abortedTopics[k], abortedNamespaces[k] + hostPart + ".0", a, "abort", idText, ts, host,
                    abortedTables[k], latency));
        }
    }

    private Row heartbeat(String topic, String ns, LogAdapter.Adapted a, String status, String idText, String ts,
            String host, String table, String latency) {
        String key = "data_increment_heartbeat." + ns + "." + a.heartbeatMs + "|" + a.eventMs + "|" + status + ".wh_placeholder";
        String value = null;
        if (idText != null) {
            StringBuilder b = new StringBuilder(320).append(heartbeatHead);
            LogUms.quote(b, ns);
            value = b.append(heartbeatMiddle).append(idText).append("\",\"").append(ts).append("\"]}]}").toString();
        }
        return RowFactory.create(topic, bytes(key), value, "heartbeat\t" + host + "\t" + table + "\t" + latency);
    }

    /** dbuslib.deadletter's JSON as Spark's {@code to_json} writes it ({@code spark_value}). */
    private Row deadLetter(byte[] value, byte[] key, String topic, int p, long o, String code, String error, String host) {
        StringBuilder b = new StringBuilder(256).append("{\"code\":");
        jackson(b, code);
        b.append(",\"error\":");
        jackson(b, error);
        b.append(",\"stage\":");
        jackson(b, stage);
        b.append(",\"topic\":");
        if (topic == null) b.append("null");
        else jackson(b, topic);
        b.append(",\"partition\":").append(p).append(",\"offset\":").append(o).append(",\"key\":");
        if (key == null) b.append("null");
        else jackson(b, new String(key, StandardCharsets.UTF_8));
        String withheld = unattributed;
        if (withheld == null && value != null && value.length > maxValueBytes) withheld = tooBigHead + value.length + tooBigTail;
        b.append(",\"value_base64\":");
        if (withheld != null || value == null) b.append("null");
        else b.append('"').append(Base64.getEncoder().encodeToString(value)).append('"');
        b.append(",\"withheld\":");
        if (withheld == null) b.append("null");
        else jackson(b, withheld);
        b.append('}');
        return RowFactory.create(deadLetterTopic, key, b.toString(), "error\t" + host + "\t" + code + "\t1");
    }

    /** A JSON string as Jackson writes it (Spark's {@code to_json}). */
    private static void jackson(StringBuilder b, String s) {
        LogAdapter.quoteRaw(b, s);
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
