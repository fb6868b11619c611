"""``dbus logrules test``: sample lines through a table's rules, printing the rows after every rule, as the
original console's step-by-step preview ("run to this rule", spec §8.3-§8.4) prints them::

    line 1: {"@timestamp":"2024-03-05T02:15:30.123Z",...,"message":"2024-03-05 10:15:30.100 | [WARN] | ..."}
      group 'order_events'
        step 1 keyFilter: ["{\\"@timestamp\\":...}"]
        step 2 toIndex: ["app-01.prod", "2024-03-05 10:15:30.100 | [WARN] | OrderService order=98123 ..."]
        ...
        step 8 saveAs: {"log_time": "2024-03-05 10:15:30.100", "level": "WARN", ..., "amount": 45.5}
        accepted: 1 row

Each line of the sample file is one shipper record of the source's log type (``--type`` another), read by
the processor's own adapter (logprocessor/adapters.py); with ``--raw`` a line is plain text, wrapped as that
type's message first. The groups are the draft's active ones (``--group`` one group, active or not;
``--published`` the version in force). The rules run as logprocessor/operators.py runs them (``steps``).

Exit 0; 1 when a line broke a rule or was refused by the adapter (each is printed with the rule or the
reason named: what the processor sends to the dead-letter topic); 2 for bad input (exit codes of
``dbus logrules``).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field, replace
from typing import Any

from dbuslib.errors import ConfigError
from logprocessor import regexbudget
from logprocessor.adapters import SAMPLE_HOST, as_record
from logprocessor.grammar import Group

SHOWN_RECORD_CHARS = 200  # the record echoed above its steps is cut to this many characters


@dataclass
class Tally:
    """What the sample's lines did (a line of a log_ums record may hold several inputs)."""

    lines: int = 0
    accepted: int = 0  # lines accepted by at least one group
    by_group: dict[str, int] = field(default_factory=dict)  # inputs each group accepted
    missed: int = 0  # lines no group accepted (the unknown table's)
    broken: int = 0  # lines that broke a rule (dead letters)
    refused: int = 0  # records the adapter refused (dead letters)
    heartbeats: int = 0  # shipper heartbeats (no lines)

    def summary(self) -> str:
        groups = ", ".join(f"{g!r} {n}" for g, n in self.by_group.items())
        return (
            f"{self.lines} line(s): {self.accepted} accepted ({groups}), {self.missed} accepted by no group, "
            f"{self.broken} broke a rule, {self.refused} refused by the adapter, "
            f"{self.heartbeats} heartbeat(s)"
        )


def show_rows(rows: list[list[Any]], names: tuple[str, ...] | None) -> list[str]:
    """A step's rows as printed: one JSON array per row (after saveAs, ``{name: value}`` in column order)."""
    out = []
    for row in rows:
        if names is not None and len(names) == len(row):
            out.append("{" + ", ".join(f"{_j(n)}: {_j(v)}" for n, v in zip(names, row, strict=True)) + "}")
        else:
            out.append("[" + ", ".join(_j(v) for v in row) + "]")
    return out


def show_steps(group: Group, line: str, upto: int | None) -> tuple[list[str], str]:
    """The printed steps of one group on one initial line, and the outcome: ``accepted``, ``missed``,
    ``broken``, or ``stopped`` (by ``upto``)."""
    from logprocessor.grammar import save_as_columns
    from logprocessor.operators import steps

    if not group.rules:
        return ["no rules (publish refuses a group without saveAs)"], "missed"
    names = tuple(c.name for c in save_as_columns(group))
    out: list[str] = []
    taken = steps(group, line, min(upto, len(group.rules)) if upto is not None else None)
    for step in taken:
        head = f"step {step.position} {step.op}:"
        if step.error is not None:
            code = f" {step.code}:" if step.code == regexbudget.CODE else ""  # not the usual line error
            where = f"group {group.name!r} rule {step.position} ({step.op})"
            out.append(f"{head} error:{code} {where}: {step.error}")
            return out, "broken"
        if not step.rows:
            out.append(f"{head} no rows: the group does not accept the line")
            return out, "missed"
        shown = show_rows(step.rows, names if step.op == "saveAs" else None)
        if len(shown) == 1:
            out.append(f"{head} {shown[0]}")
        else:
            out.append(f"{head} {len(shown)} rows")
            out += [f"  {s}" for s in shown]
    if upto is not None and upto < len(group.rules):
        out.append(f"stopped after step {upto} of {len(group.rules)}")
        return out, "stopped"
    out.append(f"accepted: {len(taken[-1].rows)} row(s)")
    return out, "accepted"


