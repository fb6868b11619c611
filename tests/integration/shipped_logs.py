"""A log source of a test's own, shipped by an rsyslogd of its own: what test_demo_logs and test_logs_abnormal
share.

``shipped_log_source(tmp_path, cfg, prefix)`` writes a throwaway configuration (``cfg``'s, with
one log_rsyslog source ``pytest_<prefix>_<hex>`` watching ``tmp_path/logs/*.log``, checkpoints under
``tmp_path``: ``demolog.own_source_config``), starts an rsyslogd for it through the stack's script
(``cli.stages.private_rsyslog``, ``RSYSLOG_HOME=tmp_path/rsyslog``; it creates the raw topic), and yields a
``ShippedSource``; afterwards rsyslogd is stopped, the source's topics deleted and its rules dropped from
the meta store (``demolog.drop_own_source``). The stack's rsyslog and its topics are never touched.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cli import demolog
from cli.stages import private_rsyslog
from dbuslib.config import DbusConfig


@dataclass(frozen=True)
class ShippedSource:
    cfg: DbusConfig
    ds: str
    home: Path  # the test's tmp_path: dbus.yaml, logs/, rsyslog/

    def rsyslog(self, command: str, down_s: float = 2) -> None:
        """``bash stack/stack.sh <command> rsyslog`` for this source's rsyslogd."""
        private_rsyslog(command, self.home / "rsyslog", self.cfg.path, down_s)

    def rsyslog_log(self) -> str:
        """rsyslogd's own messages (start, stop, errors)."""
        return (self.home / "rsyslog" / "log" / "rsyslogd.log").read_text(errors="replace")


@contextmanager
def shipped_log_source(tmp_path: Path, cfg: DbusConfig, prefix: str) -> Iterator[ShippedSource]:
    ds = f"pytest_{prefix}_{uuid.uuid4().hex[:8]}"
    source = ShippedSource(demolog.own_source_config(cfg, ds, tmp_path), ds, tmp_path)
    source.rsyslog("up")  # creates the raw topic
    try:
        yield source
    finally:
        source.rsyslog("down")
        demolog.drop_own_source(source.cfg, ds)
