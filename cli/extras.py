"""What a ``dbus`` command needs installed, checked once before it runs (cli/main.py).

DBus installs in two ways from one package (pyproject.toml): the base requirements are the consumer
client's (``pip install 'dbus-cdc[client]'``: dbusclient, ``dbus replicate``, ``dbus config``, ``dbus
topics``), and the ``server`` extra adds what the stages, the console and the commands that start or serve
them import (pyspark, mysql-replication, Flask, ...: ``pip install 'dbus-cdc[server]'``). Every command
needs the server extra but those cli/main.py marks ``without_server``. Without it such a command stops
before it does anything, with one line (here folded) naming the install, and exit 7 (docs/errors.md)::

    dbus: MISSING_EXTRA: dbus submit needs the server extra of dbus-cdc (not installed: pyspark,
    mysql-replication, ..., regex): pip install 'dbus-cdc[server]'

What the extra holds is read from the installed package's own metadata (``Requires-Dist: pyspark==4.2.0;
extra == "server"``), so this module lists no library. DBus run from a source tree it was not installed
from has no such metadata: nothing is checked, and a missing library fails where it is imported.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from importlib import metadata

from dbuslib.errors import DbusError

DIST = "dbus-cdc"
SERVER = "server"
INSTALL = f"pip install '{DIST}[{SERVER}]'"

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA = re.compile(r"""\bextra\s*==\s*['"]([^'"]+)['"]""")


class MissingExtraError(DbusError):
    """A ``dbus`` command needs an extra of DBus that is not installed; names the command, what is missing
    and the ``pip install`` that brings it."""

    code = "MISSING_EXTRA"


def requirement_name(line: str) -> str | None:
    """The distribution a requirement names (a ``Requires-Dist`` line or pyproject.toml's):
    ``confluent-kafka[schemaregistry]==2.16.1; extra == "server"`` -> ``confluent-kafka``."""
    name = _NAME.match(line)
    return name.group(1) if name is not None else None


def marker_extra(line: str) -> str | None:
    """The extra a requirement's environment marker names (``extra == "server"``), if any."""
    marker = _EXTRA.search(line.partition(";")[2])
    return marker.group(1) if marker is not None else None


def extra_requirements(requires: Iterable[str], extra: str) -> list[str]:
    """The distribution names among ``requires`` (``Requires-Dist`` lines) that only ``extra`` brings."""
    names = []
    for line in requires:
        name = requirement_name(line)
        if marker_extra(line) == extra and name is not None:
            names.append(name)
    return names


def installed(name: str) -> bool:
    """Whether a distribution of that name is installed beside DBus."""
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def missing(
    extra: str = SERVER, is_installed: Callable[[str], bool] = installed, dist: str = DIST
) -> list[str]:
    """The requirements of ``extra`` that are not installed, in pyproject.toml's order; none when DBus
    itself is not an installed distribution (a source tree on ``sys.path``)."""
    try:
        requires = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return []
    return [name for name in extra_requirements(requires, extra) if not is_installed(name)]


def error(command: str, absent: list[str], module: str | None = None) -> MissingExtraError:
    """The error of ``dbus <command>`` run without the server extra (``absent``: what it lacks)."""
    failed = f"; no module {module!r}" if module else ""
    msg = (
        f"dbus {command} needs the {SERVER} extra of {DIST} (not installed: {', '.join(absent)}{failed}): "
        f"{INSTALL}"
    )
    return MissingExtraError(msg)


def check(command: str) -> None:
    """MissingExtraError, before anything runs, when ``dbus <command>`` lacks the server extra."""
    absent = missing()
    if absent:
        raise error(command, absent)


def explain(command: str, err: ModuleNotFoundError) -> MissingExtraError | None:
    """A command marked ``without_server`` that imported a library the server extra brings: the same
    error, naming the module; None when the server extra is whole (``err`` is then a bug of its own)."""
    absent = missing()
    return error(command, absent, err.name) if absent else None
