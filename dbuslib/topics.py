"""Which topics a source uses, from its topic templates (pure)."""

from __future__ import annotations

from dbuslib.config import Source

_GLOB = set("*?[")


def literal_schemas(src: Source) -> list[str]:
    """Schemas named without globs in ``capture.include``, less the heartbeat schema.

    Heartbeat rows travel on the topic of the schema they monitor, so the heartbeat schema has none.
    """
    schemas = {p.split(".")[0] for p in src.capture.include}
    return sorted(s for s in schemas if not (_GLOB & set(s)) and s != src.heartbeat.schema_)


def source_topics(ds: str, src: Source, schemas: list[str] | None = None) -> list[str]:
    """Every topic of source ``ds``: first level, control, dead letters, full-pull, and per schema."""
    t = src.topics
    names = [t.name(kind, ds) for kind in ("raw", "ctrl", "dead_letter", "data_shards", "callback", "global_ctrl")]
    for schema in schemas if schemas is not None else literal_schemas(src):
        names.append(t.name("schema", ds, schema))
        if "{table}" not in t.result:  # per-table result topics are created when first written
            names.append(t.name("result", ds, schema))
    return names
