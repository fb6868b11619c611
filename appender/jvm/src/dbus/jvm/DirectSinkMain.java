package dbus.jvm;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * A driver of {@link DirectSink} for tests (tests/integration/test_appender_direct_sink.py): {@code DirectSinkMain
 * <topic> <sizes> <option=value>...} sends, for each of the comma-separated sizes, one record of that many bytes
 * (key: its index) and flushes, printing {@code ok <i>} or {@code failed <i> <message>} per record, as one task
 * of the appender would meet them.
 */
public final class DirectSinkMain {
    private DirectSinkMain() {}

    public static void main(String[] args) {
        String topic = args[0];
        List<String> options = new ArrayList<>();
        for (String kv : Arrays.copyOfRange(args, 2, args.length)) {
            int eq = kv.indexOf('=');
            options.add(kv.substring(0, eq));
            options.add(kv.substring(eq + 1));
        }
        String[] sizes = args[1].split(",");
        for (int i = 0; i < sizes.length; i++) {
            byte[] value = new byte[Integer.parseInt(sizes[i])];
            Arrays.fill(value, (byte) 'x');
            Header[] headers = {new RecordHeader("ums_uid_", Integer.toString(i).getBytes(StandardCharsets.UTF_8))};
            try {
                String[] o = options.toArray(new String[0]);
                DirectSink sink = DirectSink.of(DirectSink.key(o), o);
                sink.send(topic, Integer.toString(i).getBytes(StandardCharsets.UTF_8), value, headers);
                sink.flush();
                System.out.println("ok " + i);
            } catch (RuntimeException e) {
                System.out.println("failed " + i + " " + e.getMessage());
            }
        }
        System.out.flush();
        System.exit(0);
    }
}
