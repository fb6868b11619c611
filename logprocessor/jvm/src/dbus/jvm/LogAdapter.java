package dbus.jvm;

import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.DateTimeException;
import java.time.LocalDateTime;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;

/**
 * The shipper record adapters in the JVM: a port of logprocessor/adapters.py (the reference, with
 * logprocessor/sparkjson.py for how Spark's {@code from_json} reads a record), for {@link LogRecordUdf}. A record
 * gives its lines, host (the namespace segment, dots as {@code _}), event time and heartbeat, or a record error with
 * its code and a message naming partition and offset. Nothing here throws on a record's content.
 *
 * <p>JSON is read by Jackson's streaming parser with its default limits (what Spark's {@code from_json} uses):
 * the first value of the text, what follows it ignored; an object keeps every pair in order, a field read as the
 * last pair of its name. Numbers are kept as written.
 */
final class LogAdapter implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    static final String TOO_LARGE = "LOG_RECORD_TOO_LARGE";
    static final String NOT_UTF8 = "LOG_RECORD_NOT_UTF8";
    static final String NOT_JSON = "LOG_RECORD_NOT_JSON";
    static final String NO_MESSAGE = "LOG_RECORD_NO_MESSAGE";
    static final String NO_HOST = "LOG_RECORD_NO_HOST";
    static final String BAD_UMS = "LOG_RECORD_BAD_UMS";
    static final String BAD_HEARTBEAT = "LOG_RECORD_BAD_HEARTBEAT";
    static final String UMS_HEARTBEAT_MARK = "data_increment_heartbeat";

    static final int MAX_OFFSET_MINUTES = 18 * 60;
    static final long MAX_EVENT_MS = 253_370_764_799_999L;
    static final Pattern KEY_MS = Pattern.compile("[0-9]{1,15}");
    static final String[] NO_LINES = new String[0];

    final String logType;
    final String heartbeatType;
    final long maxRecordBytes;
    final String jsonHost;
    final String timezone;
    final java.util.Set<String> heartbeatFiles; // log_rsyslog: the paths a heartbeat comes from; null: any
    private transient ZoneId zone;

    LogAdapter(String logType, String heartbeatType, long maxRecordBytes, String jsonHost, String timezone) {
        this(logType, heartbeatType, maxRecordBytes, jsonHost, timezone, null);
    }

    /** {@code heartbeatFiles}: adapters.AdapterSettings.heartbeat_files (null: a heartbeat from any path). */
    LogAdapter(String logType, String heartbeatType, long maxRecordBytes, String jsonHost, String timezone,
            java.util.Set<String> heartbeatFiles) {
        this.heartbeatFiles = heartbeatFiles;
        this.logType = logType;
        this.heartbeatType = heartbeatType;
        this.maxRecordBytes = maxRecordBytes;
        this.jsonHost = jsonHost;
        this.timezone = timezone;
        zone();
        switch (logType) {
            case "log_rsyslog", "log_logstash", "log_logstash_json", "log_filebeat", "log_flume", "log_json", "log_ums" -> { }
            default -> throw new IllegalArgumentException("LogAdapter: unknown log type " + logType);
        }
    }

    ZoneId zone() {
        ZoneId z = zone;
        if (z == null) zone = z = ZoneId.of(timezone);
        return z;
    }

    /** A record read (adapters.Adapted), or refused ({@code code} set: adapters.RecordError). */
    static final class Adapted {
        String[] lines = NO_LINES;
        String host;
        long eventMs;
        boolean kafkaTime;
        boolean heartbeat;
        long heartbeatMs;
        String code;
        String message;
        Obj record; // the record's object when its one line is the record's text (lines[0] == text), else null
        String text;
    }

    // ---------------------------------------------------------------- the record

    Adapted adapt(byte[] value, byte[] key, int partition, long offset, long timestampMs) {
        Adapted a = new Adapted();
        long size = value == null ? 0 : value.length;
        if (size > maxRecordBytes)
            return fail(a, partition, offset, TOO_LARGE, size + " bytes, over processor.max_line_bytes (" + maxRecordBytes + ")");
        long kafkaMs = Math.min(Math.max(timestampMs, 0), MAX_EVENT_MS);
        if (logType.equals("log_ums")) {
            String k = utf8(key);
            if (k != null && k.contains(UMS_HEARTBEAT_MARK)) return umsHeartbeat(a, k, partition, offset);
        }
        if (size == 0) return fail(a, partition, offset, NOT_JSON, "no value (null or empty)");
        String text = utf8(value);
        if (text == null) return fail(a, partition, offset, NOT_UTF8, "not UTF-8");
        Obj obj = readObject(text);
        if (obj == null) return fail(a, partition, offset, NOT_JSON, "not a JSON object");
        a.record = obj;
        a.text = text;
        return switch (logType) {
            case "log_rsyslog" -> rsyslog(a, obj, text, partition, offset, kafkaMs);
            case "log_logstash", "log_logstash_json" -> logstash(a, obj, text, partition, offset, kafkaMs);
            case "log_filebeat" -> filebeat(a, obj, partition, offset, kafkaMs);
            case "log_flume" -> flume(a, obj, text, key, partition, offset, kafkaMs);
            case "log_json" -> json(a, obj, text, partition, offset, kafkaMs);
            default -> ums(a, obj, partition, offset, kafkaMs);
        };
    }

    private static Adapted fail(Adapted a, int partition, long offset, String code, String what) {
        a.code = code;
        a.message = "record at partition " + partition + ", offset " + offset + ": " + what;
        a.lines = NO_LINES;
        a.host = null;
        return a;
    }

    private static Adapted ok(Adapted a, String[] lines, String host, long event, boolean kafka) {
        a.lines = lines;
        a.host = host.replace('.', '_');
        a.eventMs = event;
        a.kafkaTime = kafka;
        return a;
    }

    private static Adapted beat(Adapted a, String host, long event, boolean kafka, long own) {
        ok(a, NO_LINES, host, event, kafka);
        a.heartbeat = true;
        a.heartbeatMs = own;
        return a;
    }

    private Adapted rsyslog(Adapted a, Obj obj, String text, int p, long o, long kafkaMs) {
        String message = textOf(obj.get("message"));
        if (message == null) return fail(a, p, o, NO_MESSAGE, "no \"message\"");
        String host = textOf(obj.get("host"));
        if (host == null || host.isEmpty()) return fail(a, p, o, NO_HOST, "no \"host\"");
        long t = parseTime(textOf(obj.get("timestamp")));
        long event = t < 0 ? kafkaMs : t;
        Obj beat = message.contains(heartbeatType) ? readObject(message) : null;
        boolean fromFile = heartbeatFiles == null || heartbeatFiles.contains(textOf(obj.get("path")));
        if (beat != null && heartbeatType.equals(textOf(beat.get("type"))) && fromFile) {
            long own = parseTime(textOf(beat.get("@timestamp")));
            return beat(a, host, event, t < 0, own < 0 ? event : own);
        }
        return ok(a, new String[] {text}, host, event, t < 0);
    }

    private Adapted logstash(Adapted a, Obj obj, String text, int p, long o, long kafkaMs) {
        String host = textOf(obj.get("host"));
        if (host == null || host.isEmpty()) return fail(a, p, o, NO_HOST, "no \"host\"");
        long t = parseTime(textOf(obj.get("@timestamp")));
        long event = t < 0 ? kafkaMs : t;
        if (heartbeatType.equals(textOf(obj.get("type")))) return beat(a, host, event, t < 0, event);
        return ok(a, new String[] {text}, host, event, t < 0);
    }

    private Adapted filebeat(Adapted a, Obj obj, int p, long o, long kafkaMs) {
        List<String> keys = new ArrayList<>();
        List<Object> values = new ArrayList<>();
        for (int i = 0; i < obj.size; i++) {
            Object v = obj.values[i];
            if (v instanceof Obj inner) {
                for (int j = 0; j < inner.size; j++) {
                    keys.add(obj.keys[i] + "." + inner.keys[j]);
                    values.add(inner.values[j]);
                }
            } else {
                keys.add(obj.keys[i]);
                values.add(v);
            }
        }
        String host = found(keys, values, "beat.hostname");
        if (host == null || host.isEmpty()) host = found(keys, values, "host.name");
        if (host == null || host.isEmpty()) return fail(a, p, o, NO_HOST, "no \"beat.hostname\" (nor \"host.name\")");
        long t = parseTime(found(keys, values, "@timestamp"));
        long event = t < 0 ? kafkaMs : t;
        String type = found(keys, values, "type");
        if (type != null && type.contains(heartbeatType)) {
            String message = found(keys, values, "message");
            Obj beat = message != null ? readObject(message) : null;
            long own = beat != null ? parseTime(textOf(beat.get("@timestamp"))) : -1;
            return beat(a, host, event, t < 0, own < 0 ? event : own);
        }
        StringBuilder b = new StringBuilder(256).append('{');
        for (int i = 0; i < keys.size(); i++) {
            if (i > 0) b.append(',');
            quote(b, keys.get(i));
            b.append(':');
            render(b, values.get(i), true, true);
        }
        return ok(a, new String[] {b.append('}').toString()}, host, event, t < 0);
    }

    /** The exact text of the last entry named {@code key}, as a dict built from the entries keeps it. */
    private static String found(List<String> keys, List<Object> values, String key) {
        for (int i = keys.size() - 1; i >= 0; i--) if (keys.get(i).equals(key)) return exactText(values.get(i));
        return null;
    }

    private Adapted flume(Adapted a, Obj obj, String text, byte[] rawKey, int p, long o, long kafkaMs) {
        String host = textOf(obj.get("host"));
        if (host == null || host.isEmpty()) return fail(a, p, o, NO_HOST, "no \"host\"");
        String key = utf8(rawKey);
        long keyMs = key != null && KEY_MS.matcher(key).matches() ? Long.parseLong(key) : -1;
        boolean kafka = keyMs < 0 || keyMs > MAX_EVENT_MS;
        long event = kafka ? kafkaMs : keyMs;
        String type = textOf(obj.get("type"));
        if (type != null && type.contains(heartbeatType)) {
            long own = parseTime(textOf(obj.get("@timestamp")));
            return beat(a, host, event, kafka, own < 0 ? event : own);
        }
        String line = text;
        if (key != null) {
            int s = 0;
            while (s < text.length() && " \t\n\r".indexOf(text.charAt(s)) >= 0) s++;
            StringBuilder b = new StringBuilder(text.length() + key.length() + 16).append("{\"timestamp\":");
            quote(b, key);
            line = b.append(',').append(text, s + 1, text.length()).toString();
        }
        return ok(a, new String[] {line}, host, event, kafka);
    }

    private Adapted json(Adapted a, Obj obj, String text, int p, long o, long kafkaMs) {
        if (jsonHost == null || jsonHost.isEmpty())
            return fail(a, p, o, NO_HOST, "no host: a log_json source needs its host in the configuration");
        String type = textOf(obj.get("type"));
        if (type != null && type.contains(heartbeatType)) {
            long own = parseTime(textOf(obj.get("@timestamp")));
            return beat(a, jsonHost, kafkaMs, true, own < 0 ? kafkaMs : own);
        }
        return ok(a, new String[] {text}, jsonHost, kafkaMs, true);
    }

    private Adapted ums(Adapted a, Obj obj, int p, long o, long kafkaMs) {
        Object s = obj.get("schema");
        Obj schema = s instanceof Obj so ? so : new Obj();
        Object nsValue = schema.get("namespace");
        if (!(nsValue instanceof String ns0) || ns0.split("\\.", -1).length != 7)
            return fail(a, p, o, BAD_UMS, "not a UMS message: schema.namespace is not a 7-part string");
        Object fields = schema.get("fields");
        List<String> names = new ArrayList<>();
        boolean namesOk = fields instanceof List;
        if (namesOk) {
            for (Object f : (List<?>) fields) {
                Object n = f instanceof Obj fo ? fo.get("name") : null;
                if (!(n instanceof String)) {
                    namesOk = false;
                    break;
                }
                names.add((String) n);
            }
        }
        if (!namesOk) return fail(a, p, o, BAD_UMS, "not a UMS message: schema.fields is not a list of fields with a name");
        Object payload = obj.get("payload");
        List<List<?>> tuples = new ArrayList<>();
        boolean tuplesOk = payload instanceof List;
        if (tuplesOk) {
            for (Object t : (List<?>) payload) {
                Object v = t instanceof Obj to ? to.get("tuple") : null;
                if (!(v instanceof List)) {
                    tuplesOk = false;
                    break;
                }
                tuples.add((List<?>) v);
            }
        }
        if (!tuplesOk) return fail(a, p, o, BAD_UMS, "not a UMS message: payload is not a list of tuples");
        for (List<?> t : tuples)
            if (t.size() != names.size())
                return fail(a, p, o, BAD_UMS, "not a UMS message: a tuple's length differs from the fields'");
        String namespace = unsurrogate(ns0);
        String[] parts = namespace.split("\\.", -1);
        String host = parts[1] + "_" + parts[2] + "_" + parts[3] + "_" + parts[5];
        String[] lines = new String[tuples.size()];
        for (int k = 0; k < lines.length; k++) {
            List<?> values = tuples.get(k);
            StringBuilder b = new StringBuilder(256).append('{');
            for (int i = 0; i < names.size(); i++) {
                if (names.get(i).equals("namespace")) continue;
                quote(b, names.get(i));
                b.append(':');
                render(b, values.get(i), true, true);
                b.append(',');
            }
            b.append("\"namespace\":");
            quote(b, namespace);
            lines[k] = b.append('}').toString();
        }
        int at = names.indexOf("ums_ts_");
        Object first = !tuples.isEmpty() && at >= 0 ? tuples.get(0).get(at) : null;
        long t = parseTime(first instanceof String fs ? fs : null);
        return ok(a, lines, host, t < 0 ? kafkaMs : t, t < 0);
    }

    private static Adapted umsHeartbeat(Adapted a, String key, int p, long o) {
        String[] parts = key.split("\\.", -1);
        String[] times = parts.length == 10 ? parts[8].split("\\|", -1) : new String[0];
        if (times.length < 2 || !KEY_MS.matcher(times[1]).matches() || Long.parseLong(times[1]) > MAX_EVENT_MS) {
            String shape = "data_increment_heartbeat.<namespace>.<time>|<txTime>|...wh_placeholder";
            return fail(a, p, o, BAD_HEARTBEAT, "a heartbeat key not of the form " + shape);
        }
        long ms = Long.parseLong(times[1]);
        String host = parts[2] + "_" + parts[3] + "_" + parts[4] + "_" + parts[6];
        return beat(a, host, ms, false, ms);
    }

    // ---------------------------------------------------------------- times

    /**
     * adapters.parse_time: epoch ms, or -1 when unreadable or outside 1970-01-01 .. 9998-12-31 (UTC). The whole text
     * must be {@code ([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9])
     * (?:[.,]([0-9]{1,9}))?(Z|z|[+-](?:[01][0-9]|2[0-3]):?[0-5][0-9])?}, read character by character (as a regex
     * it was 8% of the processor's time).
     */
    long parseTime(String s) {
        if (s == null || s.length() < 19) return -1;
        int n = s.length();
        int y = digits(s, 0, 4), mo = digits(s, 5, 2), d = digits(s, 8, 2);
        int h = digits(s, 11, 2), mi = digits(s, 14, 2), se = digits(s, 17, 2);
        char t = s.charAt(10);
        if (y < 0 || mo < 0 || d < 0 || h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 || se > 59) return -1;
        if (s.charAt(4) != '-' || s.charAt(7) != '-' || (t != 'T' && t != ' ') || s.charAt(13) != ':'
            || s.charAt(16) != ':') return -1;
        int i = 19, millis = 0;
        if (i < n && (s.charAt(i) == '.' || s.charAt(i) == ',')) { // [.,][0-9]{1,9}
            int j = i + 1;
            while (j < n && isDigit(s.charAt(j))) j++;
            int len = j - i - 1;
            if (len < 1 || len > 9) return -1;
            for (int k = 0; k < 3; k++) millis = millis * 10 + (k < len ? s.charAt(i + 1 + k) - '0' : 0);
            i = j;
        }
        boolean zoned = false;
        int offset = 0;
        if (i < n) { // Z|z|[+-](?:[01][0-9]|2[0-3]):?[0-5][0-9], then the end
            char c = s.charAt(i);
            if (c == 'Z' || c == 'z') {
                if (i + 1 != n) return -1;
            } else if (c == '+' || c == '-') {
                int oh = digits(s, i + 1, 2);
                int j = i + 3;
                if (j < n && s.charAt(j) == ':') j++;
                int om = digits(s, j, 2);
                if (oh < 0 || oh > 23 || om < 0 || om > 59 || j + 2 != n) return -1;
                offset = c == '-' ? -(oh * 60 + om) : oh * 60 + om;
            } else {
                return -1;
            }
            zoned = true;
        }
        LocalDateTime local;
        try {
            local = LocalDateTime.of(y, mo, d, h, mi, se);
        } catch (DateTimeException e) {
            return -1;
        }
        if (y < 1) return -1; // Python's datetime starts at year 1
        if (Math.abs(offset) > MAX_OFFSET_MINUTES) return -1;
        long seconds = zoned ? local.toEpochSecond(ZoneOffset.UTC) : local.atZone(zone()).toEpochSecond();
        long ms = seconds * 1000 + millis - 60_000L * offset;
        return ms >= 0 && ms <= MAX_EVENT_MS ? ms : -1;
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    /** The {@code len} ASCII digits at {@code at} as a number, or -1. */
    private static int digits(String s, int at, int len) {
        if (at + len > s.length()) return -1;
        int v = 0;
        for (int i = at; i < at + len; i++) {
            char c = s.charAt(i);
            if (!isDigit(c)) return -1;
            v = v * 10 + (c - '0');
        }
        return v;
    }

    // ---------------------------------------------------------------- text

    private static final ThreadLocal<CharsetDecoder> DECODER = ThreadLocal.withInitial(() -> StandardCharsets.UTF_8
        .newDecoder().onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT));

    /** Strict UTF-8, or null when the bytes are not UTF-8 (or null). */
    static String utf8(byte[] data) {
        if (data == null) return null;
        String s = new String(data, StandardCharsets.UTF_8);
        if (s.indexOf('\uFFFD') < 0) return s;
        try {
            return DECODER.get().decode(ByteBuffer.wrap(data)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }

    /** An unpaired surrogate as {@code ?} (what Java's UTF-8 encoder writes for it, and Python's "replace"). */
    static String unsurrogate(String s) {
        int n = s.length();
        int i = 0;
        while (i < n && !Character.isSurrogate(s.charAt(i))) i++;
        if (i == n) return s;
        StringBuilder b = new StringBuilder(n).append(s, 0, i);
        for (; i < n; i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1))) {
                b.append(c).append(s.charAt(++i));
            } else b.append(Character.isSurrogate(c) ? '?' : c);
        }
        return b.toString();
    }

    private static final char[] HEX = "0123456789ABCDEF".toCharArray();

    /** sparkjson.quote: a JSON string as Jackson writes it (upper-case hex), unpaired surrogates as {@code ?}. */
    static void quote(StringBuilder b, String text) {
        quoteRaw(b, unsurrogate(text), false);
    }

    /** A JSON string as Jackson writes it, the text as it is (Spark's {@code to_json} of a string). */
    static void quoteRaw(StringBuilder b, String s) {
        quoteRaw(b, s, false);
    }

    private static void quoteRaw(StringBuilder b, String s, boolean escapeSurrogates) {
        b.append('"');
        for (int i = 0, n = s.length(); i < n; i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\b' -> b.append("\\b");
                case '\t' -> b.append("\\t");
                case '\n' -> b.append("\\n");
                case '\f' -> b.append("\\f");
                case '\r' -> b.append("\\r");
                default -> {
                    if (c < 0x20 || (escapeSurrogates && Character.isSurrogate(c))) {
                        b.append("\\u").append(HEX[c >> 12]).append(HEX[(c >> 8) & 15]).append(HEX[(c >> 4) & 15])
                            .append(HEX[c & 15]);
                    } else b.append(c);
                }
            }
        }
        b.append('"');
    }

    /** sparkjson.text_of: a field read as STRING. */
    static String textOf(Object v) {
        if (v == null) return null;
        if (v instanceof String s) return unsurrogate(s);
        StringBuilder b = new StringBuilder();
        render(b, v, true, false);
        return b.toString();
    }

    /** sparkjson.exact_text. */
    static String exactText(Object v) {
        if (v == null) return null;
        if (v instanceof String s) return unsurrogate(s);
        StringBuilder b = new StringBuilder();
        render(b, v, true, true);
        return b.toString();
    }

    /** sparkjson.render (exact: render_exact, numbers as written). */
    static void render(StringBuilder b, Object v, boolean top, boolean exact) {
        if (v == null) b.append("null");
        else if (v instanceof Boolean x) b.append(x ? "true" : "false");
        else if (v instanceof String s) {
            if (top) quote(b, s);
            else quoteRaw(b, s, true);
        } else if (v instanceof Num n) {
            if (exact) b.append(n.text);
            else if (n.integer) b.append(new BigInteger(n.text).toString());
            else {
                double x = Double.parseDouble(n.text);
                if (Double.isInfinite(x)) b.append(x < 0 ? "\"-Infinity\"" : "\"Infinity\"");
                else b.append(Double.toString(x));
            }
        } else if (v instanceof Obj o) {
            b.append('{');
            for (int i = 0; i < o.size; i++) {
                if (i > 0) b.append(',');
                quoteRaw(b, o.keys[i], true);
                b.append(':');
                render(b, o.values[i], false, exact);
            }
            b.append('}');
        } else {
            b.append('[');
            boolean first = true;
            for (Object x : (List<?>) v) {
                if (!first) b.append(',');
                first = false;
                render(b, x, false, exact);
            }
            b.append(']');
        }
    }

    // ---------------------------------------------------------------- JSON

    /** A JSON number as written. */
    static final class Num {
        final String text;
        final boolean integer;

        Num(String text, boolean integer) {
            this.text = text;
            this.integer = integer;
        }
    }

    /** A JSON object: every pair in input order, duplicates kept. */
    static final class Obj {
        String[] keys = new String[4];
        Object[] values = new Object[4];
        int size;
        boolean whole; // read by readObject: nothing but whitespace after it

        void add(String k, Object v) {
            if (size == keys.length) {
                keys = java.util.Arrays.copyOf(keys, size * 2);
                values = java.util.Arrays.copyOf(values, size * 2);
            }
            keys[size] = k;
            values[size++] = v;
        }

        /** The value of the last pair named {@code key}, else null. */
        Object get(String key) {
            for (int i = size - 1; i >= 0; i--) if (keys[i].equals(key)) return values[i];
            return null;
        }
    }

    private static final JsonFactory FACTORY = JsonFactory.builder()
        .disable(JsonFactory.Feature.CANONICALIZE_FIELD_NAMES)
        .disable(JsonFactory.Feature.INTERN_FIELD_NAMES)
        .build();

    /** sparkjson.read_object: the JSON object at the start of {@code text}, or null when there is none. */
    static Obj readObject(String text) {
        int n = text.length(), s = 0;
        while (s < n && " \t\n\r".indexOf(text.charAt(s)) >= 0) s++;
        if (s == n || text.charAt(s) != '{') return null;
        try (JsonParser p = FACTORY.createParser(text)) {
            if (p.nextToken() != JsonToken.START_OBJECT) return null;
            Obj o = (Obj) read(p, JsonToken.START_OBJECT);
            try {
                o.whole = p.nextToken() == null;
            } catch (Exception e) {
                o.whole = false;
            }
            return o;
        } catch (Exception | StackOverflowError e) {
            return null;
        }
    }

    /** logrules.Json's nesting limit: an object nested deeper is read (and refused) by the rules themselves. */
    private static final int RULES_DEPTH = dbus.jvm.logrules.Json.MAX_DEPTH;

    /**
     * What {@code logrules.Json.parseObject} gives for the text {@code o} was read from, when {@code o} was the whole
     * text: the same values (numbers as their text, the last of duplicate keys in the first's place); null when it
     * cannot be told (text after the object, nesting deeper than the rules read).
     */
    static Map<String, Object> asRulesObject(Obj o) {
        if (!o.whole) return null;
        try {
            @SuppressWarnings("unchecked")
            Map<String, Object> m = (Map<String, Object>) asRules(o, 1);
            return m;
        } catch (IllegalStateException deep) {
            return null;
        }
    }

    private static Object asRules(Object v, int depth) {
        if (depth > RULES_DEPTH) throw new IllegalStateException("deep");
        if (v instanceof Obj o) {
            Map<String, Object> m = new java.util.LinkedHashMap<>();
            for (int i = 0; i < o.size; i++) m.put(o.keys[i], asRules(o.values[i], depth + 1));
            return m;
        }
        if (v instanceof List<?> l) {
            List<Object> a = new ArrayList<>(l.size());
            for (Object x : l) a.add(asRules(x, depth + 1));
            return a;
        }
        if (v instanceof Num n) return new dbus.jvm.logrules.Json.Num(n.text);
        return v;
    }

    private static Object read(JsonParser p, JsonToken t) throws java.io.IOException {
        switch (t) {
            case START_OBJECT: {
                Obj o = new Obj();
                while (p.nextToken() == JsonToken.FIELD_NAME) {
                    String k = p.currentName();
                    o.add(k, read(p, p.nextToken()));
                }
                return o;
            }
            case START_ARRAY: {
                List<Object> a = new ArrayList<>();
                while ((t = p.nextToken()) != JsonToken.END_ARRAY) a.add(read(p, t));
                return a;
            }
            case VALUE_STRING: return p.getText();
            case VALUE_NUMBER_INT: return new Num(p.getText(), true);
            case VALUE_NUMBER_FLOAT: return new Num(p.getText(), false);
            case VALUE_TRUE: return Boolean.TRUE;
            case VALUE_FALSE: return Boolean.FALSE;
            case VALUE_NULL: return null;
            default: throw new java.io.IOException("unexpected token " + t);
        }
    }
}
