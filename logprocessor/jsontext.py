"""JSON text as the log operators read and write it (pure): numbers kept as written, keys in input order.

``loads`` is strict JSON (RFC 8259, no ``NaN``) whose numbers come back as ``Num``, a ``str`` holding the
number's text, so ``dumps`` writes ``12.50`` back as ``12.50``. ``dumps`` is compact (no spaces), keys in
the order of the input, strings escaped as ``json.dumps(..., ensure_ascii=False)`` does (``"``, ``\\`` and
control characters; nothing else). The original wrote fastjson's text, keys sorted (docs/logs.md,
"Where DBus differs from the original").

JSON nested deeper than ``MAX_DEPTH`` (512) objects and arrays is not read: ``loads`` says it is nested too
deeply, as the JVM engine's ``dbus.jvm.logrules.Json`` does at the same depth, so both engines decide alike
(a row or the same line error) at any depth. Python's own limit (a ``RecursionError``, whose depth hangs on
the caller's stack) never decides: on one, ``room`` raises the recursion limit enough for ``MAX_DEPTH``
levels above the caller's frames and the work runs again.

``JsonPath`` is the subset of Jayway JsonPath the ``jsonPath`` operator accepts; ``dotted_keys`` is the
fastjson path of ``flattenJsonArray``. A path outside them is refused when rules are published.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from types import FrameType
from typing import Any, TypeVar

MAX_DEPTH = 512  # objects and arrays inside one another; the JVM engine's Json.MAX_DEPTH

# A string (or an unterminated one, to the end), or a bracket: the depth is counted outside strings.
_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)


class Num(str):
    """A JSON number, as its text in the input (``12.50``, ``1E5``, ``-0``)."""

    __slots__ = ()


class JsonTextError(ValueError):
    """Text that is not JSON, or a path outside the supported subset."""


def _no_constant(name: str) -> Any:
    msg = f"{name} is not JSON"
    raise ValueError(msg)


def depth(text: str) -> int:
    """The deepest nesting of objects and arrays in ``text`` (brackets inside strings not counted)."""
    level = deepest = 0
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token in "[{":
            level += 1
            deepest = max(deepest, level)
        elif token in "]}":
            level -= 1
    return deepest


def loads(text: str) -> Any:
    """Strict JSON -> dict (input key order) / list / str / ``Num`` / bool / ``None``; nested deeper than
    ``MAX_DEPTH`` is ``JsonTextError`` (not JSON: nested too deeply)."""
    if text.count("[") + text.count("{") > MAX_DEPTH and depth(text) > MAX_DEPTH:
        msg = f"not JSON: nested too deeply (more than {MAX_DEPTH} levels)"
        raise JsonTextError(msg)
    try:
        return with_room(json.loads, text, parse_int=Num, parse_float=Num, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        msg = f"not JSON: {e}" if not isinstance(e, RecursionError) else "not JSON: nested too deeply"
        raise JsonTextError(msg) from None


T = TypeVar("T")


def with_room(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, run again after ``room()`` when it meets Python's recursion limit."""
    try:
        return fn(*args, **kwargs)
    except RecursionError:
        room()
        return fn(*args, **kwargs)


def room() -> None:
    """A recursion limit with room for ``MAX_DEPTH`` nested values (a few frames each: the C parser, the
    writer's generators, a JsonPath scan) above the caller's frames. Never lowered: another thread may be
    deep in its own values."""
    frame: FrameType | None = sys._getframe()
    used = 0
    while frame is not None:
        used, frame = used + 1, frame.f_back
    need = used + 4 * MAX_DEPTH + 200
    if sys.getrecursionlimit() < need:
        sys.setrecursionlimit(need)


def loads_object(text: str | None) -> dict[str, Any]:
    """A JSON object, or ``JsonTextError`` naming what the text is instead."""
    if text is None:
        msg = "null is not a JSON object"
        raise JsonTextError(msg)
    try:
        value = loads(text)
    except JsonTextError as err:
        msg = f"not a JSON object ({err})"
        raise JsonTextError(msg) from None
    if not isinstance(value, dict):
        msg = f"not a JSON object ({_kind(value)})"
        raise JsonTextError(msg)
    return value


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Num):
        return "a number"
    return "a string" if isinstance(value, str) else json.dumps(value)


def dumps(value: Any) -> str:
    """Compact JSON text; ``Num`` as written, keys in their order.

    >>> dumps(loads('{"b": 12.50, "a": [1, {"x": null}]}'))
    '{"b":12.50,"a":[1,{"x":null}]}'
    """
    try:
        return with_room(lambda: "".join(_dump(value)))
    except RecursionError:
        msg = "JSON nested too deeply"
        raise JsonTextError(msg) from None


def _dump(value: Any) -> Iterator[str]:
    if isinstance(value, Num):
        yield str.__str__(value)
    elif isinstance(value, str):
        yield json.dumps(value, ensure_ascii=False)
    elif value is None or isinstance(value, bool):
        yield json.dumps(value)
    elif isinstance(value, dict):
        yield "{"
        for i, (k, v) in enumerate(value.items()):
            yield ("," if i else "") + json.dumps(k, ensure_ascii=False) + ":"
            yield from _dump(v)
        yield "}"
    else:
        yield "["
        for i, v in enumerate(value):
            yield "," if i else ""
            yield from _dump(v)
        yield "]"


