package dbus.jvm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * A per-row output format written in the JVM in real-time mode ({@link AppendUdf}): the records of one table
 * version's rows events, from the decoder's lines, byte for byte what the format's Python formatter writes
 * through the appender's per-row path ({@code PartitionProcessor._rows_per_row}). The sidecar describes the
 * table version after it wrote its first record (appender/rowshape.py); the description's first field names
 * the format, and {@code AppendUdf} picks the format's {@link Parser} by it.
 */
abstract class PerRowFormat {
    /** The headers every per-row record carries (ums/formats: the row change's id, its row's, the table version). */
    static final String UMS_ID = "ums_id_", UMS_UID = "ums_uid_", UMS_VERSION = "ums_version";
    /** The per-row formats written in the JVM, by the name a description starts with (appender/rowshape.py). */
    static final Map<String, Parser> FORMATS = Map.of(
        DebeziumJson.FORMAT, DebeziumJson::parse, CanalJson.FORMAT, CanalJson::parse,
        ConfluentAvro.FORMAT, ConfluentAvro::parse);

    /** Reads a format's description fields from {@code i} on (after the format name, the range, topic,
     *  ums_key parts, record limit, schema and table). */
    interface Parser {
        PerRowFormat parse(List<byte[]> description, int i);
    }

    /**
     * The records of one rows event ({@code op} i, u or d; {@code lines} one line per row image, an update's
     * before and after), or null when the sidecar must write them (anything not converted with certainty).
     * {@code serverId}/{@code gtid}: the raw header's values (null when absent).
     */
    abstract List<DebeziumJson.Rec> records(long umsId, long tsMs, String file, long pos, Long serverId, String gtid,
                                            char op, byte[] lines);

    /**
     * The column kinds of the typed per-row formats' descriptions (appender/rowshape.py: {@code kind} or
     * {@code kind:param}): one vocabulary for Debezium's JSON and Confluent Avro, each taking those it writes.
     */
    static final int BOOL = 0, INT = 1, LONG = 2, ULONG = 3, UDEC = 4, DEC = 5, FLOAT = 6, DOUBLE = 7, DATE = 8,
        DT_MS = 9, DT_US = 10, TS = 11, TIME_US = 12, TIME_MS = 13, STR = 14, BYTES = 15, BITS = 16, BIN_HEX = 17,
        BIN_B64 = 18, BIN_B64URL = 19, ID = 20;

    /** The set of {@code kinds} as a mask for {@link #columnKind}. */
    static long takes(int... kinds) {
        long mask = 0;
        for (int k : kinds) mask |= 1L << k;
        return mask;
    }

    /**
     * Column {@code c}'s kind from its description {@code kind} into {@code kinds}, and its parameter (a
     * decimal's scale, a timestamp's precision, a BIT column's width) into {@code params}; a kind not in
     * {@code takes} is refused, naming {@code format}.
     */
    static void columnKind(String format, long takes, String kind, int c, int[] kinds, int[] params) {
        int colon = kind.indexOf(':');
        String head = colon < 0 ? kind : kind.substring(0, colon), arg = colon < 0 ? "" : kind.substring(colon + 1);
        int k;
        switch (head) {
            case "id": k = ID; break;
            case "bool": k = BOOL; break;
            case "int": k = INT; break;
            case "long": k = LONG; break;
            case "ulong": k = ULONG; break;
            case "udec": k = UDEC; break;
            case "dec": k = DEC; break;
            case "float": k = FLOAT; break;
            case "double": k = DOUBLE; break;
            case "date": k = DATE; break;
            case "dt_ms": k = DT_MS; break;
            case "dt_us": k = DT_US; break;
            case "ts": k = TS; break;
            case "time_us": k = TIME_US; break;
            case "time_ms": k = TIME_MS; break;
            case "str": k = STR; break;
            case "bytes": k = BYTES; break;
            case "bits": k = BITS; break;
            case "bin": k = "hex".equals(arg) ? BIN_HEX : "base64-url-safe".equals(arg) ? BIN_B64URL : BIN_B64; break;
            default: k = -1;
        }
        if (k < 0 || (takes & (1L << k)) == 0) {
            throw new IllegalArgumentException(format + ": unknown column kind " + kind);
        }
        kinds[c] = k;
        if (k == DEC || k == TS || k == BITS) params[c] = Integer.parseInt(arg);
    }

    /** A description's key columns ({@code 0,2}: their indices; empty: no primary key). */
    static int[] keys(byte[] field) {
        String k = Sidecar.string(field);
        return k.isEmpty() ? new int[0] : Arrays.stream(k.split(",")).mapToInt(Integer::parseInt).toArray();
    }

    /** The bounds of a rows event's row images in {@code lines} ({@link UmsText#lineBounds}), or null when the
     *  sidecar must write the event (no lines, no UMS id, too many rows, an update without its pairs). */
    static int[] imageBounds(long umsId, char op, byte[] lines) {
        if (lines.length == 0 || umsId <= 0) return null;
        int[] bounds = UmsText.lineBounds(lines);
        int images = bounds.length / 2;
        return images >= UmsText.ROW_LIMIT || (op == 'u' && images % 2 != 0) ? null : bounds;
    }

    /** The ums_uid_ header of row {@code row} of the event {@code id}: the id, then the row in six digits. */
    static byte[] uid(byte[] id, int row, Out w) {
        w.reset();
        w.put(id);
        w.pad(row, 6);
        return w.toBytes();
    }

    /** A record's headers and one more (a key change's other key). */
    static List<Object[]> with(List<Object[]> headers, String name, byte[] value) {
        List<Object[]> out = new ArrayList<>(headers);
        out.add(new Object[] {name, value});
        return out;
    }

    /** The JSON object {@code {"a":1,"b":2}} of names (JSON strings) and their values (JSON texts), in order. */
    static void object(byte[][] names, byte[][] values, Out w) {
        w.put('{');
        for (int c = 0; c < names.length; c++) {
            if (c > 0) w.put(',');
            w.put(names[c]);
            w.put(':');
            w.put(values[c]);
        }
        w.put('}');
    }
}
