package dbus.jvm;

import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.execution.datasources.v2.LowLatencyClock;
import org.apache.spark.sql.streaming.StreamingQuery;
import org.apache.spark.sql.streaming.StreamingQueryProgress;
import org.apache.spark.util.ShutdownHookManager;
import org.apache.spark.util.SystemClock;

/**
 * A planned stop of a real-time query at a committed point (docs/realtime.md, Stopping): nothing to replay.
 *
 * <p>A real-time batch's tasks read until an end time, {@code LowLatencyClock}'s now plus the batch duration,
 * computed on the driver when the batch is planned; the batch commits its end offsets only when every task has
 * ended. {@link #finish} switches the clock of this JVM to "the end of time": a reader of this JVM ends at its
 * next record (one blocked on an idle partition at its poll's end, the batch's end at the latest), the batch
 * commits what it read, and the batches planned after it end before they read anything (their end time is
 * the clock's now plus the duration, past the largest long: negative). {@code finish} returns once the running
 * batch committed; the query stopped then leaves its checkpoint at the point its output reached.
 *
 * <p>Executors in other JVMs (a cluster) have their own clock. The driver's stop writes a marker into every
 * partition the query reads (its value the query's run id: {@code dbuslib.spark.wake_readers}); the reader
 * that gets one hands it to {@link Marker} (the stage's input filter, {@code without_stop_markers}), which
 * switches that executor's clock to the end of time for the tasks of that run alone (the run id is the job group
 * of its jobs): its readers end at their next record too. A marker of an earlier run (left after a
 * stop's committed end, read again after the restart) names another run and changes nothing.
 *
 * <p>{@link #register} also adds a shutdown hook that runs before Spark's own (the executor's, SparkContext's), so a
 * SIGTERM that reaches the JVM itself (the stage's whole process group, a cluster manager's stop) finishes
 * the batch before Spark stops, and says so on stderr (the stage's log) as the driver would.
 */
public final class PlannedStop {
    private static final Set<Registered> QUERIES = ConcurrentHashMap.newKeySet();
    private static final int HOOK_PRIORITY = 200; // before Spark's own: an executor's (100), SparkContext's (50)
    private static volatile boolean stopping;
    private static volatile boolean hooked;
    private static volatile boolean settled;
    /** The run whose stop marker a reader of this JVM got: its tasks' readers see the end of time. */
    private static volatile String markedRun;
    /** The local property of a streaming query's jobs that holds its run id: StreamExecution.runStream makes
     *  the run id their job group. */
    static final String RUN_ID_KEY = "spark.jobGroup.id";

    private record Registered(StreamingQuery query, long timeoutMs) {}

    /** Now as the real-time readers see it: the wall clock, or {@code Long.MAX_VALUE} once a stop began. */
    static final class StopClock extends SystemClock {
        @Override
        public long getTimeMillis() {
            return stopping || markedTask() ? Long.MAX_VALUE : super.getTimeMillis();
        }
    }

    /** Whether the calling thread runs a task of the run whose stop marker this JVM got. */
    private static boolean markedTask() {
        String run = markedRun;
        if (run == null) {
            return false;
        }
        TaskContext ctx = TaskContext.get();
        return ctx != null && run.equals(ctx.getLocalProperty(RUN_ID_KEY));
    }

    /**
     * The stage's input filter calls this for each stop marker its readers get ({@code value}: the marker's,
     * the stopping run's id; null for a marker of before run ids) and skips the record: a marker of the run
     * the calling task belongs to ends that run's readers in this JVM at their next record.
     */
    public static final class Marker implements UDF1<byte[], Boolean> {
        @Override
        public Boolean call(byte[] value) {
            TaskContext ctx = TaskContext.get();
            if (value != null && ctx != null) {
                marked(new String(value, StandardCharsets.UTF_8), ctx.getLocalProperty(RUN_ID_KEY));
            }
            return Boolean.TRUE;
        }
    }

    /** The run whose stop marker a reader of this JVM got since the last {@link #resume}, or null. */
    public static String markedRun() {
        return markedRun;
    }

    /** A marker of run {@code run} read by a task of run {@code taskRun}: the end of time for that run's
     *  tasks when they are the same run. */
    static void marked(String run, String taskRun) {
        if (run.isEmpty() || !run.equals(taskRun)) {
            return; // an earlier run's marker, or one of another query reading the same topic
        }
        installClock();
        markedRun = run;
    }

    /** This JVM's real-time readers ask {@link StopClock} for the time from now on (once). */
    private static synchronized void installClock() {
        if (!(LowLatencyClock.getClock() instanceof StopClock)) {
            LowLatencyClock.setClock(new StopClock());
        }
    }

    private PlannedStop() {}

    /** {@code query} (real-time mode) is finished by {@link #finish} at this JVM's shutdown, waiting at most
     * {@code timeoutMs}. */
    public static synchronized void register(StreamingQuery query, long timeoutMs) {
        QUERIES.removeIf(r -> !r.query().isActive());
        QUERIES.add(new Registered(query, timeoutMs));
        if (!hooked) {
            hooked = true;
            ShutdownHookManager.addShutdownHook(HOOK_PRIORITY, new scala.runtime.AbstractFunction0<scala.runtime.BoxedUnit>() {
                @Override
                public scala.runtime.BoxedUnit apply() {
                    for (Registered r : QUERIES) {
                        if (!r.query().isActive()) {
                            continue; // stopped by its driver: it said how
                        }
                        long batch = finish(r.query(), r.timeoutMs());
                        if (settled) {
                            continue;
                        }
                        System.err.println(r.query().name() + (batch >= 0
                            ? ": stopped after batch " + batch + " committed: a restart replays nothing"
                            : ": stopped before its running batch committed: a restart replays it"));
                    }
                    return scala.runtime.BoxedUnit.UNIT;
                }
            });
        }
    }

    /** Ends the running batch of {@code query} at a committed point: the batch id committed, or -1 when the
     * query ended first or {@code timeoutMs} passed (a stop then replays that batch, as a crash does). */
    public static long finish(StreamingQuery query, long timeoutMs) {
        return query.isActive() ? awaitCommit(query, begin(query), timeoutMs) : -1;
    }

    /** The stop begins: this JVM's real-time readers end at their next record, the batches planned from now
     * on read nothing. Returns the id of the batch running now. */
    public static long begin(StreamingQuery query) {
        long running = committed(query) + 1;
        installClock();
        stopping = true;
        return running;
    }

    /** Waits until batch {@code running} of {@code query} committed: its id, or -1 (the query ended first, or
     * {@code timeoutMs} passed). */
    public static long awaitCommit(StreamingQuery query, long running, long timeoutMs) {
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        while (System.nanoTime() < deadline && query.isActive()) {
            long done = committed(query);
            if (done >= running) {
                return done;
            }
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return -1;
            }
        }
        return -1;
    }

    /** The driver stops its query itself at a point that replays nothing (its batch committed, or read
     * nothing): a shutdown hook waiting for the same query says nothing of it. */
    public static void settled() {
        settled = true;
    }

    /** After the finished query stopped: this JVM's real-time readers follow the wall clock again (another
     * query of the same JVM, a log processor's next rules, a test's next query). */
    public static void resume() {
        stopping = false;
        markedRun = null;
    }

    private static long committed(StreamingQuery query) {
        StreamingQueryProgress last = query.lastProgress();
        return last == null ? -1 : last.batchId();
    }
}
