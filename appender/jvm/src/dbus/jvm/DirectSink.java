package dbus.jvm;

import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.TaskContext;
import org.apache.spark.util.TaskCompletionListener;
import org.apache.spark.sql.Row;

/**
 * The appender's own Kafka producer for a per-row source in real-time mode ({@link AppendUdf#direct}): the UDF
 * sends each record it makes here instead of returning it through Spark's explode and Kafka sink, which copied a
 * debezium-json record's 6.4 kB four more times per row (the e2e bench, docs/performance.md). Configured with
 * the sink's own options ({@code dbuslib.spark.kafka_sink_options}); one producer per JVM and settings, as
 * Spark caches its sink's. At-least-once as the sink: a task's records are flushed, and any send that failed
 * fails the task, before the task ends (a completion listener), so its batch is not committed before its
 * records are in Kafka; a failure is also raised by the next record's send. Per partition order: one producer,
 * idempotent ({@code acks=all}), records sent in the task's order.
 */
final class DirectSink {
    private static final ConcurrentHashMap<String, DirectSink> SINKS = new ConcurrentHashMap<>();

    private final String key;
    private final KafkaProducer<byte[], byte[]> producer;
    private final AtomicReference<Exception> failure = new AtomicReference<>();
    private final Set<Long> hooked = ConcurrentHashMap.newKeySet();

    private DirectSink(String key, String[] options) {
        this.key = key;
        Properties p = new Properties();
        for (int i = 0; i + 1 < options.length; i += 2) p.put(options[i], options[i + 1]);
        producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    /** The producer of these options ({@code name, value, ...} in kafka-clients' spelling); {@code key}: their
     *  {@link #key} (made once by the caller: this runs for every rows event). */
    static DirectSink of(String key, String[] options) {
        return SINKS.computeIfAbsent(key, x -> new DirectSink(x, options));
    }

    /** The key of these options in the producers of this JVM. */
    static String key(String[] options) { return String.join("\0", options); }

    /** Sends one record; raises a failure of an earlier send of this producer. */
    void send(String topic, byte[] key, byte[] value, Header[] headers) {
        check();
        producer.send(new ProducerRecord<>(topic, null, key, value, List.of(headers)), (meta, e) -> {
            if (e != null) failure.compareAndSet(null, e);
        });
    }

    /** Sends a record in the UDF's output shape: {@code struct<topic, key, value, headers array<struct<key, value>>>}. */
    void send(Row r) {
        @SuppressWarnings("unchecked")
        List<Row> hs = (List<Row>) r.get(3); // the UDF's rows hold Java lists (Spark converts them after)
        Header[] headers = new Header[hs == null ? 0 : hs.size()];
        for (int i = 0; i < headers.length; i++) {
            Row h = hs.get(i);
            headers[i] = new RecordHeader(h.getString(0), (byte[]) h.get(1));
        }
        send(r.getString(0), (byte[]) r.get(1), (byte[]) r.get(2), headers);
    }

    /** Sends a per-row record ({@link PerRowFormat}) with its headers and one more. */
    void send(String topic, DebeziumJson.Rec r, String name, byte[] value) {
        Header[] headers = new Header[r.headers.size() + 1];
        for (int i = 0; i < r.headers.size(); i++) {
            Object[] hv = r.headers.get(i);
            headers[i] = new RecordHeader((String) hv[0], (byte[]) hv[1]);
        }
        headers[headers.length - 1] = new RecordHeader(name, value);
        send(topic, r.key, r.sendValue(), headers); // copied into the producer's batch before send returns
    }

    /** Waits until every record sent so far is acknowledged; raises if one failed. */
    void flush() {
        producer.flush();
        check();
    }

    /** Once per task and producer (a rows event asks): the flush and check before {@code ctx}'s task ends. */
    void hook(TaskContext ctx) {
        if (ctx == null || !hooked.add(ctx.taskAttemptId())) return;
        long id = ctx.taskAttemptId();
        ctx.addTaskCompletionListener((TaskCompletionListener) c -> {
            hooked.remove(id);
            if (!c.isInterrupted()) flush();
        });
    }

    private void check() {
        Exception e = failure.get();
        if (e == null) return;
        // a failed producer is not used again: the task's retry gets a new one (as Spark's sink does)
        if (SINKS.remove(key, this)) producer.close(Duration.ZERO);
        throw new IllegalStateException("the appender's Kafka producer failed to send a record: " + e.getMessage(), e);
    }
}
