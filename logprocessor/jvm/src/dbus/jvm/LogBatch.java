package dbus.jvm;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The log processor's projection over a partition's records (logprocessor/record_jvm.py {@code batch_outputs}):
 * {@link LogRecordUdf}'s outputs, with the tables' rows of up to {@code message_records} consecutive records
 * (a chunk) in one UMS message per host and table, as the original's transform bolt writes one message per host and
 * table per poll of a partition (docs/logs.md, UMS for log tables). A message is given early when it reaches
 * {@code message_bytes} bytes (the source's {@code ums.max_message_bytes}). At a chunk's end come its messages, then each
 * record's other outputs in record order (unknown lines, dead letters, heartbeats: a heartbeat after the rows of the
 * records before it). With {@code message_records} 1 the outputs are {@link LogRecordUdf}'s, record by record.
 *
 * <p>Rows are {@code (topic string, key binary, value string, metric string)}, read from the Kafka source's columns.
 */
public final class LogBatch implements MapPartitionsFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    static final StructType OUT = new StructType()
        .add("topic", DataTypes.StringType)
        .add("key", DataTypes.BinaryType)
        .add("value", DataTypes.StringType)
        .add("metric", DataTypes.StringType);

    private final LogRecordUdf records;
    private final int chunkRecords;
    private final int budget;

    /** {@code spec}: the JSON of logprocessor/record_jvm.py {@code spec}, with message_records and message_bytes. */
    public LogBatch(String spec) {
        records = new LogRecordUdf(spec);
        JsonNode s;
        try {
            s = new ObjectMapper().readTree(spec);
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("LogBatch: not a spec: " + e.getMessage(), e);
        }
        chunkRecords = s.path("message_records").asInt(1);
        budget = s.path("message_bytes").asInt(Integer.MAX_VALUE);
        if (chunkRecords < 1 || budget < 1)
            throw new IllegalArgumentException("LogBatch: message_records and message_bytes must be > 0");
    }

    /** The outputs of {@code raw} (the Kafka source's columns: value, key, topic, partition, offset, timestamp). */
    public static Dataset<Row> apply(Dataset<Row> raw, String spec) {
        Dataset<Row> in = raw.selectExpr("value", "key", "topic", "partition", "offset", "unix_millis(timestamp) AS ts");
        return in.mapPartitions(new LogBatch(spec), Encoders.row(OUT));
    }

    @Override
    public Iterator<Row> call(Iterator<Row> input) {
        return new Chunks(input);
    }

    private final class Chunks implements Iterator<Row> {
        private final Iterator<Row> input;
        private final ArrayDeque<Row> ready = new ArrayDeque<>();
        private final List<Row> early = new ArrayList<>(); // messages at their budget, given before the chunk ends
        private final List<Row> others = new ArrayList<>();
        // per rule set (LogRecordUdf.version: those before a reload's switch offsets, then the current one)
        private final LogMessages[] messages = new LogMessages[records.versions()];
        private int held;

        Chunks(Iterator<Row> input) {
            this.input = input;
        }

        @Override
        public boolean hasNext() {
            while (ready.isEmpty()) {
                if (!input.hasNext()) {
                    if (held == 0) return false;
                    end();
                    continue;
                }
                Row r = input.next();
                if (r.isNullAt(3) || r.isNullAt(4)) continue; // no coordinates: LogRecordUdf gives nothing
                int k = records.version(r.getInt(3), r.getLong(4));
                LogRecordUdf u = records.at(k);
                if (messages[k] == null) messages[k] = u.messages(budget);
                u.handle((byte[]) r.get(0), (byte[]) r.get(1), r.getString(2), r.getInt(3), r.getLong(4),
                    r.isNullAt(5) ? null : r.getLong(5), messages[k], others, early);
                ready.addAll(early);
                early.clear();
                if (++held >= chunkRecords) end();
            }
            return true;
        }

        private void end() {
            List<Row> out = new ArrayList<>();
            for (LogMessages m : messages) if (m != null) m.flush(out); // the older rule sets' records came first
            out.addAll(others);
            others.clear();
            ready.addAll(out);
            held = 0;
        }

        @Override
        public Row next() {
            if (!hasNext()) throw new NoSuchElementException();
            return ready.poll();
        }
    }
}
