"""The ``engine`` that ``logprocessor.rules.check`` and ``publish`` ask about a table's groups
(logprocessor/rules_jvm.py), for tests: ``accepts_all`` where a test is about the meta store's versions and
columns, not the engine; ``jvm()`` the real one, on the jar the tests build (tests/unit/jvm_jar.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from logprocessor.grammar import Group


def accepts_all(groups: Sequence[Group]) -> list[str]:
    return []


def classpath() -> str:
    """The tests' jar (built when it is older than a source) and pyspark's jars."""
    import jvm_jar

    from dbuslib import connectors

    return os.pathsep.join([str(jvm_jar.build()), str(connectors.pyspark_jars() / "*")])


def jars_file(folder: Path) -> Path:
    """A ``spark.jars_file`` in ``folder`` naming the tests' jar: for a command (``dbus logrules check``,
    ``publish``) run with a configuration of the test's own, whose publishing asks the JVM engine."""
    import jvm_jar

    path = folder / "spark.jars"
    path.write_text(str(jvm_jar.build()))
    return path


def jvm() -> Callable[[Sequence[Group]], list[str]]:
    from logprocessor import rules_jvm

    return rules_jvm.engine_of(classpath())
