package dbus.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;

import dbus.jvm.logrules.Engine;

/**
 * One rule group on rows, as {@code operators.run_group} runs it from the given rows (the rules as given, no saveAs
 * appended): {@code dbus_log_group(group_json, rows)} -> {@code struct<rows: array<array<string>>, err: string>}
 * (compile.GROUP_TYPE). The golden cases of tests/golden/logrules run through it; {@code group_json} is
 * {@code {"group": name, "rules": [{"op", "grammar": [entry]}]}}.
 */
public final class LogRulesGroupUdf implements UDF2<String, scala.collection.Seq<scala.collection.Seq<String>>, Row> {
    private static final long serialVersionUID = 1L;
    private static final ConcurrentHashMap<String, Engine.Group> GROUPS = new ConcurrentHashMap<>();

    @Override
    public Row call(String group, scala.collection.Seq<scala.collection.Seq<String>> rows) {
        if (rows == null) return null;
        Engine.Group g = GROUPS.get(group);
        if (g == null) {
            if (GROUPS.size() > 1024) GROUPS.clear();
            g = Engine.group(group);
            GROUPS.put(group, g);
        }
        List<List<String>> in = new ArrayList<>(rows.length());
        for (int i = 0; i < rows.length(); i++) {
            scala.collection.Seq<String> r = rows.apply(i);
            List<String> row = new ArrayList<>(r.length());
            for (int j = 0; j < r.length(); j++) row.add(r.apply(j));
            in.add(row);
        }
        Engine.Result r = Engine.runGroup(g, in);
        return RowFactory.create(r.rows, r.error);
    }
}
