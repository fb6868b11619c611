"""``dbus logrules``: a log source's tables and their rules, drafted, tested on sample lines and published
(registered by cli/main.py through ``add_parsers``; docs/logs.md, Rules: draft, publish, test).

    dbus logrules tables --source DS
    dbus logrules add-table --source DS --table T
    dbus logrules import --source DS --table T FILE [--replace] [--active]
    dbus logrules export --source DS --table T [--published [--version N]] [-o FILE]
    dbus logrules show --source DS --table T [--published]
    dbus logrules group --source DS --table T --group G --active|--inactive
    dbus logrules test --source DS --table T --sample FILE [--upto STEP] [--group G] [--published]
                       [--type log_...] [--raw]
    dbus logrules publish --source DS --table T [--no-reload] [--wait SECONDS]
    dbus logrules reload --source DS [--wait SECONDS]

The rules live in the meta store (dbuslib/logstore.py); the model is logprocessor/grammar.py and the draft and
publish operations logprocessor/rules.py. Bad input (an unknown source, table or group, an unreadable file, a
rule that does not check, a draft that cannot be published) exits 2 with a message naming it; an unreachable
meta store or Kafka exits 3.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

from dbuslib.config import LogType
from dbuslib.errors import DbusError, EndpointError

WAIT_HELP = "wait up to SECONDS for the log processor's answer: exit 0 applied, 2 rejected, 1 no answer"


class FileUnreadable(DbusError):
    """A file named on the command line cannot be read (or written): missing, a folder, not UTF-8."""

    code = "LOG_FILE_UNREADABLE"


def add_parsers(sub: Any) -> None:
    lr = sub.add_parser(
        "logrules",
        help="log tables and their rules: tables | add-table | import | export | show | group | test | "
        "check | publish | reload",
        description="A log source's tables and their rule groups, kept in the meta store: a draft you "
        "edit (import, group), test on sample lines (test) and publish as a new version (publish), "
        "which the running log processor applies at once (LOG_PROCESSOR_RELOAD_CONFIG).",
    ).add_subparsers(dest="action", required=True, metavar="ACTION")
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument("--config", default=argparse.SUPPRESS, help="configuration file")
    config.add_argument("--source", required=True, help="log source name under 'log_sources'")
    table = argparse.ArgumentParser(add_help=False, parents=[config])
    table.add_argument("--table", required=True, help="log table name")

    lr.add_parser(
        "tables", parents=[config], help="the source's log tables: status, version, columns, groups"
    ).set_defaults(handler=_piped(tables_cli))
    lr.add_parser(
        "add-table", parents=[table], help="create a log table (status ok, nothing published yet)"
    ).set_defaults(handler=add_table_cli)

    im = lr.add_parser(
        "import",
        parents=[table],
        help="add the groups of an export file to the draft (inactive unless --active)",
        description="Read the original DBus's export file ([{groupName, rules: [{ruleTypeName, "
        "ruleGrammar}]}]), check every rule, and add each group to the table's draft after its "
        "groups, inactive (as the original imports), unless --active. Nothing is published.",
    )
    im.add_argument("file", metavar="FILE", help="the rule file (JSON)")
    im.add_argument("--replace", action="store_true", help="make the file the whole draft")
    im.add_argument("--active", action="store_true", help="import the groups active")
    im.set_defaults(handler=import_cli)

    ex = lr.add_parser("export", parents=[table], help="write the draft (or a published version) as JSON")
    ex.add_argument("--published", action="store_true", help="the published version, not the draft")
    ex.add_argument("--version", type=int, metavar="N", help="published version N (implies --published)")
    ex.add_argument("-o", "--out", metavar="FILE", help="write to FILE (default: standard output)")
    ex.set_defaults(handler=_piped(export_cli))

    sh = lr.add_parser("show", parents=[table], help="the draft groups and their rules, readable")
    sh.add_argument("--published", action="store_true", help="the current published version instead")
    sh.set_defaults(handler=_piped(show_cli))

    gr = lr.add_parser("group", parents=[table], help="make a draft group active or inactive")
    gr.add_argument("--group", required=True, help="the group's name")
    state = gr.add_mutually_exclusive_group(required=True)
    state.add_argument("--active", dest="active", action="store_true", help="publish will include it")
    state.add_argument("--inactive", dest="active", action="store_false", help="publish leaves it out")
    gr.set_defaults(handler=group_cli)

    ts = lr.add_parser(
        "test",
        parents=[table],
        help="run the rules on sample lines, printing the row after every step",
        description="For each line of the sample file (a shipper record, or with --raw a plain text "
        "line), print the row after every rule of each group, numbered as the console numbers them "
        "(step 3 split: [...]), up to --upto. Exit 0, or 1 when a line broke a rule (the rule is named).",
    )
    ts.add_argument("--sample", required=True, metavar="FILE", help="sample lines, one record a line")
    ts.add_argument("--upto", type=int, metavar="STEP", help="stop after rule STEP (1 = the first rule)")
    ts.add_argument("--group", help="only this draft group (active or not)")
    ts.add_argument("--published", action="store_true", help="the published groups, not the draft")
    ts.add_argument(
        "--type",
        dest="log_type",
        choices=get_args(LogType),
        metavar="TYPE",
        help="read the lines as records of this log type, log_rsyslog ... log_ums (default: the source's)",
    )
    ts.add_argument("--raw", action="store_true", help="lines are plain text, wrapped as the type's message")
    ts.set_defaults(handler=_piped(test_cli))

    lr.add_parser(
        "check",
        parents=[table],
        help="check the active draft groups as publish would, publishing nothing",
        description="Every rule of the active draft groups checked (operator, ruleScope, parameters, "
        "regexes, saveAs names: none a UMS system field such as ums_id_, none twice), each group ending in "
        "saveAs, all saving the same columns. Exit 0 with the columns, 2 naming group, rule and field.",
    ).set_defaults(handler=check_cli)

    pb = lr.add_parser(
        "publish",
        parents=[table],
        help="publish the active draft groups as a new version, then reload the processor",
        description="Check the active draft groups (each ends in saveAs, all save the same columns, "
        "every rule checks), store them as version N+1, then send LOG_PROCESSOR_RELOAD_CONFIG on the "
        "source's control topic. Publishing the rules in force again is a no-op that says so.",
    )
    pb.add_argument("--no-reload", action="store_true", help="publish only; send no reload message")
    pb.add_argument("--wait", type=float, default=0.0, metavar="SECONDS", help=WAIT_HELP)
    pb.set_defaults(handler=publish_cli)

    rl = lr.add_parser(
        "reload", parents=[config], help="send LOG_PROCESSOR_RELOAD_CONFIG: the processor reloads its rules"
    )
    rl.add_argument("--wait", type=float, default=0.0, metavar="SECONDS", help=WAIT_HELP)
    rl.set_defaults(handler=reload_cli)


# ---------------------------------------------------------------- the commands


def tables_cli(args: argparse.Namespace) -> int:
    with Session(args) as s:
        rows = [(t, s.store.draft(t)) for t in s.store.tables(args.source, s.schema)]
    if not rows:
        print(f"{args.source}.{s.schema}: no log table (dbus logrules add-table --source {args.source} ...)")
        return 0
    lines = [("TABLE", "STATUS", "VERSION", "GROUPS", "COLUMNS")]
    for t, groups in rows:
        active = sum(g.active for g in groups)
        lines.append((t.table, t.status, str(t.version), f"{active}/{len(groups)}", _columns(t.columns)))
    print(_aligned(lines))
    return 0


def add_table_cli(args: argparse.Namespace) -> int:
    with Session(args) as s:
        t, created = s.store.add_table(args.source, s.schema, args.table)
    what = "created" if created else "exists"
    print(f"{t.where}: {what} (status {t.status}, version {t.version})")
    return 0


def import_cli(args: argparse.Namespace) -> int:
    from logprocessor import rules

    text = read_text(args.file)
    with Session(args) as s:
        t = s.need_table(args.table)
        groups = rules.import_groups(s.store, t, text, args.file, replace=args.replace, active=args.active)
    state = "active" if args.active else "inactive"
    verb = "replaced the draft with" if args.replace else "added"
    names = ", ".join(f"{g.name!r} ({len(g.rules)} rules)" for g in groups)
    print(f"{t.where}: {verb} {len(groups)} group(s), {state}: {names}")
    return 0


def export_cli(args: argparse.Namespace) -> int:
    from logprocessor import grammar, rules

    with Session(args) as s:
        t = s.need_table(args.table)
        if args.published or args.version is not None:
            groups = rules.published_groups(s.store, t, args.version)
        else:
            groups = rules.draft(s.store, t)
    text = grammar.groups_to_json(groups) + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.out).write_text(text, encoding="utf-8")
    except OSError as e:
        msg = f"{args.out}: cannot write: {e.strerror or e}"
        raise FileUnreadable(msg) from None
    print(f"{args.out}: {len(groups)} group(s) of {t.where}")
    return 0


def show_cli(args: argparse.Namespace) -> int:
    with Session(args) as s:
        t = s.need_table(args.table)
        current = s.store.published(t)
        if args.published:
            if current is None:
                print(f"{t.where}: nothing published yet")
                return 0
            shown = [(g["groupName"], True, g.get("rules") or []) for g in json.loads(current.groups)]
        else:
            shown = [(g.name, g.active, json.loads(g.rules)) for g in s.store.draft(t)]
    published = f"version {t.version}: {_columns(t.columns)}" if t.version else "nothing published yet"
    print(f"{t.where}: status {t.status}, {published}")
    if not args.published:
        in_force = [{"groupName": n, "rules": r} for n, a, r in shown if a]
        same = current is not None and json.loads(current.groups) == in_force
        state = f"equal version {t.version}" if same else "differ from the published version"
        print(f"draft: {len(shown)} group(s), {len(in_force)} active; the active groups {state}")
    if not shown:
        print(f"  no draft group (dbus logrules import --source {t.ds} --table {t.table} FILE)")
    for name, active, group_rules in shown:
        where = f"version {t.version}" if args.published else ("active" if active else "inactive")
        print(f"group {name!r}: {where}, {len(group_rules)} rule(s)")
        for i, rule in enumerate(group_rules, 1):
            print(f"  {i:>2} {_show_rule(rule)}")
    return 0


def group_cli(args: argparse.Namespace) -> int:
    with Session(args) as s:
        t = s.need_table(args.table)
        s.store.set_active(t, args.group, args.active)
    state = "active" if args.active else "inactive"
    print(f"{t.where}: group {args.group!r} is {state} in the draft (dbus logrules publish applies it)")
    return 0


def check_cli(args: argparse.Namespace) -> int:
    from logprocessor import rules, rules_jvm

    with Session(args) as s:
        t = s.need_table(args.table)
        groups, columns = rules.check(s.store, t, rules_jvm.engine(s.cfg))
    cols = ", ".join(f"{c.name} {c.type}" for c in columns)
    print(f"{t.where}: the active groups {[g.name for g in groups]} check: columns {cols}")
    return 0


def publish_cli(args: argparse.Namespace) -> int:
    from logprocessor import rules, rules_jvm

    with Session(args) as s:
        t = s.need_table(args.table)
        done = rules.publish(s.store, t, rules_jvm.engine(s.cfg))
    cols = ", ".join(f"{c.name} {c.type}" for c in done.columns)
    if not done.published:
        print(f"{t.where}: the active groups equal version {done.version}: nothing to publish")
        return 0
    change = "new columns" if done.columns_changed else "same columns"
    print(f"{t.where}: version {done.version} published: groups {list(done.groups)}; {change}: {cols}")
    if args.no_reload:
        return 0
    from logprocessor import reload as logreload

    sent = logreload.send(s.cfg, args.source, table=t.table, version=done.version)
    return logreload.wait(s.cfg, args.source, sent, args.wait)


def reload_cli(args: argparse.Namespace) -> int:
    from dbuslib.config import load_config
    from logprocessor import reload as logreload

    cfg = load_config(args.config)
    return logreload.wait(cfg, args.source, logreload.send(cfg, args.source), args.wait)


def test_cli(args: argparse.Namespace) -> int:
    from cli import logtest

    return logtest.run(args)


# ---------------------------------------------------------------- helpers


class Session:
    """The configuration, the log source and an open meta store for one command; the store's failures
    become EndpointError (exit 3) naming it."""

    def __init__(self, args: argparse.Namespace) -> None:
        from dbuslib.config import load_config

        self.cfg = load_config(args.config)
        self.source = self.cfg.log_source(args.source)
        self.ds = args.source
        self.schema = self.source.schema_name(args.source)
        self.store: Any = None

    def __enter__(self) -> Session:
        from dbuslib.logstore import LogStore

        self.url = self.cfg.endpoints.meta_store.url.get_secret_value()
        self.store = LogStore(self.url)
        self._guard(self.store.create_schema)
        return self

    def need_table(self, table: str) -> Any:
        return self.store.need_table(self.ds, self.schema, table)

    def __exit__(self, kind: Any, err: Any, tb: Any) -> None:
        from sqlalchemy.exc import DBAPIError

        self.store.dispose()
        if isinstance(err, DBAPIError):
            raise self._unreachable(err) from err

    def _guard(self, call: Any) -> None:
        from sqlalchemy.exc import DBAPIError

        try:
            call()
        except DBAPIError as e:
            self.store.dispose()
            raise self._unreachable(e) from e

    def _unreachable(self, err: Any) -> EndpointError:
        url = self.store.engine.url
        where = f"{url.host}:{url.port or 3306}" if url.host else str(url.database)
        msg = f"meta store at {where}: {getattr(err, 'orig', None) or err}"
        return EndpointError(msg)


def _piped(handler: Any) -> Any:
    """``handler`` whose reader may go away (``dbus logrules test ... | head``): the rest of the output is
    dropped quietly, as a Unix filter does, instead of a BrokenPipeError traceback."""

    def run(args: argparse.Namespace) -> int:
        try:
            return int(handler(args))
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python flushes at exit
            return 0

    return run


def read_text(path: str) -> str:
    """A file's text; FileUnreadable naming it otherwise."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        msg = f"{path}: not UTF-8 text (byte {e.start})"
        raise FileUnreadable(msg) from None
    except OSError as e:
        msg = f"{path}: cannot read: {e.strerror or e}"
        raise FileUnreadable(msg) from None


