"""What the meta store's two faces share (``dbuslib.metastore.MetaStore``, the stages' schema versions and
pulls; ``dbuslib.logstore.LogStore``, the log tables and their rules): one SQLAlchemy engine on the meta
store's URL, their tables created when missing, and the retry of a running stage.

A subclass names its tables (``METADATA``) and the calls a running stage may repeat (``RETRIED``); with a
``retry`` policy (``RetryPolicy.of(cfg)``) each of those rides a restart of the database within the
policy's budget, then raises ``RetriesExhausted``; without one (the CLI) the first failure is raised.
"""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy import MetaData, create_engine
from sqlalchemy.exc import OperationalError

from dbuslib.retry import RetryPolicy, retrying


class SqlStore:
    METADATA: ClassVar[MetaData]
    RETRIED: ClassVar[tuple[str, ...]] = ()

    def __init__(self, url: str, retry: RetryPolicy | None = None) -> None:
        self.engine = create_engine(url, pool_pre_ping=True, pool_recycle=3600)
        if retry is not None:
            where = f"meta store at {self.engine.url.host}:{self.engine.url.port or 3306}"
            for name in self.RETRIED:  # instance attributes shadow the methods
                setattr(self, name, retrying(retry, f"{where}: {name}", getattr(self, name)))

    def create_schema(self) -> None:
        """Create the tables if missing; a concurrent creator winning the race is fine."""
        try:
            self.METADATA.create_all(self.engine)
        except OperationalError as e:
            if "already exists" not in str(e):
                raise

    def dispose(self) -> None:
        self.engine.dispose()
