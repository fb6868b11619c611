package dbus.jvm;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.expressions.Aggregator;

/**
 * The log processor's counts of a micro-batch (logprocessor/counts_jvm.py registers it as {@code dbus_log_counts},
 * observed with {@code Dataset.observe}): the {@code metric} strings of its output rows, the contract of
 * logprocessor/metrics.py ({@code "<kind>\t<host>\t<name>\t<n>"}), folded per (kind, host, name) into how many,
 * the sum and the largest {@code n}; the result the compact JSON {@code metrics.counts_json} writes, sorted by
 * key: {@code [["rows","vm","app_orders",3,17,9],...]}. A metric that does not parse counts under the kind
 * {@code invalid} (host and name empty, n 0); a null metric is not counted. Python's {@code metrics.fold} is the
 * reference (tests/unit/test_log_counts_jvm.py compares them).
 */
public final class LogCountsAgg extends Aggregator<String, LogCountsAgg.Counts, String> {
    private static final long serialVersionUID = 1L;
    static final String[] KINDS = {"rows", "unknown", "error", "heartbeat"};
    static final String INVALID = "invalid";

    /** A (kind, host, name). */
    record Key(String kind, String host, String name) implements Serializable {}

    /** The buffer: per key {count, sum, max}. */
    public static final class Counts implements Serializable {
        private static final long serialVersionUID = 1L;
        final HashMap<Key, long[]> byKey = new HashMap<>();

        void add(Key key, long count, long sum, long max) {
            long[] t = byKey.get(key);
            if (t == null) {
                byKey.put(key, new long[] {count, sum, max});
            } else {
                t[0] += count;
                t[1] += sum;
                t[2] = Math.max(t[2], max);
            }
        }
    }

    @Override
    public Counts zero() {
        return new Counts();
    }

    @Override
    public Counts reduce(Counts b, String metric) {
        if (metric == null) {
            return b;
        }
        int first = metric.indexOf('\t');
        int last = metric.lastIndexOf('\t');
        int second = last > 0 ? metric.lastIndexOf('\t', last - 1) : -1;
        String kind = first > 0 ? metric.substring(0, first) : "";
        Long n = second > first ? parseN(metric, last + 1) : null;
        if (n == null || !isKind(kind)) {
            b.add(new Key(INVALID, "", ""), 1, 0, 0);
        } else {
            String host = metric.substring(first + 1, second);
            String name = metric.substring(second + 1, last);
            b.add(new Key(kind, host, name), 1, n, n);
        }
        return b;
    }

    private static boolean isKind(String kind) {
        for (String k : KINDS) {
            if (k.equals(kind)) {
                return true;
            }
        }
        return false;
    }

    /** The decimal integer from {@code from} to the end (ASCII digits, an optional sign, 1 to 18 digits). */
    static Long parseN(String s, int from) {
        int i = from;
        boolean negative = false;
        if (i < s.length() && (s.charAt(i) == '-' || s.charAt(i) == '+')) {
            negative = s.charAt(i) == '-';
            i++;
        }
        int digits = s.length() - i;
        if (digits < 1 || digits > 18) {
            return null;
        }
        long v = 0;
        for (; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '9') {
                return null;
            }
            v = v * 10 + (c - '0');
        }
        return negative ? -v : v;
    }

    @Override
    public Counts merge(Counts a, Counts b) {
        for (Map.Entry<Key, long[]> e : b.byKey.entrySet()) {
            long[] t = e.getValue();
            a.add(e.getKey(), t[0], t[1], t[2]);
        }
        return a;
    }

    @Override
    public String finish(Counts c) {
        List<Key> keys = new ArrayList<>(c.byKey.keySet());
        keys.sort(LogCountsAgg::compareKeys);
        StringBuilder out = new StringBuilder("[");
        for (Key key : keys) {
            String[] parts = {key.kind(), key.host(), key.name()};
            long[] t = c.byKey.get(key);
            if (out.length() > 1) {
                out.append(',');
            }
            out.append('[');
            for (String p : parts) {
                LogUms.quote(out, p); // json.dumps(ensure_ascii=False)'s string
                out.append(',');
            }
            out.append(t[0]).append(',').append(t[1]).append(',').append(t[2]).append(']');
        }
        return out.append(']').toString();
    }

    /** Python's order of (kind, host, name) tuples of str: by code point, field by field. */
    static int compareKeys(Key a, Key b) {
        int c = compareCodePoints(a.kind(), b.kind());
        if (c == 0) {
            c = compareCodePoints(a.host(), b.host());
        }
        return c != 0 ? c : compareCodePoints(a.name(), b.name());
    }

    static int compareCodePoints(String a, String b) {
        int i = 0;
        int j = 0;
        while (i < a.length() && j < b.length()) {
            int ca = a.codePointAt(i);
            int cb = b.codePointAt(j);
            if (ca != cb) {
                return Integer.compare(ca, cb);
            }
            i += Character.charCount(ca);
            j += Character.charCount(cb);
        }
        return Integer.compare(a.length() - i, b.length() - j);
    }

    @Override
    public Encoder<Counts> bufferEncoder() {
        return Encoders.javaSerialization(Counts.class);
    }

    @Override
    public Encoder<String> outputEncoder() {
        return Encoders.STRING();
    }
}
