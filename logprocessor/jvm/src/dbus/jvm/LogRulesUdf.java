package dbus.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;

import dbus.jvm.logrules.Engine;

/**
 * The log processor's rules in the JVM (logprocessor/rules_jvm.py registers it as {@code dbus_log_rules}):
 * {@code dbus_log_rules(ruleset_json, lines)} -> one {@code struct<rows: array<struct<table, index, row:
 * array<string>>>, errors: array<struct<table, error>>, unmatched: boolean>} per line, what {@link
 * Engine#runLine} gives for that line. The rule set is parsed once per text (a static cache);
 * nothing throws on a line: a rule that breaks on it is an error of its table.
 */
public final class LogRulesUdf implements UDF2<String, scala.collection.Seq<String>, List<Row>> {
    private static final long serialVersionUID = 1L;
    private static final ConcurrentHashMap<String, Engine.RuleSet> SETS = new ConcurrentHashMap<>();

    static Engine.RuleSet ruleSet(String json) {
        Engine.RuleSet set = SETS.get(json);
        if (set == null) {
            if (SETS.size() > 64) SETS.clear();
            set = Engine.ruleSet(json);
            SETS.put(json, set);
        }
        return set;
    }

    @Override
    public List<Row> call(String rules, scala.collection.Seq<String> lines) {
        if (lines == null) return null;
        Engine.RuleSet set = ruleSet(rules);
        int n = lines.length();
        List<Row> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) out.add(line(set, lines.apply(i)));
        return out;
    }

    static Row line(Engine.RuleSet set, String line) {
        List<Row> rows = new ArrayList<>(2);
        List<Row> errors = new ArrayList<>(0);
        boolean took = Engine.runLine(set, line, new Engine.LineSink() {
            @Override public void row(String table, int index, List<String> row) {
                rows.add(RowFactory.create(table, index, row));
            }

            @Override public void error(String table, String error) {
                errors.add(RowFactory.create(table, error));
            }
        });
        return RowFactory.create(rows, errors, !took);
    }
}
