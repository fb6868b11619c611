package dbus.jvm;

import java.time.ZoneId;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF5;

/**
 * The appender's record path in the JVM (appender/realtime.py): {@code dbus_append(topic, partition, offset, key,
 * value)} -> the record's output records {@code array<struct<topic, key, value, headers>>}, as
 * {@code appender.process} makes them. A rows record of a table shape this partition's sidecar has described
 * (no masking, JSON, its version valid at the record's position) is written here: the decoder's lines
 * ({@link RowsDecoder}) into message texts ({@link UmsText}), or, for a table written in a per-row format
 * (appender/rowshape.py describes it), into one record per row change ({@link PerRowFormat}: {@link DebeziumJson},
 * {@link CanalJson}, {@link ConfluentAvro}). Every other record (the first of a shape, DDL, heartbeats, chunks,
 * masked tables, UMS in Avro, what the decoder declines, anything malformed) goes, in order, to the
 * partition's Python sidecar ({@code python -m appender.sidecar}), which runs {@code PartitionProcessor.process}
 * on it and may describe its shape for the next records. A version change the sidecar reports forgets every
 * description of the partition.
 */
public final class AppendUdf implements UDF5<String, Integer, Long, byte[], byte[], List<Row>> {
    private static final long serialVersionUID = 1L;
    private static final java.util.concurrent.atomic.AtomicLong JVM = new java.util.concurrent.atomic.AtomicLong(),
        PYTHON = new java.util.concurrent.atomic.AtomicLong();

    /** Records handled in this JVM since it started: {written here, sent to a sidecar} (tests, metrics). */
    public static long[] counts() { return new long[] {JVM.get(), PYTHON.get()}; }
    private static final ThreadLocal<RowsDecoder> DECODER = ThreadLocal.withInitial(RowsDecoder::new);
    private static final ConcurrentHashMap<String, Partition> PARTITIONS = new ConcurrentHashMap<>();
    private static final byte[] RECORD = Sidecar.utf8("record"), BEGIN = Sidecar.utf8("begin"),
        RULES = Sidecar.utf8("rules");
    private static final String UMS_KEY = "ums_key";
    /** The per-row formats written here, by the name a description starts with (appender/rowshape.py). */
    private static final Map<String, PerRowFormat.Parser> PER_ROW = PerRowFormat.FORMATS;

    private final String name;
    private final String[] command;
    private final String[] env;
    private String zkHosts, rulesPath;
    private int zkTimeoutMs;
    private transient RulesWatch rules;
    private boolean avro;

    /** Producer options (name, value, ...): records are sent by {@link DirectSink}, the UDF returns none. */
    private String[] direct;
    private transient String directKey; // DirectSink.key(direct), made once

    /** A per-row source: every record is sent by the JVM's own producer ({@link DirectSink}) with these options
     *  ({@code name, value, ...}, kafka-clients' spelling); the UDF then returns no records. */
    public AppendUdf direct(String[] options) {
        this.direct = options;
        return this;
    }

    /** The source writes Avro: the sidecar gets each record's rows with their Avro (RowsDecoder.decodeWithAvro). */
    public AppendUdf avro(boolean on) {
        this.avro = on;
        return this;
    }

    /** The rules node to watch (appender/rules.py): a reload reaches the record path at once. */
    public AppendUdf watching(String hosts, String path, int timeoutMs) {
        this.zkHosts = hosts;
        this.rulesPath = path;
        this.zkTimeoutMs = timeoutMs;
        return this;
    }

    /** {@code name}: the stage and source (the sidecars' key); {@code command}: the sidecar's argv; {@code env}: k, v, ... */
    public AppendUdf(String name, String[] command, String[] env) {
        this.name = name + "\0" + String.join("\0", command); // one sidecar per stage, source and configuration
        this.command = command;
        this.env = env;
    }

    /** What one table shape's records become, as the sidecar described it. */
    static final class Shape {
        long from, until;          // valid for records with from <= ums_id_ < until
        byte[] prefix;             // the message text up to the payload's '['
        String topic;
        byte[] key;
        String umsKeyHead, umsKeyTail; // the ums_key header around the event's ums_ts_ in ms
        ZoneId zone;
        boolean beforeUpdateImage;
        int maxTuples, maxBytes, recordLimit;
        String schema, table;
        PerRowFormat perRow;       // a table written in a per-row format: its records (no UMS text)
    }

    /** A partition's state: its sidecar, its shapes, the row changes written here since they were last reported. */
    static final class Partition {
        final Sidecar sidecar;
        final IdentityHashMap<TableMap, Shape> shapes = new IdentityHashMap<>();
        final Map<String, Long> counts = new HashMap<>();
        long task = -1;
        long rulesSeen;
        long lastTs = Long.MIN_VALUE;
        ZoneId lastZone;
        String lastTsText;

        Partition(Sidecar sidecar) { this.sidecar = sidecar; }
    }

