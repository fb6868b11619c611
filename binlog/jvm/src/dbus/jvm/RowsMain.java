package dbus.jvm;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;

/**
 * Test and bench driver: reads records framed as 4-byte big-endian length + bytes from stdin, writes for each
 * a 4-byte big-endian length (-1 for null) + the decoder's bytes. With {@code --why} a null is followed by
 * the reason as a framed UTF-8 string. With {@code --avro} each result is
 * {@code RowsDecoder.decodeWithAvro}'s. With {@code --bench N} decodes the input N times and prints timings.
 */
public final class RowsMain {
    public static void main(String[] args) throws IOException {
        boolean why = java.util.Arrays.asList(args).contains("--why");
        boolean avro = java.util.Arrays.asList(args).contains("--avro"); // decodeWithAvro
        int bench = args.length > 1 && args[0].equals("--bench") ? Integer.parseInt(args[1]) : 0;
        DataInputStream in = new DataInputStream(new BufferedInputStream(System.in, 1 << 16));
        java.util.List<byte[]> records = new java.util.ArrayList<>();
        while (true) {
            int n;
            try { n = in.readInt(); } catch (EOFException e) { break; }
            byte[] b = new byte[n];
            in.readFully(b);
            records.add(b);
        }
        RowsDecoder dec = new RowsDecoder();
        if (java.util.Arrays.asList(args).contains("--repr")) { repr(records); return; }
        dec.lenient = java.util.Arrays.asList(args).contains("--lenient");
        if (bench > 0) { bench(records, bench, dec); return; }
        DataOutputStream out = new DataOutputStream(new BufferedOutputStream(System.out, 1 << 16));
        for (byte[] r : records) {
            byte[] res = avro ? dec.decodeWithAvro(r) : dec.decode(r);
            if (res == null) {
                out.writeInt(-1);
                if (why) {
                    byte[] w = String.valueOf(dec.why).getBytes(java.nio.charset.StandardCharsets.UTF_8);
                    out.writeInt(w.length);
                    out.write(w);
                }
            } else {
                out.writeInt(res.length);
                out.write(res);
            }
        }
        out.flush();
    }

    /** Test hook: each record is 4 bytes (a float) or 8 bytes (a double), big-endian; writes repr lines. */
    private static void repr(java.util.List<byte[]> records) {
        StringBuilder sb = new StringBuilder();
        Out w = new Out();
        for (byte[] r : records) {
            java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(r);
            w.reset();
            boolean ok = r.length == 4 ? RowsDecoder.floatRepr(b.getFloat(), w) : RowsDecoder.doubleRepr(b.getDouble(), w);
            sb.append(ok ? new String(w.buf, 0, w.len, java.nio.charset.StandardCharsets.US_ASCII) : "null").append('\n');
        }
        System.out.print(sb);
        System.out.flush();
    }

    private static void bench(java.util.List<byte[]> records, int rounds, RowsDecoder dec) {
        long lines = 0, nulls = 0, bytes = 0;
        for (int warm = 0; warm < Math.max(1, rounds / 5); warm++) for (byte[] r : records) dec.decode(r);
        java.lang.management.ThreadMXBean mx = java.lang.management.ManagementFactory.getThreadMXBean();
        long c0 = mx.getCurrentThreadCpuTime();
        long t0 = System.nanoTime();
        for (int k = 0; k < rounds; k++) {
            for (byte[] r : records) {
                byte[] res = dec.decode(r);
                if (res == null) { nulls++; continue; }
                bytes += res.length;
                if (res.length > 0) { lines++; for (byte b : res) if (b == '\n') lines++; }
            }
        }
        double s = (System.nanoTime() - t0) / 1e9, cpu = (mx.getCurrentThreadCpuTime() - c0) / 1e9;
        System.out.printf("records=%d rounds=%d row_images=%d nulls=%d out_bytes=%d seconds=%.3f cpu_seconds=%.3f "
            + "images_per_s=%.0f images_per_cpu_s=%.0f%n", records.size(), rounds, lines, nulls, bytes, s, cpu, lines / s,
            lines / cpu);
    }
}
