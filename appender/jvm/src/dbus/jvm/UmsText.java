package dbus.jvm;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.List;

/**
 * UMS data message texts of one rows event from the decoder's lines: what {@code ums.text.event_messages} writes
 * in Python (= {@code messages(prefix, tuple_texts(...))}), byte for byte (tests/unit/test_jvm_sidecar.py holds
 * the two to each other). A tuple is {@code {"tuple":["<ums_id_>","<ums_ts_>","<op>","<ums_uid_>",<line>]}};
 * messages hold at most maxTuples tuples and maxBytes payload bytes (a tuple's length and its comma), one
 * oversized tuple alone.
 */
final class UmsText {
    static final long ROW_LIMIT = 1_000_000L;
    private static final byte[] ENDING = {']', '}'};

    private UmsText() {}

    /**
     * The message texts, or null when this event is left to Python (no rows event id, a million tuples or more).
     * {@code lines}: the decoder's output, one line per row image joined by '\n' (an update: before, after, ...).
     */
    static List<byte[]> eventMessages(byte[] prefix, long umsId, String umsTs, char op, byte[] lines,
                                      boolean beforeUpdateImage, int maxTuples, int maxBytes) {
        if (umsId <= 0) return null;
        int[] bounds = lineBounds(lines); // start0, end0, start1, end1, ...
        int images = bounds.length / 2;
        boolean update = op == 'u';
        int first = update && !beforeUpdateImage ? 1 : 0, step = update && !beforeUpdateImage ? 2 : 1;
        int n = images <= first ? 0 : (images - first + step - 1) / step;
        if (n >= ROW_LIMIT) return null;
        byte[] id = Long.toString(umsId).getBytes(StandardCharsets.US_ASCII);
        byte[] head = ("{\"tuple\":[\"" + umsId + "\",\"" + umsTs + "\",\"").getBytes(StandardCharsets.UTF_8);
        int fixed = head.length + 1 + 3 + id.length + 6 + 2 + ENDING.length; // without the line
        List<byte[]> out = new ArrayList<>();
        Out w = new Out();
        int start = 0;
        long size = 0;
        for (int t = 0; t < n; t++) {
            int li = first + t * step;
            int from = bounds[2 * li], to = bounds[2 * li + 1];
            long rowSize = fixed + (to - from) + 1;
            if (t > start && (t - start >= maxTuples || size + rowSize > maxBytes)) {
                w.put(ENDING);
                out.add(java.util.Arrays.copyOf(w.buf, w.len));
                start = t;
                size = 0;
            }
            if (t == start) {
                w.reset();
                w.put(prefix);
            } else {
                w.put(',');
            }
            size += rowSize;
            w.put(head);
            w.put(update ? (beforeUpdateImage && li % 2 == 0 ? 'b' : 'u') : op);
            w.put('"');
            w.put(',');
            w.put('"');
            w.put(id);
            w.pad(t, 6);
            w.put('"');
            w.put(',');
            w.ensure(to - from);
            System.arraycopy(lines, from, w.buf, w.len, to - from);
            w.len += to - from;
            w.put(ENDING);
        }
        if (n > 0) {
            w.put(ENDING);
            out.add(java.util.Arrays.copyOf(w.buf, w.len));
        }
        return out;
    }

    /** Start and end of each '\n'-separated line; none for an empty text (a rows event without rows). */
    static int[] lineBounds(byte[] lines) {
        if (lines.length == 0) return new int[0];
        int count = 1;
        for (byte b : lines) if (b == '\n') count++;
        int[] bounds = new int[2 * count];
        int k = 0, from = 0;
        for (int i = 0; i < lines.length; i++) {
            if (lines[i] == '\n') {
                bounds[k++] = from;
                bounds[k++] = i;
                from = i + 1;
            }
        }
        bounds[k++] = from;
        bounds[k] = lines.length;
        return bounds;
    }

    /** Row images of an event's lines that are tuples counted as row changes (an update's before image not). */
    static int rowChanges(byte[] lines, char op) {
        if (lines.length == 0) return 0;
        int images = 1; // the lines counted, not bounded (lineBounds): this runs once per event beside it
        for (byte b : lines) if (b == '\n') images++;
        return op == 'u' ? images / 2 : images;
    }

    /** {@code ums.timefmt.ums_ts_ms}: epoch ms in zone as yyyy-MM-dd HH:mm:ss.SSS. */
    static String umsTs(long epochMs, ZoneId zone) {
        ZonedDateTime t = Instant.ofEpochMilli(epochMs).atZone(zone);
        return String.format("%04d-%02d-%02d %02d:%02d:%02d.%03d", t.getYear(), t.getMonthValue(), t.getDayOfMonth(),
            t.getHour(), t.getMinute(), t.getSecond(), t.getNano() / 1_000_000);
    }

    /** {@code ums.ids.ums_id(file, pos)}: file number * 10^13 + pos; -1 when Python must say why it is not one. */
    static long umsId(String file, long pos) {
        int dot = file == null ? -1 : file.lastIndexOf('.');
        if (dot < 0 || dot == file.length() - 1 || file.length() - dot - 1 > 6) return -1;
        long number = 0;
        for (int i = dot + 1; i < file.length(); i++) {
            char c = file.charAt(i);
            if (c < '0' || c > '9') return -1;
            number = number * 10 + (c - '0');
        }
        if (pos < 0 || pos >= 10_000_000_000_000L) return -1;
        if (number > (Long.MAX_VALUE - pos) / 10_000_000_000_000L) return -1; // Python refuses: above a 64-bit ums_id_
        return number * 10_000_000_000_000L + pos;
    }
}
