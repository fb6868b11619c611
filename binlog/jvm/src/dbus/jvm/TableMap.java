package dbus.jvm;

import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A parsed binlog table-map event (with binlog_row_metadata=FULL optional metadata), reduced to what the row
 * reader needs: per column a kind from {@link Col}. Parsed the way python-mysql-replication 1.0.17 parses it
 * (binlog/rows.py); any column this decoder does not reproduce exactly makes the whole map unsupported.
 */
final class TableMap {
    static final int TINY = 1, SHORT = 2, LONG = 3, FLOAT = 4, DOUBLE = 5, LONGLONG = 8, INT24 = 9, DATE = 10,
        YEAR = 13, NEWDATE = 14, VARCHAR = 15, BIT = 16, TIMESTAMP2 = 17, DATETIME2 = 18, TIME2 = 19, JSON = 245,
        NEWDECIMAL = 246, ENUM = 247, SET = 248, BLOB = 252, VAR_STRING = 253, STRING = 254, GEOMETRY = 255;

    /** Column kinds. */
    static final int K_I8 = 1, K_U8 = 2, K_I16 = 3, K_U16 = 4, K_I24 = 5, K_U24 = 6, K_I32 = 7, K_U32 = 8, K_I64 = 9,
        K_U64 = 10, K_DECIMAL = 11, K_DATETIME2 = 12, K_TIMESTAMP2 = 13, K_DATE = 14, K_UTF8 = 15, K_CP1252 = 16,
        K_ASCII = 17, K_BINARY = 18, K_TIME2 = 19, K_YEAR = 20, K_ENUM = 21, K_SET = 22, K_BIT = 23, K_FLOAT = 24, K_DOUBLE = 25,
        K_INET4 = 26, K_INET6 = 27, K_UUID = 28, // MariaDB types stored as BINARY(4)/(16), named by the header
        K_SKIP_FIXED = 90, K_SKIP_PREFIXED = 91; // unsupported, only skipped in lenient (test) mode

    static final class Col {
        int type, kind;
        int fsp;          // DATETIME2/TIMESTAMP2/TIME2
        int lenSize;      // strings: bytes of the length prefix; ENUM/SET: bytes of the value
        int padTo;        // BINARY(n): n
        int maxLength;
        int precision, scale; // DECIMAL
        int[] groupBytes, groupDigits; // DECIMAL groups (non-empty ones)
        int decimalSize;
        int bits, bytes;  // BIT
        boolean unsigned;
        int charset = -1;
        byte[][] members; // ENUM (index 0 = "") / SET: JSON-escaped member text without quotes
        boolean dupMembers;
        boolean nullable; // the table map's nullability bit
    }

    long tableId;
    String schema, table;
    Col[] cols;
    int width;
    String unsupported; // null when every column is supported
    String[] names;

    // ---------------------------------------------------------------- charsets (python-mysql-replication's ids)

    static final int CS_UTF8 = 1, CS_CP1252 = 2, CS_ASCII = 3, CS_BINARY = 4;

    static int charsetClass(int id, boolean mariadb) {
        if (id == 63) return CS_BINARY;
        if (id == 33 || id == 45 || id == 46 || id == 83 || (id >= 192 && id <= 215) || (id >= 223 && id <= 247)) return CS_UTF8;
        if (id == 5 || id == 8 || id == 15 || id == 31 || id == 47 || id == 48 || id == 49 || id == 94) return CS_CP1252;
        if (id == 11 || id == 65) return CS_ASCII;
        if (mariadb) {
            if (id == 576 || id == 577 || id == 578 || id == 608 || id == 609 || id == 610 || id == 1057 || id == 1069
                || id == 1070 || id == 1107 || id == 1216 || id == 1238 || id == 1248 || id == 1270) return CS_UTF8;
            if (id == 1032 || id == 1071) return CS_CP1252;
            if (id == 1035 || id == 1089) return CS_ASCII;
        } else {
            if (id == 76 || (id >= 255 && id <= 323 && id != 272 && id != 276 && id != 295 && id != 299 && id != 301
                && id != 302)) return CS_UTF8;
        }
        return 0; // not handled here (Python may still decode it)
    }

