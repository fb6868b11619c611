package dbus.jvm;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF1;

import dbus.jvm.logrules.Engine;

/**
 * {@link LogRulesUdf} with its rule set given once, to the constructor (logprocessor/rules_jvm.py registers one per
 * rule set): {@code lines -> array<LINE_TYPE>}. The rule set's text is not a column, so no row converts and
 * hashes it again; each deserialized copy finds the parsed set once.
 */
public final class LogRulesLinesUdf implements UDF1<scala.collection.Seq<String>, List<Row>> {
    private static final long serialVersionUID = 1L;
    private final String rules;
    private transient Engine.RuleSet set;

    public LogRulesLinesUdf(String rules) {
        this.rules = rules;
        LogRulesUdf.ruleSet(rules); // a rule set the engine cannot read fails here, at registration
    }

    @Override
    public List<Row> call(scala.collection.Seq<String> lines) {
        if (lines == null) return null;
        Engine.RuleSet s = set;
        if (s == null) set = s = LogRulesUdf.ruleSet(rules);
        int n = lines.length();
        List<Row> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) out.add(LogRulesUdf.line(s, lines.apply(i)));
        return out;
    }
}
