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
 * </pre>
 */
public final class FlatMessageDump {
    private static final long KAFKA_DEADLINE_MS = 120_000;

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
            for (String line : readTopic(args[1], args[2])) {
                out.println(line);
            }
        } else {
            System.err.println("usage: FlatMessageDump file VALUES.jsonl | kafka BOOTSTRAP TOPIC");
            System.exit(2);
        }
    }

    private static List<String> readTopic(String bootstrap, String topic) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("enable.auto.commit", "false");
        List<String> lines = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer =
                new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            long deadline = System.currentTimeMillis() + KAFKA_DEADLINE_MS;
            while (!reached(consumer, end)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("did not reach the end offsets " + end + " of " + topic);
                }
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    lines.add(dump(record.key(), record.value()));
                }
            }
        }
        return lines;
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
