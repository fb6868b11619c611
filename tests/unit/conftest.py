"""Fixtures the unit tests share."""

import pytest

from dbuslib.logstore import LogStore


@pytest.fixture
def log_store(tmp_path):
    """The meta store's log tables (dbuslib/logstore.py) on SQLite in the test's folder, schema created twice
    (idempotent)."""
    s = LogStore(f"sqlite:///{tmp_path / 'meta.db'}")
    s.create_schema()
    s.create_schema()
    yield s
    s.dispose()
