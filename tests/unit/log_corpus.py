"""The corpus of log records the JVM projection (test_record_jvm) and the Python oracle (log_oracle.py)
are compared on, per log type: the golden records of the spec, then seeded random records:
JSON objects written with random spacing and escapes (control characters, unpaired surrogate escapes, the
markers \\u0001 and \\u0002 themselves, emoji), numbers in every JSON form, nested objects and arrays, keys
given twice, leading whitespace and trailing text, the fields each type reads present, missing, null or of
another kind, times valid and not; and mutations of them (truncated, a byte flipped, invalid UTF-8, a byte
order mark)."""

from __future__ import annotations

import random

from logprocessor.adapters import KafkaRecord

SEED = 16
PER_TYPE = 260

# ---------------------------------------------------------------- the corpus

STRINGS = [
    "",
    "plain",
    "app-01.prod",
    'q"uote',
    "back\\slash",
    "tab\tnl\ncr\r",
    "ctl\x00\x01\x02\x0b\x1a\x1f",
    "é ü 漢字 😀",
    "\u2028\u2029\x7f",
    "{}",
    '{"type":"dbus-heartbeat","@timestamp":"2024-03-05T02:15:31.000Z"}',
    "[1,2]",
    "12.50",
    "null",
    "%2E.%",
    "dbus-heartbeat",
    "x dbus-heartbeat y",
]
HEARTBEAT_FILE = "/var/log/hb.log"  # log_rsyslog: the heartbeat file of a source that names one
TIMES = [
    "2024-03-05T02:15:30.123Z",
    "2024-03-05T10:15:30.123456+08:00",
    "2024-03-05 10:15:30.1",
    "2024-03-05T10:15:30,123456789-0130",
    "2024-03-31T02:30:00",
    "2024-02-30T00:00:00Z",
    "2024-03-05T24:00:00Z",
    "1969-12-31T23:59:59Z",
    "9999-12-31T23:59:59+14:00",
    "2024-03-05T02:15:30.123Z\n",
    "yesterday",
    "1709604930123",
    "2024-03-05T10:15:30.",
    "2024-03-05T10:15:30.1234567890Z",
    "2024-03-05T10:15:30+0800",
    "2024-03-05T10:15:30+08:0",
    "2024-03-05T10:15:30+24:00",
    "2024-03-05T10:15:30-08:60",
    "2024-03-05T10:15:30Zx",
    "0000-01-01T00:00:00Z",
    "2024-3-05T10:15:30Z",
    "2024-03-05t10:15:30Z",
]
NUMBERS = [
    "0",
    "-0",
    "7",
    "12.50",
    "-1.5E-7",
    "1e5",
    "1E+2",
    "123456789012345678901234567890",
    "1e400",
    "0.000",
]


class Writer:
    """Random JSON text: values of every kind, random spacing, random (valid) escapes."""

    def __init__(self, rnd: random.Random):
        self.rnd = rnd

    def ws(self) -> str:
        return self.rnd.choice(["", "", "", " ", "\n", " \t", "\r\n  "])

    def string(self, text: str) -> str:
        out = []
        for ch in text:
            code = ord(ch)
            roll = self.rnd.random()
            if ch in '"\\':
                out.append("\\" + ch)
            elif code < 0x20 or (roll < 0.1 and code < 0x10000):
                out.append(f"\\u{code:04x}" if roll < 0.5 else f"\\u{code:04X}")
            elif ch == "/" and roll < 0.5:
                out.append("\\/")
            else:
                out.append(ch)
        if self.rnd.random() < 0.04:
            out.append(self.rnd.choice(["\\ud800", "\\udfff", "\\ud83d\\ude00", "\\u0001", "\\u0002"]))
        return '"' + "".join(out) + '"'

    def scalar(self) -> str:
        kind = self.rnd.random()
        if kind < 0.5:
            return self.string(self.rnd.choice(STRINGS + TIMES))
        if kind < 0.8:
            return self.rnd.choice(NUMBERS)
        return self.rnd.choice(["true", "false", "null"])

    def value(self, depth: int = 0) -> str:
        kind = self.rnd.random()
        if depth < 3 and kind < 0.12:
            return self.obj([(self.key(), self.value(depth + 1)) for _ in range(self.rnd.randint(0, 3))])
        if depth < 3 and kind < 0.2:
            items = [self.value(depth + 1) for _ in range(self.rnd.randint(0, 3))]
            return "[" + ",".join(self.ws() + i + self.ws() for i in items) + "]"
        return self.scalar()

    def key(self) -> str:
        return self.string(
            self.rnd.choice(["a", "b", "ab", "x.y", "@k", "\x01k", "\x02k", "k\u0001", "namespace"])
        )

    def obj(self, pairs: list[tuple[str, str]]) -> str:
        body = ",".join(f"{self.ws()}{k}{self.ws()}:{self.ws()}{v}{self.ws()}" for k, v in pairs)
        return "{" + body + "}"


def _field(w: Writer, name: str, value: str, pairs: list[tuple[str, str]]) -> None:
    """Add ``name`` usually with ``value``, sometimes missing, null, another kind, or twice."""
    roll = w.rnd.random()
    if roll < 0.06:
        return
    if roll < 0.1:
        value = w.rnd.choice(["null", "42", "1.5", "true", '{"a":1}', "[]", '""'])
    pairs.append((w.string(name), value))
    if w.rnd.random() < 0.04:
        pairs.append((w.string(name), w.scalar()))


