"""Masked values on the Log rules page (docs/console.md, Log rules: masked values): what the preview and
the sample show of a log source whose ``masking`` rules mask columns of its tables (the same rules and code
as the log processor's, logprocessor/masking.py and ``ums.masking``).

- **Everyone**: the row after saveAs shows a masked column's value as the processor publishes it (masked),
  and the step names the masked columns.
- **A viewer** never gets a masked column's clear value. The raw topic's lines hold them in clear, so a
  viewer's sample and preview of a masking source are *redacted*: every line of a record goes through the
  groups of every masked table of the source (its published version and its draft; in a preview also the
  editor's groups), and each clear value they give a masked column is replaced, wherever it is written in
  the answer, by its masked value. A record is withheld whole when that cannot be done safely: a masked
  value is not written in the record as it is (a rule transformed it on the way, so the record's form of it
  is unknown), a rule of a masked table breaks on a line or the adapter refuses the record (the processor's
  dead letter, which never carries the value in a masking source: ``dbuslib.deadletter``).

Pure: the rules, groups and adapter settings come in a ``Masking`` (picklable: it crosses into the
preview's process, console/budget.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from logprocessor.grammar import Column, Group
from logprocessor.logums import user_fields
from ums.masking import MaskPlan, compile_rules

WITHHELD = "withheld"


@dataclass(frozen=True)
class Masking:
    """A log source's masking as the page needs it: ``rules`` (``log_sources.<ds>.masking``), the source's
    ``schema``, the editor's ``table``, and for a viewer (``redact``) ``known``: every masked table's groups
    (published and draft) as ``(table, groups)``."""

    rules: Mapping[str, Mapping[str, Any]]
    schema: str
    table: str
    redact: bool = False
    known: tuple[tuple[str, tuple[Group, ...]], ...] = ()

    def plan(self) -> MaskPlan | None:
        """The compiled rules (None when the source masks nothing)."""
        return compile_rules(self.rules) if self.rules else None


def mask_rows(
    plan: MaskPlan | None, schema: str, table: str, columns: Sequence[Column], rows: list[list[Any]]
) -> tuple[list[list[Any]], list[int]]:
    """``rows`` (a group's rows after saveAs, one cell per column) with the masked columns masked as the
    processor masks ``table``'s messages, and the masked columns' positions. A row of another width than
    ``columns`` has every cell withheld."""
    fields = user_fields(columns)
    mask = plan.for_table(schema, table, fields) if plan is not None else None
    if mask is None:
        return rows, []
    out = [list(mask.apply_row(tuple(r))) if len(r) == len(fields) else [WITHHELD] * len(r) for r in rows]
    return out, [c.index for c in mask.columns]


def line_secrets(m: Masking, plan: MaskPlan, line: str, extra: Sequence[Group] = ()) -> dict[str, str] | str:
    """The clear values ``line`` gives masked columns, each with its masked value (as text), through every
    group of ``m.known`` and ``extra`` (the editor's, for ``m.table``); or why the line's record must be
    withheld (a rule of a masked table breaks on it)."""
    from logprocessor.operators import run_group

    found: dict[str, str] = {}
    for table, groups in (*m.known, (m.table, tuple(extra))):
        masked_table = plan.rules_for(m.schema, table) is not None
        for g in groups:
            got = run_group(g, line)
            if got.failure is not None:
                if masked_table:  # where and the dead letter's code: a reason may quote a value
                    f = got.failure
                    return (
                        f"a rule of the masked table {table!r} breaks on a line: group {g.name!r} rule "
                        f"{f.position} ({f.op}), {f.code}"
                    )
                continue
            masked, where = mask_rows(plan, m.schema, table, got.columns, got.rows)
            for clear_row, masked_row in zip(got.rows, masked, strict=True):
                for i in where:
                    clear = clear_row[i] if i < len(clear_row) else None
                    if isinstance(clear, str) and clear and clear != masked_row[i]:
                        found[clear] = "" if masked_row[i] is None else str(masked_row[i])
    return found


def _forms(clear: str, masked: str) -> list[tuple[str, str]]:
    """How a clear value can be written in a record (as it is; inside a JSON string), each with what
    replaces it."""
    escaped, masked_escaped = json.dumps(clear)[1:-1], json.dumps(masked)[1:-1]
    forms = [(clear, masked_escaped)]
    if escaped != clear:
        forms.append((escaped, masked_escaped))
    return forms


def redact_text(text: str, secrets: Mapping[str, str], *, strict: bool = True) -> str | None:
    """``text`` with every clear value of ``secrets`` replaced by its masked value (longest first); None
    when ``strict`` and a value is written in it in no form ``_forms`` knows."""
    ordered = sorted(secrets, key=len, reverse=True)
    if strict and any(all(f not in text for f, _ in _forms(c, secrets[c])) for c in ordered):
        return None
    for clear in ordered:
        for form, by in _forms(clear, secrets[clear]):
            text = text.replace(form, by)
    return text


def redact(doc: Any, secrets: Mapping[str, str]) -> Any:
    """Every string in ``doc`` (dicts, lists, strings) redacted (not strict); other values as they are."""
    if not secrets:
        return doc
    if isinstance(doc, str):
        return redact_text(doc, secrets, strict=False)
    if isinstance(doc, list):
        return [redact(v, secrets) for v in doc]
    if isinstance(doc, dict):
        return {k: redact(v, secrets) for k, v in doc.items()}
    return doc


def record_lines(text: str, settings: Any, raw: bool) -> list[str] | str | None:
    """A sample record's lines as the source's adapter gives them (``raw``: a plain line wrapped first);
    None for a heartbeat; the refusal's code when the adapter refuses it."""
    from dbuslib.errors import DbusError
    from logprocessor.adapters import Adapted, KafkaRecord, adapt, as_record

    try:
        value = as_record(settings.log_type, text, "pasted") if raw else text
    except DbusError as e:
        return f"the record is refused ({e.code})"
    got = adapt(KafkaRecord(value.encode(), None, 0, 0, 0), settings)
    if not isinstance(got, Adapted):
        return f"the adapter refuses the record ({got.code}: the processor's dead letter)"
    return None if got.heartbeat else list(got.lines)


def record_secrets(
    m: Masking, plan: MaskPlan, text: str, settings: Any, raw: bool, extra: Sequence[Group] = ()
) -> dict[str, str] | str:
    """The secrets of every line of a record (``line_secrets``), or why it is withheld."""
    lines = record_lines(text, settings, raw)
    if isinstance(lines, str):
        return lines
    found: dict[str, str] = {}
    for line in lines or ():
        got = line_secrets(m, plan, line, extra)
        if isinstance(got, str):
            return got
        found.update(got)
    return found


def withheld_reason(secrets: dict[str, str] | str, text: str) -> str | None:
    """Why a record ``text`` with ``secrets`` cannot be shown redacted, or None."""
    if isinstance(secrets, str):
        return secrets
    if redact_text(text, secrets) is None:
        return "a masked column's value is not written in the record as the rules give it"
    return None


def _sorted_out(texts: Sequence[str], secrets_of: Any) -> tuple[list[str | None], dict[str, str]]:
    """Per text, why it is withheld (None: shown), and the secrets of every text together: a value one
    record gives a masked column is redacted in every record of the answer (the same id in a line no masked
    table accepts)."""
    reasons: list[str | None] = []
    every: dict[str, str] = {}
    for text in texts:
        secrets = secrets_of(text)
        reasons.append(withheld_reason(secrets, text))
        if isinstance(secrets, dict):
            every.update(secrets)
    return reasons, every


def viewer_sample(records: list[str], settings: Any, m: Masking, *, mark: Any = None) -> dict[str, Any]:
    """A viewer's sample of a masking source: each record redacted, or left out (counted, with the
    reasons)::

        {"records": ["...", ...], "withheld": 1, "reasons": ["a rule of the masked table 'app' ..."]}
    """
    plan = m.plan()
    if plan is None:
        return {"records": records, "withheld": 0, "reasons": []}
    count = iter(range(1, len(records) + 1))

    def secrets_of(text: str) -> dict[str, str] | str:
        if mark is not None:
            mark(next(count), 0)
        return record_secrets(m, plan, text, settings, raw=False)

    reasons, every = _sorted_out(records, secrets_of)
    shown = [
        redact_text(t, every, strict=False) or "" for t, why in zip(records, reasons, strict=True) if not why
    ]
    out = sorted({why for why in reasons if why})
    return {"records": shown, "withheld": len(records) - len(shown), "reasons": out}


def viewer_preview(
    result: dict[str, Any], groups: Sequence[Group], settings: Any, raw: bool, m: Masking
) -> dict[str, Any]:
    """A preview's answer (``console.rules.preview``) for a viewer of a masking source: each record's
    whole item redacted, or withheld (its text, lines and steps left out, the reason given)."""
    plan = m.plan()
    if plan is None:
        return result
    texts = [item["record"] for item in result["records"]]
    reasons, every = _sorted_out(texts, lambda t: record_secrets(m, plan, t, settings, raw, groups))
    items = []
    for item, why in zip(result["records"], reasons, strict=True):
        if why is None:
            items.append(redact(item, every))
            continue
        gone = {"number": item["number"], "record": None, "refused": None, "heartbeat": None, "lines": []}
        items.append({**gone, "withheld": why})
    return {**result, "records": items}
