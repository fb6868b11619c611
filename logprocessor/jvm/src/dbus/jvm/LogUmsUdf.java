package dbus.jvm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF5;

/**
 * The UMS messages of a record's log tables (logprocessor/logums_jvm.py registers one per rule set;
 * tests/unit/test_logums_jvm.py runs it): {@code (partition, offset, ums_ts, namespaces, results) -> array<string>}, per table (in
 * the constructor's order, {@code namespaces} alike) the bytes {@code logums.message_json} gives for the rows the
 * table took from the record's lines, null when it took none ({@link LogUms} builds them). {@code results} is the
 * rules UDF's {@code array<LINE_TYPE>}, converted once for every table.
 */
public final class LogUmsUdf
        implements UDF5<Integer, Long, String, scala.collection.Seq<String>, scala.collection.Seq<Row>, List<String>> {
    private static final long serialVersionUID = 1L;
    static final String SEPARATOR = LogUms.SEPARATOR;

    private final LogUms ums;

    /** See {@link LogUms#LogUms}. */
    public LogUmsUdf(String head, String tables, String middles, String types) {
        this.ums = new LogUms(head, tables, middles, types);
    }

    @Override
    public List<String> call(
            Integer partition, Long offset, String ts, scala.collection.Seq<String> namespaces,
            scala.collection.Seq<Row> results) {
        if (partition == null || offset == null || ts == null || namespaces == null || results == null) return null;
        String[] ns = new String[namespaces.length()];
        for (int k = 0; k < ns.length; k++) ns[k] = namespaces.apply(k);
        LogUms.Builder b = ums.builder(partition, offset, ts, ns);
        int n = results.length();
        for (int l = 0; l < n; l++) {
            Row line = results.apply(l);
            if (line == null || line.isNullAt(0)) continue;
            scala.collection.Seq<Row> rows = line.getSeq(0);
            int m = rows.length();
            for (int r = 0; r < m; r++) {
                Row row = rows.apply(r);
                int k = ums.table(row.getString(0));
                if (k < 0) continue;
                List<String> values = row.isNullAt(2) ? null : scala.jdk.javaapi.CollectionConverters.asJava(row.<String>getSeq(2));
                b.row(k, values);
            }
        }
        return new ArrayList<>(Arrays.asList(b.finish()));
    }

    /** A JSON string as Python's {@code json.dumps(ensure_ascii=False)} writes it. */
    static void quote(StringBuilder b, String s) {
        LogUms.quote(b, s);
    }

    /** A DOUBLE value as Python's {@code repr} of its double, or null when it is not a finite decimal number. */
    public static String pythonDouble(String text) {
        return LogUms.pythonDouble(text);
    }
}
