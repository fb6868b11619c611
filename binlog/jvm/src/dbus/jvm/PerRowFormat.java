package dbus.jvm;

import java.util.ArrayList;
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