    // ---------------------------------------------------------------- parsing

    private final byte[] d;
    private int p;
    private final int end;

    private TableMap(byte[] d, int start, int end) { this.d = d; this.p = start; this.end = end; }

    private int u8() { if (p >= end) throw new IllegalStateException("table map truncated"); return d[p++] & 0xFF; }

    private long packed() {
        int c = u8();
        if (c < 251) return c;
        int size;
        if (c == 252) size = 2; else if (c == 253) size = 3; else if (c == 254) size = 8;
        else throw new IllegalStateException("bad packed int");
        if (p + size > end) throw new IllegalStateException("table map truncated");
        long v = 0;
        for (int i = size - 1; i >= 0; i--) v = v << 8 | (d[p + i] & 0xFF);
        p += size;
        if (v < 0) throw new IllegalStateException("packed int too large");
        return v;
    }

    private int packedInt() {
        long v = packed();
        if (v > Integer.MAX_VALUE) throw new IllegalStateException("packed int too large");
        return (int) v;
    }

    private byte[] bytes(int n) {
        if (n < 0 || p + n > end) throw new IllegalStateException("table map truncated");
        byte[] b = new byte[n];
        System.arraycopy(d, p, b, 0, n);
        p += n;
        return b;
    }

    private static String strictUtf8(byte[] b) {
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(b)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }

    private static boolean isNumeric(int t) {
        return t == TINY || t == SHORT || t == INT24 || t == LONG || t == LONGLONG || t == NEWDECIMAL || t == FLOAT
            || t == DOUBLE || t == YEAR;
    }

    private static boolean isCharacter(int t, boolean mariadb) {
        return t == STRING || t == VAR_STRING || t == VARCHAR || t == BLOB || (t == GEOMETRY && mariadb);
    }

    /** Parse the whole table-map event data[off, off+len) (19-byte header, body, checksum when crc). */
    static TableMap parse(byte[] data, int off, int len, boolean crc, boolean mariadb) {
        return parse(data, off, len, crc, mariadb, java.util.Collections.emptyMap());
    }

    /**
     * The same, with the header's {@code types} (column name -> column type the binlog cannot tell): a
     * BINARY(4) named "inet4", or a BINARY(16) named "inet6" or "uuid", is read as that type's text
     * (binlog/rows.py's _text_type); other entries change nothing.
     */
    static TableMap parse(byte[] data, int off, int len, boolean crc, boolean mariadb, Map<String, String> types) {
        TableMap m = new TableMap(data, off + 19, off + len - (crc ? 4 : 0));
        m.doParse(mariadb);
        if (!types.isEmpty()) m.applyTypes(types);
        return m;
    }

    private void applyTypes(Map<String, String> types) {
        for (int i = 0; i < cols.length; i++) {
            Col c = cols[i];
            String t = types.get(names[i]);
            if (t == null || c.type != STRING || c.kind != K_BINARY) continue;
            if (t.equals("inet4") && c.maxLength == 4) c.kind = K_INET4;
            else if (t.equals("inet6") && c.maxLength == 16) c.kind = K_INET6;
            else if (t.equals("uuid") && c.maxLength == 16) c.kind = K_UUID;
        }
    }