def run(args: argparse.Namespace) -> int:
    from cli.logrules import Session, read_text
    from logprocessor.adapters import AdapterSettings

    text = read_text(args.sample)
    with Session(args) as s:
        t = s.need_table(args.table)
        groups = pick_groups(s.store, t, args.group, args.published)
    settings = AdapterSettings.of(s.source, s.cfg.path.parent)
    if args.log_type:  # another type's records; a log_json source's host for them when the source has none
        settings = replace(settings, log_type=args.log_type, json_host=settings.json_host or SAMPLE_HOST)
    if args.raw:
        as_record(settings.log_type, "", args.sample)  # refuses log_ums before any line
    most = max(len(g.rules) for g in groups)
    if args.upto is not None and not 1 <= args.upto <= most:
        msg = f"--upto {args.upto}: the groups tested have rules 1 to {most}"
        raise ConfigError(msg)
    tally = Tally(by_group={g.name: 0 for g in groups})
    with regexbudget.budget(s.source.processor.regex_budget_ms):  # each regex's time, as in the processor
        for n, record in enumerate(text.splitlines(), 1):
            if not record.strip():
                continue
            tally.lines += 1
            print(f"line {n}: {_cut(record)}")
            _one_record(settings, n, record, args, groups, tally)
    print(tally.summary())
    return 1 if tally.broken or tally.refused else 0


def _one_record(
    settings: Any, number: int, record: str, args: Any, groups: tuple[Group, ...], tally: Tally
) -> None:
    from logprocessor.adapters import Adapted, KafkaRecord, adapt

    value = (as_record(settings.log_type, record, args.sample) if args.raw else record).encode()
    got = adapt(KafkaRecord(value, None, 0, number - 1, int(time.time() * 1000)), settings)
    if not isinstance(got, Adapted):
        reason = got.message.split(": ", 1)[-1]  # after "record at partition 0, offset N"
        print(f"  refused by the {settings.log_type} adapter: {got.code}: {reason}")
        tally.refused += 1
        return
    if got.heartbeat:
        print(f"  a heartbeat of host {got.host}: no rows (the processor makes it every table's heartbeat)")
        tally.heartbeats += 1
        return
    accepted = broken = stopped = False
    for line in got.lines:
        if len(got.lines) > 1:
            print(f"  input: {_j(line)}")
        for g in groups:
            printed, outcome = show_steps(g, line, args.upto)
            print(f"  group {g.name!r}")
            for p in printed:
                print(f"    {p}")
            if outcome == "accepted":
                tally.by_group[g.name] += 1
                accepted = True
            broken = broken or outcome == "broken"
            stopped = stopped or outcome == "stopped"
    tally.accepted += accepted
    tally.broken += broken
    tally.missed += not (accepted or broken or stopped)


def pick_groups(store: Any, table: Any, name: str | None, published: bool) -> tuple[Group, ...]:
    """The groups to test: the draft's active ones, or one by name, or the published version's."""
    from dbuslib.logstore import NotFoundError
    from logprocessor import rules

    every = rules.published_groups(store, table) if published else rules.draft(store, table)
    if name is not None:
        found = tuple(g for g in every if g.name == name)
        if not found:
            known = ", ".join(repr(g.name) for g in every) or "none"
            where = f"version {table.version}" if published else "the draft"
            msg = f"{table.where}: {where} has no group {name!r} (groups: {known})"
            raise NotFoundError(msg)
        return found
    chosen = tuple(g for g in every if g.active)
    if not chosen:
        known = ", ".join(repr(g.name) for g in every) or "none"
        msg = f"{table.where}: the draft has no active group (groups: {known}); test one with --group NAME"
        raise NotFoundError(msg)
    return chosen


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_RECORD_CHARS else f"{text[: SHOWN_RECORD_CHARS - 3]}..."