def as_text(value: Any) -> str | None:
    """fastjson's ``getString``: a string as is, ``null`` -> ``None``, anything else its JSON text."""
    if value is None:
        return None
    if isinstance(value, str) and not isinstance(value, Num):
        return value
    return dumps(value)


# ---------------------------------------------------------------- jsonPath (Jayway subset)

_TOKEN = re.compile(
    r"""\.\.(?P<scan>[^.\[\]()\s*]+)      # ..name      deep scan
      | \.\.\[\s*(?P<scanq>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\s*\]   # ..['key']
      | \.(?P<star>\*)                    # .*
      | \.(?P<name>[^.\[\]()\s*]+)        # .name
      | \[\s*(?P<quoted>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\s*\]       # ['key'] ["key"]
      | \[\s*(?P<index>-?[0-9]+)\s*\]     # [0] [-1]
      | \[\s*(?P<all>\*)\s*\]             # [*]
    """,
    re.VERBOSE,
)


_SUBSET = "$.a.b, $['a.b'], $.a[0], $.a[-1], $.a[*], $.*, $..a"


@dataclass(frozen=True)
class JsonPath:
    """A compiled path: ``steps`` of (kind, argument), kind ``key`` | ``index`` | ``all`` | ``scan``.

    The subset: ``$`` then any of ``.name``, ``['name']`` / ``["name"]`` (a key with dots or spaces),
    ``[n]`` (negative from the end), ``[*]`` / ``.*`` (every element or value), ``..name`` /
    ``..['name']`` (``name`` at any depth, outer first). A path without ``$`` gets ``$.`` in front, as
    Jayway does. Filters ``[?(..)]``, slices ``[1:3]``, unions ``[0,1]`` and functions ``.length()`` are
    outside it. A path with ``*`` or ``..`` is *indefinite*: its result is a JSON array of every match
    (``[]`` for none); a definite path gives its one value, or nothing (the operator writes ``""``).
    """

    text: str
    steps: tuple[tuple[str, str | int], ...]

    @property
    def definite(self) -> bool:
        return all(kind in ("key", "index") for kind, _ in self.steps)

    def find(self, doc: Any) -> list[Any]:
        """Every match, in document order."""
        return with_room(self._find, doc)

    def _find(self, doc: Any) -> list[Any]:
        nodes = [doc]
        for kind, arg in self.steps:
            nodes = [hit for node in nodes for hit in _step(kind, arg, node)]
        return nodes


def _step(kind: str, arg: str | int, node: Any) -> Iterator[Any]:
    if kind == "key":
        if isinstance(node, dict) and arg in node:
            yield node[arg]
    elif kind == "index":
        if isinstance(node, list) and isinstance(arg, int) and -len(node) <= arg < len(node):
            yield node[arg]
    elif kind == "all":
        if isinstance(node, (dict, list)):
            yield from node.values() if isinstance(node, dict) else node
    else:
        yield from _scan(arg, node)


def _scan(key: str | int, node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        if key in node:
            yield node[key]
        for v in node.values():
            yield from _scan(key, v)
    elif isinstance(node, list):
        for v in node:
            yield from _scan(key, v)


def _unquote(quoted: str) -> str:
    return re.sub(r"\\(.)", r"\1", quoted[1:-1])


@lru_cache(maxsize=512)
def compile_path(text: str | None) -> JsonPath:
    """The path, or ``JsonTextError`` naming where it leaves the subset."""
    if text is None or not text.strip():
        msg = "the JsonPath is missing"
        raise JsonTextError(msg)
    body = text.strip()
    body = body[1:] if body.startswith("$") else "." + body if not body.startswith("[") else body
    steps: list[tuple[str, str | int]] = []
    pos = 0
    while pos < len(body):
        m = _TOKEN.match(body, pos)
        if not m:
            msg = f"JsonPath {text!r}: {body[pos:]!r} is outside the supported subset ({_SUBSET})"
            raise JsonTextError(msg)
        if m["scan"] or m["scanq"]:
            steps.append(("scan", m["scan"] or _unquote(m["scanq"])))
        elif m["star"] or m["all"]:
            steps.append(("all", "*"))
        elif m["name"] or m["quoted"]:
            steps.append(("key", m["name"] or _unquote(m["quoted"])))
        else:
            steps.append(("index", int(m["index"])))
        pos = m.end()
    return JsonPath(text, tuple(steps))


def dotted_keys(path: str) -> tuple[str, ...]:
    """``flattenJsonArray``'s fastjson path: keys joined by dots (``order.items``). ``JsonTextError`` for an
    empty key or a character of fastjson's path syntax (``$ [ ] * ( ) ? @ '``), outside the subset."""
    keys = tuple(path.split("."))
    if any(not k for k in keys) or re.search(r"[$\[\]*()?@'\"]", path):
        msg = f"path {path!r} is not keys joined by dots (order.items)"
        raise JsonTextError(msg)
    return keys
