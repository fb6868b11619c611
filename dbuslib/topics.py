"""Topic names (pure): the one escaping of schema and table names, Kafka's rule, a source's topics.

Kafka accepts a topic name of 1 to 249 characters out of ``[A-Za-z0-9._-]``, other than ``.`` and
``..``. Schema and table names are MariaDB identifiers and may hold any character, so each one is
escaped (``escape``) before it goes into a topic template (``topics.schema``, ``topics.result``);
``render`` is the only place that fills a template, and ``Topics.name`` (dbuslib/config.py) calls it,
so the dispatcher, the appender and the full puller name the same topic for the same table.

The escaping: a character of ``[A-Za-z0-9._-]`` stays as it is (a legal name is unchanged, byte for
byte); any other character becomes ``_x`` and the 4 lower-case hex digits of its code point, or ``_X``
and 6 hex digits above U+FFFF::

    escape("shop")          -> "shop"
    escape("shöp_12")       -> "sh_x00f6p_12"
    escape("my shop$")      -> "my_x0020shop_x0024"
    escape("t😀")           -> "t_X01f600"
    unescape("sh_x00f6p_12") -> "shöp_12"

``unescape(escape(n)) == n`` for every name that does not itself spell an escape (``_x`` + 4 hex
digits or ``_X`` + 6): such a name is legal and kept as it is, so ``a_x00f6`` and ``aö`` share a topic.
Escaping makes a name longer (6 characters for one), so a topic can still be too long: ``topic_problem``
says why Kafka would refuse a name, and ``include_problems`` reports it for ``dbus config check``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # config.py imports this module: no import of it at run time
    from dbuslib.config import Source

# Kafka's rule for topic names (org.apache.kafka.common.internals.Topic): these characters, at most 249.
TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
MAX_TOPIC_LENGTH = 249
_ILLEGAL = re.compile(r"[^A-Za-z0-9._-]")
_ESCAPED = re.compile(r"_x([0-9a-f]{4})|_X([0-9a-f]{6})")
_GLOB = set("*?[")
_FIXED_KINDS = ("raw", "ctrl", "dead_letter", "data_shards", "callback", "global_ctrl")


def _hex(m: re.Match[str]) -> str:
    cp = ord(m.group())
    return f"_x{cp:04x}" if cp <= 0xFFFF else f"_X{cp:06x}"


def escape(name: str) -> str:
    """``name`` with every character Kafka refuses in a topic name written as ``_xHHHH`` (``_XHHHHHH``
    above U+FFFF); a name of legal characters is returned unchanged."""
    return _ILLEGAL.sub(_hex, name)


def unescape(name: str) -> str:
    """The name ``escape`` was given (for names that do not spell an escape themselves)."""
    return _ESCAPED.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), name)


def render(template: str, ds: str, schema: str = "", table: str = "") -> str:
    """A topic template filled in, schema and table escaped: ``("{ds}.{schema}", "demo", "shöp")`` ->
    ``"demo.sh_x00f6p"``."""
    return template.format(ds=ds, schema=escape(schema), table=escape(table))


def topic_problem(topic: str) -> str | None:
    """Why Kafka refuses ``topic`` as a topic name, or None when it takes it."""
    if not topic:
        return "empty"
    if topic in (".", ".."):
        return f"{topic!r} is reserved"
    if len(topic) > MAX_TOPIC_LENGTH:
        return f"{len(topic)} characters, more than {MAX_TOPIC_LENGTH}"
    bad = sorted(set(_ILLEGAL.findall(topic)))
    if bad:
        return f"characters {''.join(bad)!r} are not in [A-Za-z0-9._-]"
    return None


def literal_schemas(src: Source) -> list[str]:
    """Schemas named without globs in ``capture.include``, less the heartbeat schema.

    Heartbeat rows travel on the topic of the schema they monitor, so the heartbeat schema has none.
    """
    schemas = {p.split(".")[0] for p in src.capture.include}
    return sorted(s for s in schemas if not (_GLOB & set(s)) and s != src.heartbeat.schema_)


def include_problems(ds: str, src: Source) -> list[str]:
    """Every topic of source ``ds`` known from its config that Kafka would refuse, naming the key::

    sources.demo.capture.include[0]: schema 'ßßß...' gives topic 'demo._x00df...' (schema), which
    Kafka refuses: 400 characters, more than 249
    """
    t = src.topics
    found = []
    for kind in _FIXED_KINDS:
        topic = t.name(kind, ds)
        if problem := topic_problem(topic):
            found.append(f"sources.{ds}.topics.{kind}: gives topic {topic!r}, which Kafka refuses: {problem}")
    for i, pattern in enumerate(src.capture.include):
        schema, table = pattern.split(".", 1)
        if _GLOB & set(schema) or schema == src.heartbeat.schema_:
            continue
        named = [("schema", t.name("schema", ds, schema))]
        if "{table}" not in t.result or not _GLOB & set(table):
            named.append(("result", t.name("result", ds, schema, table)))
        for kind, topic in named:
            if problem := topic_problem(topic):
                found.append(
                    f"sources.{ds}.capture.include[{i}]: schema {schema!r} gives topic {topic!r} "
                    f"(topics.{kind}), which Kafka refuses: {problem}"
                )
    return found


def source_topics(ds: str, src: Source, schemas: list[str] | None = None) -> list[str]:
    """Every topic of source ``ds``: first level, control, dead letters, full-pull, and per schema."""
    t = src.topics
    names = [t.name(kind, ds) for kind in _FIXED_KINDS]
    for schema in schemas if schemas is not None else literal_schemas(src):
        names.append(t.name("schema", ds, schema))
        if "{table}" not in t.result:  # per-table result topics are created when first written
            names.append(t.name("result", ds, schema))
    return names
