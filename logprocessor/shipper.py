"""The local stack's log shipper: an rsyslog configuration made from the DBus configuration (docs/logs.md,
The shipper).

``rsyslog_conf(cfg, work_dir)`` is pure: for each log source with ``shipper.files`` it writes an imfile input
per glob (resolved against the configuration file's folder) and one omkafka action writing to the source's
raw topic. A line becomes one Kafka record, keyed by its file's path (one file, one partition, its order)::

    {"host":"vm","path":"\\/srv\\/app\\/a.log","timestamp":"2026-11-24T18:42:38.186Z","message":"hello"}

(rsyslog's JSON escapes ``/`` as ``\\/``; a JSON parser reads ``/srv/app/a.log``). The sizes and queue
settings are explained where they are written, in the generated file itself, which is for a private
rsyslogd: ``rsyslogd -n -f FILE -i PIDFILE`` (no imuxsock, no imklog: it never touches /dev/log).
"""

from __future__ import annotations

import os
from pathlib import Path

from dbuslib.config import DbusConfig, LogSource
from dbuslib.errors import ConfigError
from dbuslib.kafka_security import librdkafka_options

# Kafka framing under the topics' max.message.bytes: the producer refuses a larger record itself, so the
# broker never answers MESSAGE_TOO_LARGE (omkafka would resubmit that record forever).
PRODUCER_HEADROOM = 65_536
# A line whose every byte is a control character grows 6 times in JSON (\u0001); the rest of a record
# (keys, host, path, timestamp) fits in this many bytes.
RECORD_OVERHEAD = 8_192
ESCAPE_GROWTH = 6


def sizes(cfg: DbusConfig) -> tuple[int, int]:
    """``(max_message_size, producer_max_bytes)``: rsyslog's line limit and librdkafka's record limit.

    The producer limit is the topics' ``endpoints.kafka.max_message_bytes`` less 64 KiB of framing. The line
    limit is chosen so that any line's record fits it, even one of control characters only; but never at
    or below a source's ``processor.max_line_bytes``, so that a line rsyslog had to cut is always a record
    the processor refuses as too large (a dead letter), never taken for a whole line.
    """
    producer = cfg.endpoints.kafka.max_message_bytes - PRODUCER_HEADROOM
    line = (producer - RECORD_OVERHEAD) // ESCAPE_GROWTH
    longest = max((s.processor.max_line_bytes for s in shipped_sources(cfg).values()), default=0)
    return min(max(line, longest + 1), producer - RECORD_OVERHEAD), producer


def shipped_sources(cfg: DbusConfig) -> dict[str, LogSource]:
    """The log sources with ``shipper.files``, by name."""
    return {name: src for name, src in sorted(cfg.log_sources.items()) if src.shipper.files}


def globs(cfg: DbusConfig, src: LogSource) -> list[str]:
    """``shipper.files`` made absolute against the configuration file's folder, ``..`` folded."""
    return [os.path.normpath(cfg.path.parent / g) for g in src.shipper.files]


def _q(value: object) -> str:
    """A RainerScript string literal (backslash and double quote escaped)."""
    text = str(value)
    if "\n" in text or "\r" in text:
        msg = f"the shipper's configuration cannot hold a line break: {text!r}"
        raise ConfigError(msg)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _array(values: list[str]) -> str:
    return "[" + ", ".join(_q(v) for v in values) + "]"