    private void doParse(boolean mariadb) {
        long id = 0;
        for (int i = 5; i >= 0; i--) id = id << 8 | (d[p + i] & 0xFF);
        p += 8; // table id, flags
        tableId = id;
        schema = strictUtf8(bytes(u8()));
        p++;
        table = strictUtf8(bytes(u8()));
        p++;
        if (schema == null || table == null) throw new IllegalStateException("names are not UTF-8");
        int n = packedInt();
        width = n;
        cols = new Col[n];
        byte[] types = bytes(n);
        int metaLen = packedInt();
        int metaStart = p;
        for (int i = 0; i < n; i++) {
            Col c = new Col();
            c.type = types[i] & 0xFF;
            switch (c.type) {
                case VARCHAR: c.maxLength = u8() | u8() << 8; break;
                case DOUBLE: case FLOAT: u8(); break;
                case TIMESTAMP2: case DATETIME2: case TIME2: c.fsp = u8(); break;
                case VAR_STRING: case STRING: {
                    int meta = u8() << 8;
                    meta += u8();
                    int real = meta >> 8;
                    if (real == SET || real == ENUM) { c.type = real; c.lenSize = meta & 0xFF; }
                    else c.maxLength = (((meta >> 4) & 0x300) ^ 0x300) + (meta & 0xFF);
                    break;
                }
                case BLOB: case GEOMETRY: case JSON: c.lenSize = u8(); break;
                case NEWDECIMAL: c.precision = u8(); c.scale = u8(); break;
                case BIT: { int bits = u8(); int bytes = u8(); c.bits = bytes * 8 + bits; c.bytes = (c.bits + 7) / 8; break; }
                default: break;
            }
            cols[i] = c;
        }
        if (p - metaStart != metaLen) throw new IllegalStateException("column metadata length mismatch");
        if (p + (n + 7) / 8 > end) throw new IllegalStateException("table map truncated");
        for (int i = 0; i < n; i++) cols[i].nullable = (d[p + (i >> 3)] >> (i & 7) & 1) != 0;
        p += (n + 7) / 8; // nullability
        // optional metadata (TLV)
        boolean[] unsigned = null;
        int[] charsets = null, enumSetCharsets = null;
        List<byte[][]> setValues = null, enumValues = null;
        int names = -1;
        List<Long> pkSimple = null, pkPrefix = null;
        while (p < end) {
            int type = u8();
            int length = packedInt();
            int until = p + length;
            if (until > end) throw new IllegalStateException("metadata passes the end");
            switch (type) {
                case 1: { // signedness, one bit per numeric column, MSB first
                    unsigned = new boolean[n];
                    int bit = 0, at = p, by = 0;
                    for (int i = 0; i < n; i++) {
                        if (!isNumeric(cols[i].type)) continue;
                        if (bit == 0) { if (at >= until) throw new IllegalStateException("signedness short"); by = d[at++] & 0xFF; }
                        unsigned[i] = (by & (0x80 >> bit)) != 0;
                        bit = (bit + 1) % 8;
                    }
                    p = until;
                    break;
                }
                case 2: charsets = defaultCharsets(until, mariadb, false); break;
                case 3: charsets = columnCharsets(until, mariadb, false); break;
                case 4: { // column names: Python decodes each as strict UTF-8
                    names = 0;
                    List<String> list = new ArrayList<>();
                    while (p < until) {
                        byte[] name = bytes(varLen());
                        if (!RowsDecoder.validUtf8(name, 0, name.length)) throw new IllegalStateException("column name");
                        list.add(new String(name, StandardCharsets.UTF_8));
                        names++;
                    }
                    this.names = list.toArray(new String[0]);
                    break;
                }
                case 5: setValues = typeValues(until); break;
                case 6: enumValues = typeValues(until); break;
                case 7: while (p < until) packed(); break;
                case 8: { // simple primary key: column indexes (Python names them: each must exist)
                    pkSimple = new ArrayList<>();
                    while (p < until) pkSimple.add(packed());
                    break;
                }
                case 9: { // primary key with prefix: (column index, prefix length) pairs
                    pkPrefix = new ArrayList<>();
                    int k = 0;
                    while (p < until) { long x = packed(); if (k++ % 2 == 0) pkPrefix.add(x); }
                    if (k % 2 != 0) throw new IllegalStateException("pk");
                    break;
                }
                case 10: enumSetCharsets = defaultCharsets(until, mariadb, true); break;
                case 11: enumSetCharsets = columnCharsets(until, mariadb, true); break;
                case 12: if (length < (n + 7) / 8) throw new IllegalStateException("visibility short"); p = until; break;
                default: throw new IllegalStateException("unknown optional metadata " + type);
            }
            if (p != until) throw new IllegalStateException("optional metadata length mismatch");
        }
        if (names != n) throw new IllegalStateException("table map carries no column names");
        // rowdecode takes the simple key if non-empty, else the prefixed one, and names each column
        List<Long> pk = pkSimple != null && !pkSimple.isEmpty() ? pkSimple : pkPrefix;
        if (pk != null) for (long i : pk) if (i >= n) throw new IllegalStateException("primary key column " + i);
        int cpos = 0, epos = 0, enumPos = 0, setPos = 0;
        for (int i = 0; i < n; i++) {
            Col c = cols[i];
            if (isCharacter(c.type, mariadb)) c.charset = charsets[cpos++];
            if (c.type == ENUM || c.type == SET) {
                c.charset = enumSetCharsets[epos++];
                if (c.type == ENUM) {
                    byte[][] vals = enumValues.get(enumPos++);
                    c.members = new byte[vals.length + 1][];
                    c.members[0] = new byte[0];
                    System.arraycopy(vals, 0, c.members, 1, vals.length);
                } else {
                    c.members = setValues.get(setPos++);
                }
            }
            if (unsigned != null && unsigned[i]) c.unsigned = true;
        }
        if (n < 1) throw new IllegalStateException("no columns");
        for (Col c : cols) {
            String why = classify(c, mariadb);
            if (why != null) skippable(c);
            if (why != null && unsupported == null) unsupported = why;
        }
    }

