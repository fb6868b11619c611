package dbus.jvm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF5;

/**
 * The dispatcher's routes in the JVM (dispatcher/realtime.py): {@code dbus_dispatch(routable, topic, value, key,
 * partition)} -> {@code array<struct<topic, code, error, withheld, key>>}, what {@code dispatcher.job}'s Python UDF
 * gives. A record Spark SQL tagged routable ({@code dispatcher.job.tag_records}) to a schema topic this partition
 * already made sure exists is routed here; every other one (a topic's first record, heartbeat inserts, schemas
 * that need escaping, malformed records) goes, in order, to the partition's Python sidecar
 * ({@code python -m dispatcher.sidecar}), which runs {@code dispatcher.job._python_routes} on it.
 */
public final class DispatchUdf implements UDF5<Boolean, String, byte[], byte[], Integer, List<Row>> {
    private static final long serialVersionUID = 1L;
    private static final java.util.concurrent.atomic.AtomicLong JVM = new java.util.concurrent.atomic.AtomicLong(),
        PYTHON = new java.util.concurrent.atomic.AtomicLong();

    /** Records handled in this JVM since it started: {written here, sent to a sidecar} (tests, metrics). */
    public static long[] counts() { return new long[] {JVM.get(), PYTHON.get()}; }
    private static final ConcurrentHashMap<String, Partition> PARTITIONS = new ConcurrentHashMap<>();
    private static final byte[] ROUTE = Sidecar.utf8("route");

    private final String name;
    private final String[] command;
    private final String[] env;

    public DispatchUdf(String name, String[] command, String[] env) {
        this.name = name + "\0" + String.join("\0", command); // one sidecar per stage, source and configuration
        this.command = command;
        this.env = env;
    }

    static final class Partition {
        final Sidecar sidecar;
        final Map<String, List<Row>> known = new HashMap<>(); // topic -> its one route, the topic exists

        Partition(Sidecar sidecar) { this.sidecar = sidecar; }
    }

    @Override
    public List<Row> call(Boolean routable, String topic, byte[] value, byte[] key, Integer partition) {
        Partition p = PARTITIONS.computeIfAbsent(name + "\0" + partition, k -> new Partition(
            Sidecar.of(k, command, env)));
        boolean jvm = Boolean.TRUE.equals(routable) && topic != null;
        p.sidecar.touch();
        synchronized (p) {
            if (jvm) {
                List<Row> r = p.known.get(topic);
                if (r != null) {
                    JVM.incrementAndGet();
                    return r;
                }
            }
            PYTHON.incrementAndGet();
            List<byte[]> a = p.sidecar.call(Arrays.asList(ROUTE, Sidecar.utf8(jvm ? topic : null), jvm ? null : value, key));
            List<Row> out = new ArrayList<>(a.size() / 5);
            for (int i = 0; i + 4 < a.size(); i += 5)
                out.add(RowFactory.create(Sidecar.string(a.get(i)), Sidecar.string(a.get(i + 1)), Sidecar.string(a.get(i + 2)),
                    Sidecar.string(a.get(i + 3)), Sidecar.string(a.get(i + 4))));
            if (jvm && out.size() == 1 && out.get(0).get(1) == null && topic.equals(out.get(0).get(0))) {
                if (p.known.size() >= 100_000) p.known.clear();
                p.known.put(topic, List.of(out.get(0)));
            }
            return out;
        }
    }
}