_TEMPLATES = r"""# One Kafka record per line: {"host":..,"path":..,"timestamp":..,"message":..} and a newline
# (omkafka writes the records Kafka has not taken at a stop to failedMsgFile one after the other and reads
# them back line by line: without it they would run together; a record read back has no line feed).
# jsonf escapes ", \, / and control characters; datatype="string" keeps a line of digits a string.
# Bytes >= 0x80 pass unchanged: a line that is not UTF-8 gives a record that is not UTF-8 (the processor
# refuses it with a reason). An empty line is not shipped (imfile skips it).
# timestamp: when rsyslog read the line, UTC, milliseconds (RFC 3339).
template(name="dbus_record" type="list") {
  constant(value="{")
  property(outname="host" name="hostname" format="jsonf" datatype="string")
  constant(value=",")
  property(outname="path" name="$!metadata!filename" format="jsonf" datatype="string")
  constant(value=",\"timestamp\":\"")
  property(name="timegenerated" dateFormat="year" date.inUTC="on")
  constant(value="-")
  property(name="timegenerated" dateFormat="month" date.inUTC="on")
  constant(value="-")
  property(name="timegenerated" dateFormat="day" date.inUTC="on")
  constant(value="T")
  property(name="timegenerated" dateFormat="hour" date.inUTC="on")
  constant(value=":")
  property(name="timegenerated" dateFormat="minute" date.inUTC="on")
  constant(value=":")
  property(name="timegenerated" dateFormat="second" date.inUTC="on")
  constant(value=".")
  property(name="timegenerated" dateFormat="subseconds" position.from="1" position.to="3")
  constant(value="Z\",")
  property(outname="message" name="msg" format="jsonf" datatype="string")
  constant(value="}\n")
}

# The record's key: the file's path.
template(name="dbus_path" type="list") {
  property(name="$!metadata!filename")
}

# Each source: imfile inputs (freshStartTail="off": a file's existing lines are read once; the read position
# of every file is kept in the work dir, so a restart goes on where it stopped; reopenOnTruncate: a
# truncated file is read again from its start), a ruleset with one queue and one omkafka action, so that no
# line is lost (at least once) and each file's lines keep their order:
# - one queue per source, one worker: lines are sent in the order they were read. It is in memory; when it
#   holds half its high-water mark imfile waits (the file is the buffer), and what it holds when rsyslogd
#   stops (after 10 s of sending) is saved to the work dir (queue.filename) and sent first at the next
#   start. The action has no queue of its own: two queues in a row, both saved at a stop, would be sent
#   interleaved at the next start;
# - action.resumeRetryCount="-1": while Kafka is down the action retries forever, lines wait;
# - acks=all, enable.idempotence: a record counts as sent once every in-sync replica has it, and
#   librdkafka's own retries neither duplicate nor reorder; message.timeout.ms=0: it never gives up;
#   acks, message.timeout.ms and partitioner are topic settings in librdkafka, and omkafka gives its topics
#   only topicConfParam (a topic setting in confParam would be ignored);
# - resubmitOnFailure, keepFailedMessages: a record Kafka did not take is sent again, and those still
#   unsent when rsyslogd stops (after closeTimeout) are written to failedMsgFile and sent first at the next
#   start;
# - partitions.auto with the key: librdkafka's murmur2_random partitioner (the Java client's), so one file's
#   lines land in one partition, in order.
"""


