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
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # config.py imports this module: no import of it at run time
    from dbuslib.config import DbusConfig, Source

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


def glob_schemas(src: Source) -> list[str]:
    """The schema globs of ``capture.include`` (``db_*`` of ``db_*.*``): the appender follows a pattern for
    them (``schema_topic_pattern``)."""
    return sorted({p.split(".", 1)[0] for p in src.capture.include if _GLOB & set(p.split(".", 1)[0])})


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
        kind = "table" if src.output.topic == "table" else "result"
        if "{table}" not in result_template(src) or not _GLOB & set(table):
            named.append((kind, result_topic(ds, src, schema, table)))
        for kind, topic in named:
            if problem := topic_problem(topic):
                found.append(
                    f"sources.{ds}.capture.include[{i}]: schema {schema!r} gives topic {topic!r} "
                    f"(topics.{kind}), which Kafka refuses: {problem}"
                )
    return found


def source_topics(ds: str, src: Source, schemas: list[str] | None = None) -> list[str]:
    """Every topic of source ``ds``: first level, control, dead letters, full-pull, and per schema (its
    schema topic, its result topic unless results go per table, its events topic when it writes a
    per-row format)."""
    t = src.topics
    names = [t.name(kind, ds) for kind in _FIXED_KINDS]
    per_row = src.output.per_row
    for schema in schemas if schemas is not None else literal_schemas(src):
        names.append(t.name("schema", ds, schema))
        result = result_template(src)
        if "{table}" not in result:  # per-table result topics are created when first written
            names.append(render(result, ds, schema))
        if per_row:
            names.append(t.name("events", ds, schema))
    return names


# ---------------------------------------------------------------- where a table's changes go
#
# One home for "which topic does a change of this table go to" (the appender, the extractor's full-pull
# requests, ``dbus config check``): ``output.topic`` schema -> ``topics.result``, table -> ``topics.table``.
# A table written in a per-row format (``output.format_for``, ums.formats.PER_ROW) gets only its per-row
# records there: its UMS heartbeats and terminations go to ``topics.events`` of its schema, so that a
# plain Kafka consumer of the result topic reads nothing but row changes.


def result_template(src: Source) -> str:
    """The template of ``src``'s result topics: ``topics.table`` with ``output.topic: table``, else
    ``topics.result``."""
    return src.topics.table if src.output.topic == "table" else src.topics.result


def _output_templates(src: Source) -> tuple[str, ...]:
    """The templates of the topics the appender of ``src`` writes its results to: ``topics.result``,
    ``topics.table`` with ``output.topic: table``, ``topics.events`` with a per-row format."""
    table = [src.topics.table] if src.output.topic == "table" else []
    events = [src.topics.events] if src.output.per_row else []
    return (src.topics.result, *table, *events)


def result_topic(ds: str, src: Source, schema: str, table: str) -> str:
    """The topic the changes of ``schema.table`` go to (``output.topic``: ``topics.result`` or
    ``topics.table``): ``("demo", src, "shop", "orders")`` -> ``"demo.shop.result"`` (or
    ``"demo.shop.orders"``)."""
    return render(result_template(src), ds, schema, table)


def row_format(src: Source, schema: str, table: str) -> str | None:
    """The per-row format ``schema.table`` is written in (``output.format_for``), None for UMS."""
    fmt = src.output.format_for(schema, table)
    return None if fmt == "ums" else fmt


def events_topic(ds: str, src: Source, schema: str) -> str:
    """Where the UMS heartbeats and terminations of ``schema``'s per-row tables go (``topics.events``)."""
    return src.topics.name("events", ds, schema)


def describe_outputs(ds: str, src: Source) -> str:
    """``dbus config check``'s words for where source ``ds`` writes, by example::

    writes ums to demo.<schema>.result; debezium-json for 'shop.orders*' to demo.<schema>.<table>
    (a topic per table, made when first written), their heartbeats and terminations to demo.<schema>.events
    """
    out = src.output
    template = result_template(src)
    topic = template.format(ds=ds, schema="<schema>", table="<table>")
    where = f"{topic} (a topic per table, made when first written)" if "{table}" in template else topic
    parts = [f"{out.format} to {where}"]
    parts += [f"{fmt} for {glob!r} to {where}" for glob, fmt in out.tables.items() if fmt != out.format]
    said = "writes " + "; ".join(parts)
    if out.per_row:
        events = src.topics.events.format(ds=ds, schema="<schema>")
        said += f"; UMS heartbeats and terminations of per-row tables to {events}"
    return said


