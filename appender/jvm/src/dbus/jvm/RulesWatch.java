package dbus.jvm;

import java.util.concurrent.ConcurrentHashMap;

import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;

/**
 * A ZooKeeper watch on the appender's rules node ({@code <root>/Appender/<ds>/rules}, appender/rules.py), one per
 * executor JVM and node: {@link #changes} grows at every change of the node (created, set, deleted) and at every
 * (re)connection, when a change may have been missed. The real-time appender compares it per record, and asks its
 * sidecar to take the rules of now when it moved: a `dbus reload` reaches the record path within milliseconds
 * of the node's change, not at the next batch. Without ZooKeeper the count does not move and the rules apply
 * from the next task, as in micro-batch mode.
 */
final class RulesWatch implements Watcher {
    private static final ConcurrentHashMap<String, RulesWatch> ALL = new ConcurrentHashMap<>();
    private final String hosts, path;
    private final int timeoutMs;
    private volatile long changes;
    private ZooKeeper zk;

    private RulesWatch(String hosts, String path, int timeoutMs) {
        this.hosts = hosts;
        this.path = path;
        this.timeoutMs = timeoutMs;
    }

    static RulesWatch of(String hosts, String path, int timeoutMs) {
        return ALL.computeIfAbsent(hosts + "\0" + path, k -> {
            RulesWatch w = new RulesWatch(hosts, path, timeoutMs);
            w.connect();
            return w;
        });
    }

    long changes() { return changes; }

    private synchronized void connect() {
        try {
            if (zk != null) zk.close();
            zk = new ZooKeeper(hosts, timeoutMs, this);
        } catch (Exception e) {
            zk = null; // no watch: the rules apply from the next task
        } 
    }

    @Override
    public void process(WatchedEvent event) {
        if (event.getType() == Event.EventType.None) {
            if (event.getState() == Event.KeeperState.SyncConnected) {
                changes++;
                arm();
            } else if (event.getState() == Event.KeeperState.Expired) {
                changes++;
                connect();
            }
            return;
        }
        changes++;
        arm();
    }

    private synchronized void arm() {
        try {
            if (zk != null) zk.exists(path, this); // one watch: the node's creation, change or deletion
        } catch (Exception e) {
            changes++; // not armed now: the next (re)connection arms it
        }
    }
}
