package dbus.jvm;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The Python process beside a partition's task (dbuslib/sidecar.py): started on first use, one per key (a stage's
 * Kafka partition), kept for the executor's life, so a partition's Python state survives from one batch to the
 * next as a Spark Python worker's does. {@link #call} sends one request and waits for its answer; the partition's
 * records stay in order because the task waits. Frames: u32 big-endian body length; body: u16 field count, then
 * per field an i32 length (-1: null) and its bytes. The answer's first field is "ok" (the rest is returned) or
 * "error" and a message, which fails the task. The process reads its stdin to the end: when this JVM dies, it
 * stops.
 */
public final class Sidecar {
    private static final ConcurrentHashMap<String, Sidecar> POOL = new ConcurrentHashMap<>();
    private static final byte[] OK = "ok".getBytes(StandardCharsets.US_ASCII);

    /** A sidecar whose partition handled no record this long is stopped (started again by the next request):
     * ended queries leave none, while a partition with records (heartbeats at least) keeps its own. */
    static final long IDLE_MS = 120_000;

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (Sidecar s : POOL.values()) s.stop();
        }, "dbus-sidecar-stop"));
        Thread reaper = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(IDLE_MS / 4);
                } catch (InterruptedException e) {
                    return;
                }
                long now = System.currentTimeMillis();
                for (Sidecar s : POOL.values()) s.stopIfIdle(now);
            }
        }, "dbus-sidecar-reaper");
        reaper.setDaemon(true);
        reaper.start();
    }

    private final String key;
    private final List<String> command;
    private final Map<String, String> env;
    private Process process;
    private DataOutputStream out;
    private DataInputStream in;
    private volatile long lastUse = System.currentTimeMillis();
    /** Requests answered (tests). */
    long calls;

    private Sidecar(String key, List<String> command, Map<String, String> env) {
        this.key = key;
        this.command = command;
        this.env = env;
    }

    /** The sidecar of {@code key}, made (not started) on first use: {@code command} and {@code env} ({@code name,
     *  value, ...}) as a stage's UDF is given them (appender/job.py, dispatcher/job.py). */
    public static Sidecar of(String key, String[] command, String[] env) {
        return POOL.computeIfAbsent(key, k -> new Sidecar(k, java.util.Arrays.asList(command), pairs(env)));
    }

    private static Map<String, String> pairs(String[] kv) {
        Map<String, String> m = new java.util.HashMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) m.put(kv[i], kv[i + 1]);
        return m;
    }

    /** The partition it serves handled a record (in the JVM or not): the sidecar is in use, not idle. */
    public void touch() { lastUse = System.currentTimeMillis(); }

    /** The answer's fields after "ok"; a RuntimeException when the process fails or answers "error". */
    public synchronized List<byte[]> call(List<byte[]> fields) {
        lastUse = System.currentTimeMillis();
        try {
            if (process == null || !process.isAlive()) start();
            write(fields);
            List<byte[]> answer = read();
            calls++;
            if (answer.isEmpty() || !java.util.Arrays.equals(answer.get(0), OK)) {
                String why = answer.size() > 1 && answer.get(1) != null
                    ? new String(answer.get(1), StandardCharsets.UTF_8) : "no reason given";
                throw new IllegalStateException("sidecar " + key + " refused a request: " + why);
            }
            return answer.subList(1, answer.size());
        } catch (IOException e) {
            String exit = "";
            if (process != null) {
                try {
                    if (process.waitFor(2, java.util.concurrent.TimeUnit.SECONDS)) exit = " (exit code " + process.exitValue() + ")";
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                }
            }
            stop();
            throw new IllegalStateException("sidecar " + key + " (" + String.join(" ", command) + ") failed" + exit
                + ": " + e + "; its stderr is in the executor's log", e);
        }
    }

    private void start() throws IOException {
        List<String> argv = new ArrayList<>();
        for (String a : command) argv.add(resolve(a));
        ProcessBuilder pb = new ProcessBuilder(argv);
        for (Map.Entry<String, String> e : env.entrySet()) pb.environment().put(e.getKey(), resolve(e.getValue()));
        pb.redirectError(ProcessBuilder.Redirect.INHERIT);
        process = pb.start();
        out = new DataOutputStream(new BufferedOutputStream(process.getOutputStream(), 1 << 16));
        in = new DataInputStream(new BufferedInputStream(process.getInputStream(), 1 << 16));
    }

    /** {@code value} with "{files}" replaced by the folder where Spark put this executor's copy of the job's
     * files (--py-files, --files; dbuslib/sidecar.py FILES), and "{sparkpython}" by its Spark's Python path
     * (pyspark.zip and py4j, as its Python workers get): only the executor knows them. */
    static String resolve(String value) {
        if (value.contains("{sparkpython}")) {
            String path;
            try {
                path = org.apache.spark.api.python.PythonUtils.sparkPythonPath();
            } catch (RuntimeException e) { // no Spark installation here (TextMain)
                path = "";
            }
            value = value.replace("{sparkpython}", path);
        }
        if (!value.contains("{files}")) return value;
        String root;
        try {
            root = org.apache.spark.SparkFiles.getRootDirectory();
        } catch (RuntimeException e) { // no SparkEnv: not in a Spark executor (TextMain)
            root = ".";
        }
        return value.replace("{files}", root);
    }

    private synchronized void stopIfIdle(long now) {
        if (process != null && now - lastUse > IDLE_MS) stop();
    }

    private synchronized void stop() {
        if (process != null) {
            process.destroy();
            process = null;
        }
    }

    private void write(List<byte[]> fields) throws IOException {
        int len = 2;
        for (byte[] f : fields) len += 4 + (f == null ? 0 : f.length);
        out.writeInt(len);
        out.writeShort(fields.size());
        for (byte[] f : fields) {
            if (f == null) {
                out.writeInt(-1);
            } else {
                out.writeInt(f.length);
                out.write(f);
            }
        }
        out.flush();
    }

    private List<byte[]> read() throws IOException {
        int len = in.readInt();
        if (len < 2) throw new EOFException("answer of " + len + " byte(s)");
        int count = in.readUnsignedShort();
        List<byte[]> fields = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int n = in.readInt();
            if (n == -1) {
                fields.add(null);
            } else {
                byte[] b = new byte[n];
                in.readFully(b);
                fields.add(b);
            }
        }
        return fields;
    }

    static byte[] utf8(String s) { return s == null ? null : s.getBytes(StandardCharsets.UTF_8); }

    static String string(byte[] b) { return b == null ? null : new String(b, StandardCharsets.UTF_8); }
}