    @Override
    public List<Row> call(String topic, Integer partition, Long offset, byte[] key, byte[] value) {
        Partition p = PARTITIONS.computeIfAbsent(name + "\0" + topic + "\0" + partition, k -> new Partition(
            Sidecar.of(k, command, env)));
        p.sidecar.touch();
        synchronized (p) {
            TaskContext ctx = TaskContext.get();
            long task = ctx == null ? 0 : ctx.taskAttemptId();
            if (rules == null && rulesPath != null) rules = RulesWatch.of(zkHosts, rulesPath, zkTimeoutMs);
            long seen = rules == null ? 0 : rules.changes();
            if (task != p.task) { // a new task: the sidecar takes the rules of now and re-reads the versions
                List<byte[]> a = p.sidecar.call(List.of(BEGIN));
                if (!"0".equals(Sidecar.string(a.get(0)))) p.shapes.clear();
                p.task = task;
                p.rulesSeen = seen;
            } else if (seen != p.rulesSeen) { // the rules node changed: the sidecar takes the rules of now
                List<byte[]> a = p.sidecar.call(List.of(RULES));
                if (!"0".equals(Sidecar.string(a.get(0)))) p.shapes.clear();
                p.rulesSeen = seen;
            }
            RowsDecoder dec = DECODER.get();
            byte[] lines = value == null ? null : avro ? dec.decodeWithAvro(value) : dec.decode(value);
            DirectSink sink = null;
            if (direct != null) {
                if (directKey == null) directKey = DirectSink.key(direct);
                sink = DirectSink.of(directKey, direct);
                sink.hook(ctx);
            }
            if (lines != null) {
                List<Row> fast = fast(p, dec, lines, sink);
                if (fast != null) {
                    JVM.incrementAndGet();
                    return sent(fast, sink);
                }
            }
            PYTHON.incrementAndGet();
            return sent(viaSidecar(p, topic, partition, offset, key, value, lines), sink);
        }
    }

    /** {@code out}, or, with a direct sink, none: each record sent by it. */
    private static List<Row> sent(List<Row> out, DirectSink sink) {
        if (sink == null || out.isEmpty()) return out;
        for (Row r : out) sink.send(r);
        return List.of();
    }

    private List<Row> fast(Partition p, RowsDecoder dec, byte[] lines, DirectSink sink) {
        TableMap tm = dec.lastTable();
        Shape s = p.shapes.get(tm);
        if (s == null) return null;
        Header h = dec.lastHeader;
        Object ts = h.values.get("ts"), pos = h.values.get("pos");
        if (!(ts instanceof Long) || !(pos instanceof Long)) return null;
        long umsId = UmsText.umsId(h.str("file"), (Long) pos);
        if (umsId < s.from || umsId >= s.until) return null;
        long tsMs = (Long) ts * 1000;
        char op = h.op();
        if (op == 0) return null;
        if (s.perRow != null) return perRow(p, s, h, umsId, tsMs, op, lines, sink);
        List<byte[]> texts = UmsText.eventMessages(s.prefix, umsId, tsText(p, tsMs, s.zone), op, lines,
            s.beforeUpdateImage, s.maxTuples, s.maxBytes);
        if (texts == null) return null;
        List<Row> out = new ArrayList<>(texts.size());
        byte[] umsKey = Sidecar.utf8(s.umsKeyHead + tsMs + s.umsKeyTail);
        List<Row> headers = List.of(RowFactory.create(UMS_KEY, umsKey));
        for (byte[] t : texts) {
            if (t.length > s.recordLimit) return null; // chunked by Python (ums.chunks)
            out.add(RowFactory.create(s.topic, s.key, t, headers));
        }
        String table = s.schema + "\0" + s.table;
        p.counts.merge(table, (long) UmsText.rowChanges(lines, op), Long::sum);
        return out;
    }

    /** A per-row table's records (a {@link PerRowFormat}), as the sidecar's PartitionProcessor._rows_per_row writes them. */
    private List<Row> perRow(Partition p, Shape s, Header h, long umsId, long tsMs, char op, byte[] lines,
                             DirectSink sink) {
        if (avro) return null; // lines followed by their Avro: the sidecar's
        Object sid = h.values.get("server_id"), gtid = h.values.get("gtid");
        if (sid != null && sid != Header.NULL && !(sid instanceof Long)) return null;
        if (gtid != null && gtid != Header.NULL && !(gtid instanceof String)) return null;
        List<DebeziumJson.Rec> recs = s.perRow.records(umsId, tsMs, h.str("file"), (Long) h.values.get("pos"),
            sid instanceof Long ? (Long) sid : null, gtid instanceof String ? (String) gtid : null, op, lines);
        if (recs == null || recs.isEmpty()) return null;
        for (DebeziumJson.Rec r : recs) {
            if (r.length() > s.recordLimit) return null; // chunked by Python (ums.chunks)
        }
        byte[] umsKeyValue = Sidecar.utf8(s.umsKeyHead + tsMs + s.umsKeyTail);
        p.counts.merge(s.schema + "\0" + s.table, (long) UmsText.rowChanges(lines, op), Long::sum);
        if (sink != null) { // no Rows: each record straight to the producer
            for (DebeziumJson.Rec r : recs) sink.send(s.topic, r, UMS_KEY, umsKeyValue);
            return List.of();
        }
        Row umsKey = RowFactory.create(UMS_KEY, umsKeyValue);
        List<Row> out = new ArrayList<>(recs.size());
        for (DebeziumJson.Rec r : recs) {
            List<Row> headers = new ArrayList<>(r.headers.size() + 1);
            for (Object[] hv : r.headers) headers.add(RowFactory.create(hv[0], hv[1]));
            headers.add(umsKey);
            out.add(RowFactory.create(s.topic, r.key, r.value(), headers));
        }
        return out;
    }