def _source(cfg: DbusConfig, name: str, src: LogSource, work_dir: Path, producer_max: int) -> str:
    if src.type != "log_rsyslog":
        msg = (
            f"{cfg.path}: log_sources.{name}.shipper.files: the local stack's rsyslog writes log_rsyslog "
            f"records, but {name} is {src.type}; ship it with its own shipper and leave shipper.files empty"
        )
        raise ConfigError(msg)
    ruleset = f"dbus_{name}"
    topic = src.topics.name("raw", name)
    brokers = [b.strip() for b in cfg.endpoints.kafka.bootstrap_servers.split(",") if b.strip()]
    # endpoints.kafka.security in librdkafka's spelling: the file holds the SASL password then (written 0600)
    security = librdkafka_options(cfg.endpoints.kafka.security)
    conf_params = [
        "enable.idempotence=true",
        f"message.max.bytes={producer_max}",
        "compression.codec=lz4",
        *(f"{k}={v}" for k, v in security.items() if not (k == "security.protocol" and v == "plaintext")),
    ]
    lines = [
        f"# log source {name}: {', '.join(src.shipper.files)} -> topic {topic}",
        f"ruleset(name={_q(ruleset)}",
        f'  queue.type="LinkedList" queue.filename={_q(ruleset)} queue.saveOnShutdown="on"',
        '  queue.workerThreads="1" queue.size="100000" queue.dequeueBatchSize="1024"',
        '  queue.timeoutShutdown="10000" queue.timeoutEnqueue="86400000"',
        ") {",
        "  action(",
        f'    type="omkafka" name={_q(ruleset)} broker={_array(brokers)} topic={_q(topic)}',
        '    template="dbus_record" dynaKey="on" key="dbus_path" partitions.auto="on"',
        f"    confParam={_array(conf_params)}",
        '    topicConfParam=["acks=all", "message.timeout.ms=0", "partitioner=murmur2_random"]',
        '    resubmitOnFailure="on" keepFailedMessages="on"',
        f'    failedMsgFile={_q(work_dir / f"{ruleset}.failed")} closeTimeout="10000"',
        '    action.resumeRetryCount="-1" action.resumeInterval="1"',
        "  )",
        "}",
    ]
    for pattern in globs(cfg, src):
        lines.append(
            f'input(type="imfile" file={_q(pattern)} tag={_q(ruleset + ":")} ruleset={_q(ruleset)}\n'
            '      addMetadata="on" freshStartTail="off" reopenOnTruncate="on")'
        )
    return "\n".join(lines) + "\n"


def rsyslog_conf(cfg: DbusConfig, work_dir: Path, log_file: Path | None = None) -> str:
    """The rsyslog configuration that ships every log source's ``shipper.files`` to its raw topic.

    ``work_dir`` (absolute) keeps imfile's read positions, the disk-assisted queues, omkafka's failed
    messages and oversize lines; ``log_file`` (default ``work_dir/rsyslogd.log``) gets rsyslogd's own
    messages. With no source to ship, only the globals: rsyslogd still starts, shipping nothing.
    """
    log_file = log_file or work_dir / "rsyslogd.log"
    line_max, producer_max = sizes(cfg)
    shipped = shipped_sources(cfg)
    safe = (producer_max - RECORD_OVERHEAD) // ESCAPE_GROWTH
    fits = (
        "even a line of control characters (6 bytes each in JSON)"
        if line_max <= safe
        else f"unless the line is mostly control characters (6 bytes each in JSON; {safe:,} bytes would\n"
        "# always fit, but a cut line must stay longer than every source's processor.max_line_bytes)"
    )
    head = f"""# Generated by `dbus logs shipper-conf` from {cfg.path}: do not edit, change that file
# (docs/logs.md, The shipper). For a private rsyslogd: rsyslogd -n -f THIS_FILE -i PIDFILE.
# Log sources shipped: {", ".join(shipped) or "none"}.

# Before any input loads. maxMessageSize: a longer line is cut to its first {line_max:,} bytes (the processor
# refuses that record as too large: a dead letter), rsyslogd logs a warning and the whole line is appended
# to oversize.jsonl. Every record fits librdkafka's {producer_max:,} bytes (endpoints.kafka.max_message_bytes
# less 64 KiB), {fits}.
global(
  workDirectory={_q(work_dir)}
  maxMessageSize="{line_max}"
  oversizemsg.input.mode="truncate"
  oversizemsg.report="on"
  oversizemsg.errorfile={_q(work_dir / "oversize.jsonl")}
  processInternalMessages="on"
)

# rsyslogd's own messages (start, stop, errors, oversize warnings): the only ones in the default ruleset.
action(type="omfile" file={_q(log_file)} template="RSYSLOG_FileFormat")
"""
    if not shipped:
        return head
    body = [
        head,
        'module(load="imfile" mode="inotify")',
        'module(load="omkafka")',
        "",
        _TEMPLATES,
    ]
    body += [_source(cfg, name, src, work_dir, producer_max) for name, src in shipped.items()]
    return "\n".join(body)