def _record(w: Writer, log_type: str) -> tuple[bytes | None, bytes | None]:
    rnd = w.rnd
    pairs: list[tuple[str, str]] = [(w.key(), w.value()) for _ in range(rnd.randint(0, 2))]
    key: bytes | None = rnd.choice([None, b"k", b"1709604930123", b"-5", b"\xff", b"12a"])
    if log_type == "log_ums":
        return _ums_record(w)
    hb = rnd.random() < 0.15
    time = w.string(rnd.choice(TIMES))
    if log_type == "log_rsyslog":
        message = (
            w.string(rnd.choice(STRINGS)) if not hb else w.string(rnd.choice(STRINGS[10:11] + STRINGS[:3]))
        )
        for name, value in [
            ("host", w.string(rnd.choice(STRINGS[1:4]))),
            ("path", w.string(rnd.choice(["/var/log/a.log", HEARTBEAT_FILE] if hb else ["/var/log/a.log"]))),
            ("timestamp", time),
            ("message", message),
        ]:
            _field(w, name, value, pairs)
    elif log_type in ("log_logstash", "log_logstash_json", "log_flume", "log_json"):
        kind = "dbus-heartbeat" if hb else rnd.choice(["app_log", "x dbus-heartbeat"])
        for name, value in [
            ("@timestamp", time),
            ("host", w.string(rnd.choice(STRINGS[1:4]))),
            ("type", w.string(kind)),
            ("message", w.string(rnd.choice(STRINGS))),
        ]:
            _field(w, name, value, pairs)
    elif log_type == "log_filebeat":
        beat = w.obj([(w.string("hostname"), w.string(rnd.choice(STRINGS[1:4]))), (w.key(), w.value())])
        inner = '{"@timestamp":"2018-08-17 11:00:21.654","type":"dbus-heartbeat"}'
        for name, value in [
            ("@timestamp", time),
            ("beat", beat),
            ("host", w.obj([(w.string("name"), w.string("h.n"))])),
            ("type", w.string("dbus-heartbeat" if hb else "log")),
            ("message", w.string(inner if hb else rnd.choice(STRINGS))),
            ("prospector", w.obj([(w.key(), w.value()) for _ in range(rnd.randint(0, 3))])),
        ]:
            _field(w, name, value, pairs)
    rnd.shuffle(pairs)
    text = w.ws() + w.obj(pairs) + rnd.choice(["", "", "", " ", "\n", " tail", "}", "{", "[[["])
    return _mutate(rnd, text.encode("utf-8", "surrogatepass")), key


def _ums_record(w: Writer) -> tuple[bytes | None, bytes | None]:
    rnd = w.rnd
    if rnd.random() < 0.12:
        ns = "mysql.db1.s1.orders.3.0.0" if rnd.random() < 0.8 else "a.b"
        times = rnd.choice(["1709604930000|1709604929000|ok|db1", "1|x|ok", "1709604930000"])
        key = f"data_increment_heartbeat.{ns}.{times}.wh_placeholder".encode()
        return rnd.choice([None, b"", b"{}"]), key
    names = [
        rnd.choice(["ums_id_", "ums_ts_", "id", "amount", "namespace", "n\u0001", "x.y"])
        for _ in range(rnd.randint(0, 4))
    ]
    if rnd.random() < 0.7 and "ums_ts_" not in names:
        names.insert(0, "ums_ts_")
    fields = (
        "["
        + ",".join(w.obj([(w.string("name"), w.string(n) if rnd.random() < 0.95 else "1")]) for n in names)
        + "]"
    )
    tuples = []
    for _ in range(rnd.randint(0, 3)):
        values = [w.string(rnd.choice(TIMES[:4])) if n == "ums_ts_" else w.value(1) for n in names]
        if rnd.random() < 0.05:
            values.append("1")
        tuples.append(w.obj([(w.string("tuple"), "[" + ",".join(values) + "]")]))
    ns = w.string(
        rnd.choice(["mysql.db1.s1.orders.3.0.0", "mysql.db.1.s1.t.3.0.0", "a.b", "m.d.s.t.1.p%2E.0"])
    )
    schema = w.obj(
        [(w.string("namespace"), ns if rnd.random() < 0.95 else "7"), (w.string("fields"), fields)]
    )
    payload = "[" + ",".join(tuples) + "]" if rnd.random() < 0.95 else "{}"
    text = w.obj(
        [
            (w.string("protocol"), '{"type":"data_increment_data","version":"1.3"}'),
            (w.string("schema"), schema),
            (w.string("payload"), payload),
        ]
    )
    return _mutate(rnd, text.encode("utf-8", "surrogatepass")), rnd.choice([None, b"data_increment_data.x"])


def _mutate(rnd: random.Random, data: bytes) -> bytes:
    roll = rnd.random()
    if roll < 0.04 and data:
        return data[: rnd.randrange(len(data))]
    if roll < 0.07 and data:
        i = rnd.randrange(len(data))
        return data[:i] + bytes([rnd.randrange(256)]) + data[i + 1 :]
    if roll < 0.09:
        return data.replace(b"a", b"\xc3\x28", 1)
    if roll < 0.1:
        return b"\xef\xbb\xbf" + data
    return data


def corpus(log_type: str) -> list[KafkaRecord]:
    rnd = random.Random(f"{SEED}-{log_type}")
    w = Writer(rnd)
    fixed = [
        (None, None),
        (b"", None),
        (b"not json", None),
        (b"[1]", None),
        (b" \n ", None),
        (b'{"host":"h","message":"' + b"x" * 3000 + b'"}', None),  # over this corpus's 2048-byte limit
    ]
    records = fixed + [_record(w, log_type) for _ in range(PER_TYPE)]
    return [
        KafkaRecord(
            value, key, rnd.choice([0, 1, 7, 255]), rnd.randrange(2**45), rnd.choice([-1, 0, 1709604931000])
        )
        for value, key in records
    ]