# ---------------------------------------------------------------- the schema topics of glob schemas
#
# A schema captured through a glob (``capture.include: ['db_*.*']``, the default ``*.*``) is named by its
# first row only: the dispatcher makes its topic ``<ds>.<schema>`` then. The appender follows such topics
# with one regular expression over whole topic names (Spark's Kafka source ``subscribePattern``, a
# java.util.regex; the same text is a Python ``re``), built here and nowhere else: the schema template
# with ``{schema}`` matching the *escaped* names that an include's schema glob matches, less the schemas
# an exclude drops whole (``tmp_*.*``) and the heartbeat schema (as ``literal_schemas``), and less every
# topic of this source or another that is not a schema topic of this one (raw, result, dead letters,
# control, full pull): by example, for ``demo`` with ``include: ['db_*.*']``::
#
#     (?!(?:demo|demo_ctrl|demo\.dlq|...|demo\.[A-Za-z0-9._-]+\.result|...)$)demo\.(?!(?:dbus)$)(db_...)

_LEGAL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_ANY_ESCAPE = "_x[0-9a-f]{4}|_X[0-9a-f]{6}"
_ONE_CHAR = f"(?:[A-Za-z0-9._-]|{_ANY_ESCAPE})"  # one character of a name, escaped
_ANY_NAME = "[A-Za-z0-9._-]+"  # any escaped name (an escape is spelled in legal characters)
_CLASS_LIMIT = 4096  # code points a bracket's ranges may span before its escapes are taken as any escape


def _escaped(c: str) -> str:
    return re.escape(escape(c))


def _bracket_chars(inner: str) -> set[str] | None:
    """Every character a bracket expression names or spans (a superset of its members; None when its
    ranges span more than ``_CLASS_LIMIT`` code points)."""
    chars = set(inner)
    for i in range(1, len(inner) - 1):
        if inner[i] == "-":
            lo, hi = sorted((ord(inner[i - 1]), ord(inner[i + 1])))
            if hi - lo > _CLASS_LIMIT:
                return None
            chars.update(chr(cp) for cp in range(lo, hi + 1))
    return chars


def _bracket_regex(body: str) -> str:
    """One escaped character that fnmatch's ``[body]`` matches: legal characters as they are, the
    others as their escapes (any escape when the ranges are too wide to list)."""
    import fnmatch

    member = re.compile(fnmatch.translate(f"[{body}]"))
    legal = "".join(re.escape(c) for c in sorted(_LEGAL_CHARS) if member.match(c))
    negated = body.startswith("!")
    named = _bracket_chars(body[1:] if negated else body)
    if named is None:
        escapes = _ANY_ESCAPE
    elif negated:
        refused = sorted(_escaped(c) for c in named - _LEGAL_CHARS if not member.match(c))
        escapes = (f"(?!{'|'.join(refused)})" if refused else "") + f"(?:{_ANY_ESCAPE})"
    else:
        escapes = "|".join(sorted(_escaped(c) for c in named - _LEGAL_CHARS if member.match(c)))
    parts = ([f"[{legal}]"] if legal else []) + ([escapes] if escapes else [])
    return f"(?:{'|'.join(parts)})" if parts else "(?!)"


