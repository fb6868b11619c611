package dbus.jvm;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Test driver of the {@link PerRowFormat}s (tests/unit/test_jvm_rowformats.py, test_jvm_canal.py), in the
 * sidecar's frames: a request {@code lines, ums_id, ts_ms, file, pos, server_id (or null), gtid (or null), op,
 * lines, description...} or {@code raw, value, description...} (the raw record decoded by {@link RowsDecoder}
 * and its header, as {@code AppendUdf} does) is answered by {@code lines, n, n x (key, value, header count,
 * (name, value)...)}, or {@code lines, null} when the JVM leaves the record to the sidecar. The description is
 * the sidecar's from the format's name on (appender/rowshape.py), which picks the format.
 */
public final class RowFormatMain {
    public static void main(String[] args) throws IOException {
        DataInputStream in = new DataInputStream(new BufferedInputStream(System.in, 1 << 16));
        DataOutputStream out = new DataOutputStream(new BufferedOutputStream(System.out, 1 << 16));
        RowsDecoder dec = new RowsDecoder();
        while (true) {
            List<byte[]> f;
            try { f = TextMain.read(in); } catch (EOFException e) { break; }
            List<byte[]> answer = new ArrayList<>();
            List<DebeziumJson.Rec> recs = null;
            byte[] lines;
            if (s(f.get(0)).equals("raw")) {
                lines = dec.decode(f.get(1));
                PerRowFormat d = PerRowFormat.FORMATS.get(s(f.get(2))).parse(f, 2 + 9);
                Header h = dec.lastHeader;
                if (lines != null && h != null) {
                    Object ts = h.values.get("ts"), pos = h.values.get("pos"), sid = h.values.get("server_id"),
                        gtid = h.values.get("gtid");
                    char op = h.op();
                    if (ts instanceof Long && pos instanceof Long && op != 0) {
                        recs = d.records(UmsText.umsId(h.str("file"), (Long) pos), (Long) ts * 1000, h.str("file"),
                            (Long) pos, sid instanceof Long ? (Long) sid : null,
                            gtid instanceof String ? (String) gtid : null, op, lines);
                    }
                }
            } else {
                lines = f.get(8);
                PerRowFormat d = PerRowFormat.FORMATS.get(s(f.get(9))).parse(f, 9 + 9);
                recs = d.records(Long.parseLong(s(f.get(1))), Long.parseLong(s(f.get(2))), s(f.get(3)),
                    Long.parseLong(s(f.get(4))), f.get(5) == null ? null : Long.parseLong(s(f.get(5))),
                    f.get(6) == null ? null : s(f.get(6)), s(f.get(7)).charAt(0), lines);
            }
            answer.add(lines);
            if (recs == null) answer.add(null);
            else {
                answer.add(b(Integer.toString(recs.size())));
                for (DebeziumJson.Rec r : recs) {
                    answer.add(r.key);
                    byte[] value = r.value(), sent = r.sendValue(); // the producer's array (reused) is the same
                    if (!java.util.Arrays.equals(value, sent) || r.length() != (value == null ? 0 : value.length))
                        throw new IllegalStateException("a record's value differs when written for a send");
                    answer.add(value);
                    answer.add(b(Integer.toString(r.headers.size())));
                    for (Object[] h : r.headers) {
                        answer.add(b((String) h[0]));
                        answer.add((byte[]) h[1]);
                    }
                }
            }
            TextMain.write(out, answer);
        }
        out.flush();
    }

    private static String s(byte[] b) { return new String(b, StandardCharsets.UTF_8); }

    private static byte[] b(String s) { return s.getBytes(StandardCharsets.UTF_8); }
}
