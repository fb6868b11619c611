package dbus.jvm.logrules;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A rule regex's run on one cell within a time budget (docs/logs.md, Regex budget; logprocessor/regexbudget.py is
 * the Python engine's): {@code java.util.regex} reads its input only through {@link CharSequence#charAt}, so the
 * input is wrapped in {@link Chars}, which counts the reads and, every {@link #CHECK_EVERY} of them, looks at the
 * clock. A run is over its budget when it has taken {@code ms} milliseconds <em>and</em> made at least
 * {@link #MIN_READS_PER_MS} reads per millisecond of it, so a pause of the JVM alone (a collection, a busy
 * machine) never puts a line over; then {@link Exceeded} is thrown from inside the matcher, and the engine makes
 * the line a dead letter {@code LOG_RULE_BUDGET} naming the rule.
 */
public final class Budget {
    private Budget() {}

    public static final String CODE = "LOG_RULE_BUDGET";
    public static final int DEFAULT_MS = 100; // processor.regex_budget_ms's default (dbuslib/config.py)
    static final int CHECK_EVERY = 1 << 12;
    static final long MIN_READS_PER_MS = 10_000;

    /** A regex ran over its budget; the message is the dead letter's reason, worded as regexbudget.reason. */
    public static final class Exceeded extends RuntimeException {
        private static final long serialVersionUID = 1L;
        Exceeded(String reason) { super(reason, null, false, false); }
    }

    static String reason(String pattern, long ms, String text) {
        return "regex " + Text.repr(pattern) + " ran over its budget of " + ms + " ms on a " + Text.cpLen(text)
            + "-character text";
    }

    /** The cell's text as the matcher reads it: {@code charAt} counts, and checks the budget now and then. */
    static final class Chars implements CharSequence {
        private final String text, pattern;
        private final long ms, deadline, minReads;
        private long reads;
        private int untilCheck = CHECK_EVERY;

        Chars(String text, String pattern, long ms) {
            this.text = text;
            this.pattern = pattern;
            this.ms = ms;
            this.deadline = System.nanoTime() + ms * 1_000_000L;
            this.minReads = ms * MIN_READS_PER_MS;
        }

        @Override public char charAt(int index) {
            if (--untilCheck == 0) check();
            return text.charAt(index);
        }

        private void check() {
            untilCheck = CHECK_EVERY;
            reads += CHECK_EVERY;
            if (reads >= minReads && System.nanoTime() - deadline > 0) throw new Exceeded(reason(pattern, ms, text));
        }

        @Override public int length() { return text.length(); }
        @Override public CharSequence subSequence(int start, int end) { return text.substring(start, end); }
        @Override public String toString() { return text; }
    }

    /** A matcher of {@code rx} over {@code text} whose reads count against {@code ms} from now. */
    static Matcher matcher(Pattern rx, String text, long ms) {
        return rx.matcher(new Chars(text, rx.pattern(), ms));
    }

    /**
     * {@code rx.split(text)} within {@code ms}, with one difference: a zero-width match between the two halves of
     * a surrogate pair is no split point. {@code java.util.regex} tries an empty match at every UTF-16 index, so
     * {@code "x*"} cut an emoji into two lone halves; the pieces are code points, as the Python engine's are
     * (logprocessor/javatext.py split_matches). Otherwise {@link Pattern#split(CharSequence)}: no leading empty
     * piece for a zero-width match at 0, trailing empty pieces dropped, no match gives the whole text.
     */
    static String[] split(Pattern rx, String text, long ms) {
        Matcher m = matcher(rx, text, ms);
        java.util.List<String> pieces = new java.util.ArrayList<>();
        int index = 0;
        while (m.find()) {
            int start = m.start(), end = m.end();
            if (end == 0) continue;
            if (start == end && start < text.length() && Character.isLowSurrogate(text.charAt(start))
                    && Character.isHighSurrogate(text.charAt(start - 1))) continue;
            pieces.add(text.substring(index, start));
            index = end;
        }
        if (index == 0) return new String[] {text};
        pieces.add(text.substring(index));
        int n = pieces.size();
        while (n > 0 && pieces.get(n - 1).isEmpty()) n--;
        return pieces.subList(0, n).toArray(new String[0]);
    }
}
