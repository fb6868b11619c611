package dbus.jvm;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/**
 * The open UMS messages of log tables, one per (host, table), that rows are added to until {@link #flush}: the
 * rows of one record ({@link LogRecordUdf}, each record its own messages) or of a chunk of a partition's records
 * ({@link LogBatch}: the original's one message per host and table per poll). A message is the bytes {@link LogUms}
 * gives (logprocessor/logums.py), each tuple with its own record's coordinates and {@code ums_ts_}; its key is
 * {@code data_increment_data.<namespace>.<event ms of its first tuple>.wh_placeholder}, its metric
 * {@code rows\t<host>\t<table>\t<tuples>} (logprocessor/metrics.py).
 *
 * <p>Flushed messages come host by host (in the order hosts first gave a row), each host's table by table (in the
 * rule set's order). A message that would pass {@code budget} bytes (UTF-8, its closing included) is given without the row that would make it
 * pass, which opens the next one: a chunk's messages stay under the Kafka record limit whatever the rows' number (a
 * row over the budget alone is a message of its own).
 */
final class LogMessages {
    private final LogUms ums;
    private final String[] topics;
    private final int budget;
    private final Map<String, Open[]> open = new LinkedHashMap<>();

    private static final class Open {
        final StringBuilder b = new StringBuilder(1024);
        final String namespace;
        final long firstMs;
        int count;
        long bytes; // of b in UTF-8

        Open(String namespace, long firstMs) {
            this.namespace = namespace;
            this.firstMs = firstMs;
        }
    }

    /** @param topics per table of {@code ums}, its result topic; @param budget the bytes a message may have at most */
    LogMessages(LogUms ums, String[] topics, int budget) {
        this.ums = ums;
        this.topics = topics;
        this.budget = budget;
    }

    /**
     * Table {@code k}'s row {@code values} of the record (p, o), its {@code index}-th row of the table in the record;
     * {@code namespace} the table's with the host. A message given before {@link #flush} goes to {@code out}.
     */
    void row(int k, String host, String namespace, int p, long o, int index, String ts, long eventMs,
            List<String> values, List<Row> out) {
        Open[] per = open.get(host);
        if (per == null) open.put(host, per = new Open[ums.tables.length]);
        Open m = per[k];
        if (m == null) per[k] = m = open(k, namespace, eventMs);
        int mark = m.b.length();
        if (m.count > 0) m.b.append(',');
        LogUms.tuple(m.b, ums.doubles[k], p, o, index, ts, values);
        int added = utf8Length(m.b, mark);
        m.count++;
        m.bytes += added;
        if (m.bytes + 2 <= budget) return;
        if (m.count > 1) { // the message without this row, then this row opens the next one
            String tuple = m.b.substring(mark + 1);
            m.b.setLength(mark);
            m.count--;
            m.bytes -= added;
            out.add(message(k, host, m));
            per[k] = m = open(k, namespace, eventMs);
            m.b.append(tuple);
            m.bytes += added - 1;
            m.count = 1;
            if (m.bytes + 2 <= budget) return;
        }
        out.add(message(k, host, m)); // one row at the budget or over it: a message of its own
        per[k] = null;
    }

    private Open open(int k, String namespace, long eventMs) {
        Open m = new Open(namespace, eventMs);
        m.b.append(ums.head);
        LogUms.quote(m.b, namespace);
        m.b.append(ums.middles[k]);
        m.bytes = utf8Length(m.b, 0);
        return m;
    }

    /** Every open message to {@code out} (see the class comment for the order); none open after. */
    void flush(List<Row> out) {
        for (Map.Entry<String, Open[]> e : open.entrySet()) {
            Open[] per = e.getValue();
            for (int k = 0; k < per.length; k++) if (per[k] != null) out.add(message(k, e.getKey(), per[k]));
        }
        open.clear();
    }

    /** The UTF-8 length of {@code b} from {@code from} on. */
    private static int utf8Length(StringBuilder b, int from) {
        int n = b.length(), bytes = n - from;
        for (int i = from; i < n; i++) {
            char c = b.charAt(i);
            if (c >= 0x80) bytes += c < 0x800 || Character.isSurrogate(c) ? 1 : 2; // a surrogate pair: 4
        }
        return bytes;
    }

    private Row message(int k, String host, Open m) {
        String key = "data_increment_data." + m.namespace + "." + m.firstMs + ".wh_placeholder";
        return RowFactory.create(topics[k], key.getBytes(StandardCharsets.UTF_8), m.b.append("]}").toString(),
            "rows\t" + host + "\t" + ums.tables[k] + "\t" + m.count);
    }
}
