package dbus.jvm;

import org.apache.spark.sql.api.java.UDF1;

/**
 * Spark SQL UDF {@code dbus_rows_avro(value BINARY) -> BINARY}: {@code dbus_rows}' lines, then a NUL and their
 * Avro section ({@link AvroRows}) for sources whose UMS format is Avro (see {@link RowsDecoder#decodeWithAvro});
 * null when the record is left to the Python decoder.
 */
public final class RowsAvroUdf implements UDF1<byte[], byte[]> {
    private static final long serialVersionUID = 1L;
    private static final ThreadLocal<RowsDecoder> DECODER = ThreadLocal.withInitial(RowsDecoder::new);

    public RowsAvroUdf() {}

    @Override
    public byte[] call(byte[] value) {
        if (value == null) return null;
        try {
            return DECODER.get().decodeWithAvro(value);
        } catch (Throwable t) { // never fail the task: Python decodes (and dead-letters) what we cannot
            return null;
        }
    }
}
