package dbus.jvm;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.ObjectMapper;

import dbus.jvm.logrules.Engine;

/**
 * The log rule engine's judgement of a rule set before it runs ({@link Engine#problems}): what publishing a table's
 * rules ({@code dbus logrules publish}, the console) and the processor's start ask the engine that will run them
 * (logprocessor/rules_jvm.py). {@link #problems} for a JVM at hand (the processor's, through py4j); {@link #main}
 * for the others, without Spark: one rule set per line on stdin ({@code rules_jvm.ruleset_json}), one line per rule
 * set on stdout, {@code {"problems": [...]}} (empty: accepted) or {@code {"error": "..."}} when the engine cannot read
 * it; it runs until stdin ends, so a process asks many times for one start.
 */
public final class LogRulesCheck {
    private LogRulesCheck() {}

    private static final ObjectMapper MAPPER = new ObjectMapper();

    /** The problems of a rule set's JSON; IllegalArgumentException when the engine cannot read it. */
    public static String[] problems(String ruleset) {
        List<String> found = Engine.problems(Engine.ruleSet(ruleset));
        return found.toArray(new String[0]);
    }

    /** One answer line for one rule set line. */
    static String answer(String line) throws IOException {
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            out.put("problems", problems(line));
        } catch (RuntimeException e) {
            out.put("error", String.valueOf(e.getMessage()));
        }
        return MAPPER.writeValueAsString(out);
    }

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isBlank()) continue;
            out.println(answer(line));
            out.flush();
        }
    }
}