def _columns(text: str) -> str:
    return ", ".join(f"{c['name']} {c['type']}" for c in json.loads(text))


def _show_rule(rule: dict[str, Any]) -> str:
    """``split            {ruleScope: "1", ruleType: "string", ruleParamter: " | "}``: each entry JSON-quoted,
    one a line when they do not fit on one."""
    op, grammar = f"{rule.get('ruleTypeName')!s:<16}", rule.get("ruleGrammar") or "[]"
    try:
        entries = json.loads(grammar) if isinstance(grammar, str) else grammar
    except ValueError:
        return f"{op} (ruleGrammar is not JSON: {grammar!r})"
    shown = [
        "{" + ", ".join(f"{k}: {_quote(v)}" for k, v in e.items()) + "}"
        if isinstance(e, dict)
        else json.dumps(e)
        for e in (entries if isinstance(entries, list) else [entries])
    ]
    if len(op) + sum(len(e) + 1 for e in shown) <= 100:
        return f"{op} {' '.join(shown)}"
    return f"{op} " + f"\n{' ' * (len(op) + 6)}".join(shown)


def _quote(v: Any) -> str:
    """A value as the user wrote it, in double quotes (a regex's backslashes stay single)."""
    if not isinstance(v, str):
        return json.dumps(v)
    return '"' + v.replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def _aligned(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows
    ).rstrip()
