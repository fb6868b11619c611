import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONWriter;
import com.alibaba.otter.canal.protocol.FlatMessage;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.function.BiConsumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Reads canal-json records with Canal's own class, as Canal's Kafka client does
 * (KafkaCanalConnector.getFlatListWithoutAck: {@code JSON.parseObject(value, FlatMessage.class)}, fastjson2, the
 * value read with a StringDeserializer), and prints each parsed FlatMessage's fields through its getters as one
 * JSON line: {"key":..,"id":..,"database":..,"table":..,"pkNames":..,"isDdl":..,"type":..,"es":..,"ts":..,
 * "sql":..,"sqlType":..,"mysqlType":..,"data":..,"old":..,"gtid":..}; a tombstone is {"key":..,"tombstone":true}.
 *
 * <pre>
 *   java -cp CP FlatMessageDump file VALUES.jsonl             one record value per line (UTF-8)
 *   java -cp CP FlatMessageDump kafka BOOTSTRAP TOPIC         every record up to the end offsets at the start
 *   java -cp CP FlatMessageDump table BOOTSTRAP TOPIC[,TOPIC] the tables the records rebuild, one row a line
 * </pre>
 *
 * <p>{@code table} applies each parsed message in order (INSERT and UPDATE put {@code data}'s row under its
 * primary key, an UPDATE whose {@code old} holds key columns first removes the old key, DELETE removes it)
 * and prints each table's last rows as {"database":..,"table":..,"pkNames":..,"mysqlType":..,"sqlType":..,
 * "data":{..}}; a count of records and rows goes to stderr.
 */
public final class FlatMessageDump {
    private static final long KAFKA_DEADLINE_MS = 600_000; // a guard against a broker gone, not a timing

    private FlatMessageDump() {}

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        if (args.length == 2 && args[0].equals("file")) {
            for (String line : Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8)) {
                if (!line.isEmpty()) {
                    out.println(dump(null, line));
                }
            }
        } else if (args.length == 3 && args[0].equals("kafka")) {
            readTopics(args[1], args[2], (key, value) -> out.println(dump(key, value)));
        } else if (args.length == 3 && args[0].equals("table")) {
            Map<String, Map<String, Object>> rows = new LinkedHashMap<>();
            long[] records = {0};
            readTopics(args[1], args[2], (key, value) -> {
                records[0]++;
                if (value != null) {
                    apply(rows, JSON.parseObject(value, FlatMessage.class));
                }
            });
            for (Map<String, Object> row : rows.values()) {
                out.println(JSON.toJSONString(row, JSONWriter.Feature.WriteNulls));
            }
            System.err.println("records " + records[0] + " rows " + rows.size());
        } else {
            System.err.println("usage: FlatMessageDump file VALUES.jsonl | kafka|table BOOTSTRAP TOPIC[,TOPIC]");
            System.exit(2);
        }
    }

    private static void apply(Map<String, Map<String, Object>> rows, FlatMessage m) {
        if (Boolean.TRUE.equals(m.getIsDdl()) || m.getData() == null) {
            return;
        }
        for (int i = 0; i < m.getData().size(); i++) {
            Map<String, String> data = m.getData().get(i);
            String key = rowKey(m, data);
            if ("DELETE".equals(m.getType())) {
                rows.remove(key);
                continue;
            }
            if ("UPDATE".equals(m.getType()) && m.getOld() != null && m.getOld().size() > i) {
                Map<String, String> before = new LinkedHashMap<>(data);
                before.putAll(m.getOld().get(i));
                rows.remove(rowKey(m, before));
            }
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("database", m.getDatabase());
            row.put("table", m.getTable());
            row.put("pkNames", m.getPkNames());
            row.put("mysqlType", m.getMysqlType());
            row.put("sqlType", m.getSqlType());
            row.put("data", data);
            rows.put(key, row);
        }
    }

    private static String rowKey(FlatMessage m, Map<String, String> data) {
        // a table without a primary key: the whole row is its key
        List<String> names = m.getPkNames() != null ? m.getPkNames() : new ArrayList<>(new TreeSet<>(data.keySet()));
        List<String> values = new ArrayList<>();
        values.add(m.getDatabase());
        values.add(m.getTable());
        for (String name : names) {
            values.add(data.get(name));
        }
        return JSON.toJSONString(values, JSONWriter.Feature.WriteNulls);
    }

    private static void readTopics(String bootstrap, String topics, BiConsumer<String, String> each) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("enable.auto.commit", "false");
        try (KafkaConsumer<String, String> consumer =
                new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (String topic : topics.split(",")) {
                for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                    partitions.add(new TopicPartition(topic, info.partition()));
                }
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            long deadline = System.currentTimeMillis() + KAFKA_DEADLINE_MS;
            while (!reached(consumer, end)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("did not reach the end offsets " + end + " of " + topics);
                }
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    each.accept(record.key(), record.value());
                }
            }
        }
    }

    private static boolean reached(KafkaConsumer<String, String> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (consumer.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    private static String dump(String key, String value) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("key", key);
        if (value == null) {
            line.put("tombstone", true);
            return JSON.toJSONString(line, JSONWriter.Feature.WriteNulls);
        }
        FlatMessage m = JSON.parseObject(value, FlatMessage.class);
        line.put("id", m.getId());
        line.put("database", m.getDatabase());
        line.put("table", m.getTable());
        line.put("pkNames", m.getPkNames());
        line.put("isDdl", m.getIsDdl());
        line.put("type", m.getType());
        line.put("es", m.getEs());
        line.put("ts", m.getTs());
        line.put("sql", m.getSql());
        line.put("sqlType", m.getSqlType());
        line.put("mysqlType", m.getMysqlType());
        line.put("data", m.getData());
        line.put("old", m.getOld());
        line.put("gtid", m.getGtid());
        return JSON.toJSONString(line, JSONWriter.Feature.WriteNulls);
    }
}