def glob_regex(glob: str) -> str:
    """A regex (Java's and Python's) of the escaped names (``escape``) that the fnmatch ``glob`` matches:
    ``"db_*"`` -> ``"db_[A-Za-z0-9._-]*"``, ``"sh?p"`` -> ``"sh(?:[A-Za-z0-9._-]|_x...)p"``. Exact but
    for names that spell an escape themselves (they share a topic with the name they spell)."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        i += 1
        if c == "*":
            if not out or out[-1] != "[A-Za-z0-9._-]*":
                out.append("[A-Za-z0-9._-]*")
        elif c == "?":
            out.append(_ONE_CHAR)
        elif c == "[":  # fnmatch's reading of a bracket: '!' negates, a ']' first is a member
            j = i + 1 if i < n and glob[i] == "!" else i
            j = j + 1 if j < n and glob[j] == "]" else j
            end = glob.find("]", j)
            if end < 0:
                out.append(_escaped("["))
            else:
                out.append(_bracket_regex(glob[i:end]))
                i = end + 1
        else:
            out.append(_escaped(c))
    return "".join(out)


def _template_regex(template: str, ds: str, schema: str, table: str = _ANY_NAME) -> str:
    """The topics of ``template`` as a regex: ``{ds}`` filled in, ``{schema}`` and ``{table}`` matching
    the regexes given."""
    import string

    out = []
    for literal, field, _, _ in string.Formatter().parse(template):
        out.append(re.escape(literal))
        out.append({"ds": re.escape(ds), "schema": schema, "table": table}.get(field or "", ""))
    return "".join(out)


def foreign_topics(cfg: DbusConfig, ds: str) -> list[str]:
    """Regexes of the topics of every source but ``ds`` (database and log sources): fixed, schema and
    result topics, any schema and table."""
    found = []
    for name, src in cfg.sources.items():
        if name != ds:
            t = src.topics
            found += [re.escape(t.name(kind, name)) for kind in _FIXED_KINDS]
            found += [_template_regex(tpl, name, _ANY_NAME) for tpl in (t.schema_, *_output_templates(src))]
    for name, log in cfg.log_sources.items():
        lt = log.topics
        found += [
            _template_regex(tpl, name, _ANY_NAME) for tpl in (lt.raw, lt.result, lt.ctrl, lt.dead_letter)
        ]
        found.append(_template_regex(lt.unknown, name, _ANY_NAME))
    return found


def schema_topic_pattern(ds: str, src: Source, foreign: list[str] | tuple[str, ...] = ()) -> str | None:
    """The regex of every schema topic the dispatcher can write for source ``ds`` (module comment above),
    or None when ``capture.include`` names each schema literally (or the template has no ``{schema}``).
    ``foreign``: regexes of other sources' topics (``foreign_topics``), never matched. A second
    ``{schema}`` in the template matches any name."""
    t = src.topics
    if not glob_schemas(src) or "{schema}" not in t.schema_:
        return None
    schemas = [p.split(".", 1)[0] for p in src.capture.include]
    included = "|".join(dict.fromkeys(glob_regex(s) for s in schemas))
    dropped = [
        glob_regex(p.split(".", 1)[0]) for p in src.capture.exclude if set(p.split(".", 1)[1]) == {"*"}
    ]
    dropped.append(_escaped(src.heartbeat.schema_) if src.heartbeat.schema_ else "(?!)")
    not_ours = [re.escape(t.name(kind, ds)) for kind in _FIXED_KINDS]
    # our result topics (per schema, per table) and events topics: the appender must not read its output
    not_ours += [_template_regex(tpl, ds, _ANY_NAME) for tpl in _output_templates(src)]
    not_ours += foreign
    before, after = t.schema_.split("{schema}", 1)
    head, tail = _template_regex(before, ds, _ANY_NAME), _template_regex(after, ds, _ANY_NAME)
    return f"(?!(?:{'|'.join(not_ours)})$){head}(?!(?:{'|'.join(dropped)}){tail}$)(?:{included}){tail}"


@dataclass(frozen=True)
class Subscription:
    """The schema topics the appender reads: ``topics`` by name, and with ``pattern`` (glob schemas) every
    topic the regex matches, those made after the query started included."""

    topics: tuple[str, ...]
    pattern: str | None = None

    def option(self) -> tuple[str, str]:
        """The Kafka source's option: ``("subscribePattern", regex)`` or ``("subscribe", "a,b")``."""
        return ("subscribePattern", self.pattern) if self.pattern else ("subscribe", ",".join(self.topics))

    def follows(self, topic: str) -> bool:
        """The appender reads ``topic``."""
        return topic in self.topics or bool(self.pattern and re.fullmatch(self.pattern, topic))


def appender_subscription(cfg: DbusConfig, ds: str, schemas: list[str] | None = None) -> Subscription:
    """What the appender of ``ds`` reads: the topics of ``schemas`` (``--schema``) when given, else those
    of the literal schemas of ``capture.include`` and, when an include's schema is a glob, the pattern of
    every schema topic the dispatcher can write (``schema_topic_pattern``)."""
    src = cfg.source(ds)
    if schemas:
        return Subscription(tuple(src.topics.name("schema", ds, s) for s in schemas))
    literal = tuple(src.topics.name("schema", ds, s) for s in literal_schemas(src))
    return Subscription(literal, schema_topic_pattern(ds, src, foreign_topics(cfg, ds)))


def describe_subscription(cfg: DbusConfig, ds: str) -> str:
    """``dbus config check``'s words for what the appender of ``ds`` reads, by example::

    reads demo.shop, and every topic demo.<schema> of a schema matching 'db_*' (not 'tmp_*', nor the
    heartbeat schema 'dbus'), also one made after it started, from its first record
    """
    src = cfg.source(ds)
    sub = appender_subscription(cfg, ds)
    said = f"reads {', '.join(sub.topics)}, and" if sub.topics else "reads"
    if not sub.pattern:
        return said.removesuffix(", and") if sub.topics else "reads no topic"
    globs = glob_schemas(src)
    dropped = sorted({p.split(".", 1)[0] for p in src.capture.exclude if set(p.split(".", 1)[1]) == {"*"}})
    heartbeat = f"the heartbeat schema {src.heartbeat.schema_!r}"
    but = f"not {', '.join(map(repr, dropped))}, nor {heartbeat}" if dropped else f"not {heartbeat}"
    shape = src.topics.schema_.format(ds=ds, schema="<schema>")
    return (
        f"{said} every topic {shape} of a schema matching {' or '.join(map(repr, globs))} ({but}), "
        "also one made after it started, from its first record"
    )
