"""What a Spark job ships to its executors, which may be other machines (docs/deploy.md).

- The configuration, as a *document*: the loaded configuration as JSON, secrets included (they may come
  from the environment or files of the submitting machine only), carried in the job itself (a Python UDF's
  closure, a Java UDF's field). An executor never opens the driver's configuration file.
- DBus's code, as one zip for ``--py-files`` (``code_zip``): the packages as installed, from a checkout or
  from site-packages. Executors bring the third-party libraries (a packed venv through ``spark.archives``,
  or the Workers' own Python).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import io
import json
import os
import zipfile
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr, ValidationError

from dbuslib.errors import ConfigError

if TYPE_CHECKING:
    from dbuslib.config import DbusConfig

# The packages of DBus a stage's executors import (the CLI stays on the submitting machine).
PACKAGES = (
    "ums",
    "dbuslib",
    "binlog",
    "extractor",
    "dispatcher",
    "appender",
    "fullpuller",
    "heartbeat",
    "logprocessor",
)
# The environment variable that carries the document to a sidecar process (dbuslib/sidecar.py).
DOCUMENT_ENV = "DBUS_CONFIG_DOCUMENT"


def _plain(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return value


def config_document(cfg: DbusConfig) -> str:
    """``cfg`` as the JSON document executors load (``load_document``): every key, secrets revealed, and
    the path it was read from (relative paths resolve against its folder; messages name it)."""
    data = _plain(cfg.model_dump(mode="python", by_alias=True))
    data["path"] = str(cfg.path)
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


@functools.lru_cache(maxsize=8)
def load_document(text: str) -> DbusConfig:
    """The configuration of a ``config_document``, loaded once per process and document."""
    from dbuslib.config import DbusConfig

    try:
        data = json.loads(text)
    except ValueError as e:
        msg = f"the configuration document shipped with the job is not JSON: {e}"
        raise ConfigError(msg) from None
    try:
        return DbusConfig.model_validate(data)
    except ValidationError as e:
        msg = f"the configuration document shipped with the job (from {data.get('path')}) is not valid: {e}"
        raise ConfigError(msg) from None


def package_dirs() -> dict[str, Path]:
    """Where each of ``PACKAGES`` is imported from here (a checkout, or site-packages)."""
    dirs = {}
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            msg = f"DBus's package {name!r} cannot be imported here: install DBus (pip install .)"
            raise ConfigError(msg)
        dirs[name] = Path(spec.origin).parent
    return dirs


def _code_files() -> list[tuple[str, Path]]:
    files = []
    for name, folder in package_dirs().items():
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if path.is_file() and "__pycache__" not in rel.parts and path.suffix not in (".pyc", ".class"):
                files.append((f"{name}/{rel.as_posix()}", path))
    return files


def cache_root() -> Path:
    """DBus's cache on this machine: ``$XDG_CACHE_HOME/dbus``, else ``~/.cache/dbus``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dbus"


def code_zip(cache_dir: Path | None = None) -> Path:
    """A zip of ``PACKAGES`` for ``--py-files``, named by a hash of its content (so a changed file makes a
    new zip, and an unchanged tree reuses the one made before), in ``cache_dir`` (default
    ``$XDG_CACHE_HOME/dbus``, else ``~/.cache/dbus``)."""
    files = _code_files()
    digest = hashlib.sha256()
    contents = []
    for arcname, path in files:
        data = path.read_bytes()
        contents.append((arcname, data))
        digest.update(arcname.encode() + b"\0" + hashlib.sha256(data).digest())
    folder = cache_dir or cache_root()
    target = folder / f"dbus-code-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in contents:
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))  # the same bytes every time
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    folder.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    partial.write_bytes(buffer.getvalue())
    partial.replace(target)  # atomic: a concurrent submit sees the whole zip or none
    return target
