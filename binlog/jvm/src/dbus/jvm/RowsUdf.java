package dbus.jvm;

import org.apache.spark.sql.api.java.UDF1;

/**
 * Spark SQL UDF {@code dbus_rows(value BINARY) -> BINARY}: the UMS JSON lines of a raw rows record's images
 * (see {@link RowsDecoder}), or null when the record is left to the Python decoder. Register with
 * {@code spark.udf.registerJavaFunction("dbus_rows", "dbus.jvm.RowsUdf", BinaryType())}.
 */
public final class RowsUdf implements UDF1<byte[], byte[]> {
    private static final long serialVersionUID = 1L;
    private static final ThreadLocal<RowsDecoder> DECODER = ThreadLocal.withInitial(RowsDecoder::new);

    public RowsUdf() {}

    @Override
    public byte[] call(byte[] value) {
        if (value == null) return null;
        try {
            return DECODER.get().decode(value);
        } catch (Throwable t) { // never fail the task: Python decodes (and dead-letters) what we cannot
            return null;
        }
    }
}