    private int varLen() {
        int b = 0x80, length = 0, shift = 0;
        while ((b & 0x80) != 0) {
            b = u8();
            length |= (b & 0x7F) << shift;
            shift += 7;
            if (shift > 28) throw new IllegalStateException("length too long");
        }
        return length;
    }

    private int[] defaultCharsets(int until, boolean mariadb, boolean enumSet) {
        int def = packedInt();
        Map<Integer, Integer> byPos = new HashMap<>();
        while (p < until) { int col = packedInt(); byPos.put(col, packedInt()); }
        List<Integer> out = new ArrayList<>();
        int pos = 0;
        for (Col c : cols) {
            boolean hit = enumSet ? (c.type == ENUM || c.type == SET) : isCharacter(c.type, mariadb);
            if (!hit) continue;
            out.add(byPos.getOrDefault(pos, def));
            pos++;
        }
        return out.stream().mapToInt(Integer::intValue).toArray();
    }

    private int[] columnCharsets(int until, boolean mariadb, boolean enumSet) {
        List<Integer> ids = new ArrayList<>();
        while (p < until) ids.add(packedInt());
        List<Integer> out = new ArrayList<>();
        int pos = 0;
        for (Col c : cols) {
            boolean hit = enumSet ? (c.type == ENUM || c.type == SET) : isCharacter(c.type, mariadb);
            if (!hit) continue;
            out.add(ids.get(pos++));
        }
        return out.stream().mapToInt(Integer::intValue).toArray();
    }

    /** ENUM/SET member lists; members as JSON-escaped UTF-8 (Python decodes them, '' when not UTF-8). */
    private List<byte[][]> typeValues(int until) {
        List<byte[][]> result = new ArrayList<>();
        while (p < until) {
            int count = packedInt();
            byte[][] vals = new byte[count][];
            for (int i = 0; i < count; i++) {
                byte[] raw = bytes(varLen());
                Out o = new Out();
                if (!o.utf8String(raw, 0, raw.length)) { vals[i] = new byte[0]; continue; }
                byte[] q = o.toBytes();
                vals[i] = java.util.Arrays.copyOfRange(q, 1, q.length - 1);
            }
            result.add(vals);
        }
        return result;
    }