    private static String tsText(Partition p, long tsMs, ZoneId zone) {
        if (tsMs != p.lastTs || zone != p.lastZone) {
            p.lastTsText = UmsText.umsTs(tsMs, zone);
            p.lastTs = tsMs;
            p.lastZone = zone;
        }
        return p.lastTsText;
    }

    private List<Row> viaSidecar(Partition p, String topic, Integer partition, Long offset, byte[] key, byte[] value,
                                 byte[] lines) {
        List<byte[]> req = new ArrayList<>(8);
        req.add(RECORD);
        req.add(Sidecar.utf8(topic));
        req.add(Sidecar.utf8(String.valueOf(partition)));
        req.add(Sidecar.utf8(String.valueOf(offset)));
        req.add(key);
        req.add(value);
        req.add(lines);
        req.add(counts(p));
        List<byte[]> a = p.sidecar.call(req);
        // answer: n, then per record topic, key, value, header count, (header key, header value)...; then the
        // versions-changed flag; then an optional shape description
        int i = 0;
        int n = Integer.parseInt(Sidecar.string(a.get(i++)));
        List<Row> out = new ArrayList<>(n);
        for (int r = 0; r < n; r++) {
            String t = Sidecar.string(a.get(i++));
            byte[] k = a.get(i++), v = a.get(i++);
            int hn = Integer.parseInt(Sidecar.string(a.get(i++)));
            List<Row> hs = new ArrayList<>(hn);
            for (int j = 0; j < hn; j++) hs.add(RowFactory.create(Sidecar.string(a.get(i++)), a.get(i++)));
            out.add(RowFactory.create(t, k, v, hs));
        }
        if ("1".equals(Sidecar.string(a.get(i++)))) p.shapes.clear();
        PerRowFormat.Parser format = i < a.size() && lines != null ? PER_ROW.get(Sidecar.string(a.get(i))) : null;
        if (format != null) {
            i++; // a per-row table's description (appender/rowshape.py)
            Shape s = new Shape();
            s.from = Long.parseLong(Sidecar.string(a.get(i++)));
            s.until = Long.parseLong(Sidecar.string(a.get(i++)));
            s.topic = Sidecar.string(a.get(i++));
            s.umsKeyHead = Sidecar.string(a.get(i++));
            s.umsKeyTail = Sidecar.string(a.get(i++));
            s.recordLimit = Integer.parseInt(Sidecar.string(a.get(i++)));
            s.schema = Sidecar.string(a.get(i++));
            s.table = Sidecar.string(a.get(i++));
            s.perRow = format.parse(a, i);
            if (p.shapes.size() >= 1024) p.shapes.clear();
            p.shapes.put(DECODER.get().lastTable(), s);
        } else if (i < a.size() && lines != null) {
            Shape s = new Shape();
            s.from = Long.parseLong(Sidecar.string(a.get(i++)));
            s.until = Long.parseLong(Sidecar.string(a.get(i++)));
            s.prefix = a.get(i++);
            s.topic = Sidecar.string(a.get(i++));
            s.key = a.get(i++);
            s.umsKeyHead = Sidecar.string(a.get(i++));
            s.umsKeyTail = Sidecar.string(a.get(i++));
            s.zone = ZoneId.of(Sidecar.string(a.get(i++)));
            s.beforeUpdateImage = "1".equals(Sidecar.string(a.get(i++)));
            s.maxTuples = Integer.parseInt(Sidecar.string(a.get(i++)));
            s.maxBytes = Integer.parseInt(Sidecar.string(a.get(i++)));
            s.recordLimit = Integer.parseInt(Sidecar.string(a.get(i++)));
            s.schema = Sidecar.string(a.get(i++));
            s.table = Sidecar.string(a.get(i++));
            if (p.shapes.size() >= 1024) p.shapes.clear();
            p.shapes.put(DECODER.get().lastTable(), s);
        }
        return out;
    }

    /** The row changes written here since the last report, "schema NUL table NUL count" lines; null when none. */
    private static byte[] counts(Partition p) {
        if (p.counts.isEmpty()) return null;
        StringBuilder b = new StringBuilder();
        for (Map.Entry<String, Long> e : p.counts.entrySet()) b.append(e.getKey()).append('\0').append(e.getValue()).append('\n');
        p.counts.clear();
        return Sidecar.utf8(b.toString());
    }
}
