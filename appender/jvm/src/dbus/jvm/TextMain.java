package dbus.jvm;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.List;

/**
 * Test driver of {@link UmsText} (tests/unit/test_jvm_sidecar.py), in the sidecar's frames (dbuslib/sidecar.py):
 * a request {@code text, prefix, ums_id, ums_ts, op, lines, before_update_image (0/1), max_tuples, max_bytes} is
 * answered by the message texts (or one null: left to Python); {@code ts, epoch_ms, zone} by the ums_ts_ text;
 * {@code id, file, pos} by the ums_id_ (-1: not one).
 */
public final class TextMain {
    public static void main(String[] args) throws IOException {
        DataInputStream in = new DataInputStream(new BufferedInputStream(System.in, 1 << 16));
        DataOutputStream out = new DataOutputStream(new BufferedOutputStream(System.out, 1 << 16));
        while (true) {
            List<byte[]> f;
            try { f = read(in); } catch (EOFException e) { break; }
            String op = s(f.get(0));
            List<byte[]> answer = new ArrayList<>();
            if (op.equals("text")) {
                List<byte[]> texts = UmsText.eventMessages(f.get(1), Long.parseLong(s(f.get(2))), s(f.get(3)),
                    s(f.get(4)).charAt(0), f.get(5), s(f.get(6)).equals("1"), Integer.parseInt(s(f.get(7))),
                    Integer.parseInt(s(f.get(8))));
                if (texts == null) answer.add(null); else answer.addAll(texts);
            } else if (op.equals("ts")) {
                answer.add(b(UmsText.umsTs(Long.parseLong(s(f.get(1))), ZoneId.of(s(f.get(2))))));
            } else {
                answer.add(b(Long.toString(UmsText.umsId(s(f.get(1)), Long.parseLong(s(f.get(2)))))));
            }
            write(out, answer);
        }
        out.flush();
    }

    private static String s(byte[] b) { return new String(b, StandardCharsets.UTF_8); }

    private static byte[] b(String s) { return s.getBytes(StandardCharsets.UTF_8); }

    static List<byte[]> read(DataInputStream in) throws IOException {
        in.readInt();
        int count = in.readUnsignedShort();
        List<byte[]> fields = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int n = in.readInt();
            if (n == -1) { fields.add(null); continue; }
            byte[] x = new byte[n];
            in.readFully(x);
            fields.add(x);
        }
        return fields;
    }

    static void write(DataOutputStream out, List<byte[]> fields) throws IOException {
        int len = 2;
        for (byte[] x : fields) len += 4 + (x == null ? 0 : x.length);
        out.writeInt(len);
        out.writeShort(fields.size());
        for (byte[] x : fields) {
            if (x == null) { out.writeInt(-1); continue; }
            out.writeInt(x.length);
            out.write(x);
        }
    }
}