    /** For lenient (test) mode: how to step over a column this decoder does not support. */
    private static void skippable(Col c) {
        switch (c.type) {
            case DOUBLE: c.kind = K_SKIP_FIXED; c.padTo = 8; break;
            case JSON: case GEOMETRY: case BLOB: c.kind = K_SKIP_PREFIXED; break;
            case VARCHAR: case VAR_STRING: case STRING: c.kind = K_SKIP_PREFIXED; break;
            default: c.kind = 0;
        }
    }

    private static final int[] DIG2BYTES = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};

    /** Sets c.kind; returns why the column is not supported, or null. */
    private static String classify(Col c, boolean mariadb) {
        boolean u = c.unsigned;
        switch (c.type) {
            case TINY: c.kind = u ? K_U8 : K_I8; return null;
            case SHORT: c.kind = u ? K_U16 : K_I16; return null;
            case INT24: c.kind = u ? K_U24 : K_I24; return null;
            case LONG: c.kind = u ? K_U32 : K_I32; return null;
            case LONGLONG: c.kind = u ? K_U64 : K_I64; return null;
            case YEAR: c.kind = K_YEAR; return null;
            case FLOAT: c.kind = K_FLOAT; return null;
            case DOUBLE: c.kind = K_DOUBLE; return null;
            case NEWDECIMAL: {
                int whole = c.precision - c.scale, scale = c.scale;
                if (c.precision < 1 || c.precision > 65 || scale < 0 || scale > 30 || whole < 0) return "decimal metadata";
                List<int[]> g = new ArrayList<>();
                g.add(new int[] {DIG2BYTES[whole % 9], whole % 9});
                for (int i = 0; i < whole / 9; i++) g.add(new int[] {4, 9});
                for (int i = 0; i < scale / 9; i++) g.add(new int[] {4, 9});
                g.add(new int[] {DIG2BYTES[scale % 9], scale % 9});
                g.removeIf(x -> x[0] == 0);
                c.groupBytes = new int[g.size()];
                c.groupDigits = new int[g.size()];
                for (int i = 0; i < g.size(); i++) { c.groupBytes[i] = g.get(i)[0]; c.groupDigits[i] = g.get(i)[1]; c.decimalSize += g.get(i)[0]; }
                c.kind = K_DECIMAL;
                return null;
            }
            case DATETIME2: if (c.fsp > 6) return "fsp"; c.kind = K_DATETIME2; return null;
            case TIMESTAMP2: if (c.fsp > 6) return "fsp"; c.kind = K_TIMESTAMP2; return null;
            case TIME2: if (c.fsp > 6) return "fsp"; c.kind = K_TIME2; return null;
            case DATE: case NEWDATE: c.kind = K_DATE; return null;
            case BIT: if (c.bits < 1 || c.bits > 64) return "bit width"; c.kind = K_BIT; return null;
            case ENUM:
                if (c.lenSize != 1 && c.lenSize != 2) return "enum size";
                c.kind = K_ENUM;
                return null;
            case SET: {
                if (c.lenSize < 1 || c.lenSize > 8) return "set size";
                if (c.members.length > 64) return "set members";
                for (int i = 0; i < c.members.length; i++)
                    for (int j = 0; j < i; j++)
                        if (java.util.Arrays.equals(c.members[i], c.members[j])) return "duplicate set members";
                c.kind = K_SET;
                return null;
            }
            case VARCHAR: case VAR_STRING: case STRING: case BLOB: {
                if (c.type == BLOB) { if (c.lenSize < 1 || c.lenSize > 4) return "blob length size"; }
                else c.lenSize = c.maxLength > 255 ? 2 : 1;
                int cs = charsetClass(c.charset, mariadb);
                switch (cs) {
                    case CS_BINARY: c.kind = K_BINARY; c.padTo = c.type == STRING ? c.maxLength : 0; return null;
                    case CS_UTF8: c.kind = K_UTF8; return null;
                    case CS_CP1252: c.kind = K_CP1252; return null;
                    case CS_ASCII: c.kind = K_ASCII; return null;
                    default: return "charset id " + c.charset;
                }
            }
            default: return "column type " + c.type;
        }
    }
}
