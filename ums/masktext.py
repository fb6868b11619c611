"""Masked data messages written from the JVM's lines, touching only the masked columns' texts (pure).

The unmasked path (ums.text) writes each tuple around the JVM's line as it is. A masked table's line
differs from it only in its masked columns, so here each line is cut into its column texts, each masked
column's text is read (``null``, a string without escapes, else ``json.loads``), passed through the
table's ``ColumnMask`` (ums.masking: every guarantee of its docstring holds, errors are counted there)
and written back as the text ``ums.to_json`` writes for the result; the other columns keep the JVM's
text. Messages are cut where the unmasked path cuts them (by the unmasked lines' sizes, as
``appender.convert.rendered_messages`` then ``masked`` do): the output is byte for byte that of the
value path (tests/unit/test_ums_masktext.py holds the two to each other).

A line is cut with ``bytes.split(b",")``: the column texts are JSON scalars, so a comma is either a
separator or inside a string; when the split gives exactly one part per column, every comma was a
separator. Otherwise (a string holding a comma) that one row is parsed with ``json.loads`` and written
whole with the message encoder's rendering, as the value path does.

The work is done per event, column by column (the split lines transposed with ``zip``): md5/sha256 with
a fixed salt and truncate to a string type have shortcuts on JSON strings without escapes (the same
text as the rule gives; anything else goes to the rule); the other rules' texts are kept per clear
text (and salt) up to ``_CACHE_LIMIT``, except a value that fell back to the default, so every such
value is still counted in the mask's ``errors``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import partial
from json.encoder import encode_basestring
from typing import Any

from ums.encoding import dumps_compact
from ums.masking import _STRINGS, ColumnMask, TableMask, _hash, _truncate
from ums.message import ProtocolType, UmsField, UmsSchema
from ums.namespace import Namespace
from ums.scalars import JsonValue
from ums.text import cached_prefix, event_messages

_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def masked_prefix(
    ns: Namespace,
    fields: tuple[UmsField, ...],
    batch_id: int = 0,
    protocol: ProtocolType = ProtocolType.DATA_INCREMENT_DATA,
) -> bytes:
    """``{"protocol":...,"schema":...,"payload":[`` of a data message with the (masked) ``fields``."""
    key = ("fields", ns, fields, batch_id, protocol)
    return cached_prefix(key, protocol, lambda: UmsSchema(ns, fields, batch_id))


def _value(text: bytes) -> JsonValue:
    """The JSON value of one column text as the JVM wrote it (what ``json.loads`` of the line gives)."""
    if text == b"null":
        return None
    if text[:1] == b'"' and b"\\" not in text:
        return text[1:-1].decode("utf-8")
    return json.loads(text)


def _text(value: JsonValue) -> bytes:
    """The text ``ums.to_json`` writes for one value."""
    if type(value) is str:
        return encode_basestring(value).encode("utf-8")
    return _encode(value).encode("utf-8")


_CACHE_LIMIT = 4096  # masked texts kept per column (clear texts of low-cardinality columns: status, flags)
Fast = Callable[[bytes], "bytes | None"]


def _fast_hash(algo: str, salt: bytes) -> Fast:
    """md5/sha256 with a fixed salt on a JSON string without escapes (its bytes are the value's UTF-8):
    the hex digest of the bytes and the salt, as ``_hash`` gives; None (the generic path, which counts
    the error) when the digest equals the clear value."""
    new = getattr(hashlib, algo)

    def fast(text: bytes) -> bytes | None:
        if text == b"null":
            return text
        if text[:1] != b'"' or b"\\" in text:
            return None
        body = text[1:-1]
        digest = new(body + salt).hexdigest().encode()
        return None if digest == body else b'"' + digest + b'"'

    return fast


def _fast_truncate(length: int | None) -> Fast:
    """truncate to a string type on a JSON string without escapes: the first ``length`` characters
    (no escapes in the input, so none needed in a prefix of it)."""

    def fast(text: bytes) -> bytes | None:
        if text == b"null":
            return text
        if text[:1] != b'"' or b"\\" in text:
            return None
        if length is None or len(text) - 2 <= length:  # bytes >= characters: nothing cut
            return text
        return b'"' + text[1:-1].decode("utf-8")[:length].encode("utf-8") + b'"'

    return fast


def _fast_of(mask: ColumnMask) -> Fast | None:
    """A shortcut giving ``_text(mask(value))`` from the column text for the common rules, or None.
    Only without ``salt_field`` (then ``encode`` is the rule's own function)."""
    encode = mask.encode
    if mask.salt_field is not None or not isinstance(encode, partial) or mask.out_type not in _STRINGS:
        return None
    if encode.func is _hash and encode.args[0] in ("md5", "sha256"):
        try:
            return _fast_hash(encode.args[0], mask.fixed_salt.encode("utf-8"))
        except UnicodeEncodeError:
            return None
    if encode.func is _truncate:
        return _fast_truncate(encode.args[0])
    return None


def _generic(mask: ColumnMask, text: bytes, salt: bytes | None) -> bytes:
    """The rule itself on the column's value (and the salt column's clear value)."""
    return _text(mask(_value(text), None if salt is None else _value(salt)))


Column = Callable[[list[bytes], "list[bytes] | None"], list[bytes]]


def _column(mask: ColumnMask) -> Column:
    """``(column texts, salt column texts or None) -> masked column texts`` for one column of an event.

    truncate: its shortcut alone, a plain ASCII string cut as bytes (cheap; its values are seldom
    repeated). The other rules: the masked text kept per clear text (and salt), up to ``_CACHE_LIMIT``
    texts, computed by the shortcut or the rule; a value that fell back to the default is not kept, so
    each such value is counted in ``errors``.
    """
    fast = _fast_of(mask)
    encode = mask.encode
    if fast is not None and isinstance(encode, partial) and encode.func is _truncate:
        length = encode.args[0]

        def one(text: bytes) -> bytes:
            done = fast(text)
            return _generic(mask, text, None) if done is None else done

        if length is None:
            return lambda texts, salts: [one(t) for t in texts]
        keep = length + 2  # texts this long are kept as they are (when strings without escapes)

        def truncate(texts: list[bytes], salts: list[bytes] | None) -> list[bytes]:
            return [
                t[: length + 1] + b'"'
                if len(t) > keep and t[0] == 34 and t.isascii() and 92 not in t  # '"' and no '\\'
                else one(t)
                for t in texts
            ]

        return truncate
    cache: dict[Any, bytes] = {}

    def cached(text: bytes, salt: bytes | None) -> bytes:
        key = text if salt is None else (text, salt)
        done = cache.get(key)
        if done is not None:
            return done
        done = fast(text) if fast is not None else None
        if done is None:
            errors = mask.errors[mask.name]
            done = _generic(mask, text, salt)
            if mask.errors[mask.name] != errors:
                return done
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[key] = done
        return done

    def column(texts: list[bytes], salts: list[bytes] | None) -> list[bytes]:
        if salts is not None:
            return list(map(cached, texts, salts))
        out = list(map(cache.get, texts))  # texts seen before, at C speed
        if None not in out:
            return out  # type: ignore[return-value]
        return [cached(t, None) if o is None else o for o, t in zip(out, texts, strict=True)]

    return column


class LineMask:
    """One table version's masking on the JVM's lines: ``mask(lines) -> masked lines``.

    ``users``: the number of user columns (the line's parts); built from a ``TableMask`` whose fields
    are the system fields then one per user column, every salt column a user column. Per masked column,
    over all the event's lines at once: ``_column_text`` (a shortcut for the common rules, else the rule
    itself, ``ColumnMask``, with every guarantee of ums.masking)."""

    def __init__(self, mask: TableMask, system: int, users: int) -> None:
        self.users = users
        self.columns: tuple[tuple[int, int | None, Column], ...] = tuple(
            (c.index - system, None if c.salt_index is None else c.salt_index - system, _column(c.mask))
            for c in mask.columns
        )
        self.row: Callable[[tuple[JsonValue, ...]], tuple[JsonValue, ...]] = mask.apply_row
        self.system = system

    @classmethod
    def of(cls, mask: TableMask, system: int, users: int) -> LineMask | None:
        """None when a masked or salt column is a system field (then the value path is taken)."""
        for c in mask.columns:
            if c.index < system or (c.salt_index is not None and c.salt_index < system):
                return None
        return cls(mask, system, users)

    def __call__(self, lines: list[bytes]) -> list[bytes]:
        rows = [line.split(b",") for line in lines]
        users = self.users
        if not all(map(users.__eq__, map(len, rows))):  # a string holds a comma: that line parsed
            whole = iter(self([line for line, r in zip(lines, rows, strict=True) if len(r) == users]))
            return [
                next(whole) if len(r) == users else self._parsed(line)
                for r, line in zip(rows, lines, strict=True)
            ]
        if not rows:
            return []
        clear = list(zip(*rows, strict=True))  # the column texts (every comma a separator)
        out: list[Any] = clear.copy()
        for i, s, column in self.columns:
            out[i] = column(clear[i], None if s is None else clear[s])  # type: ignore[arg-type]
        return list(map(b",".join, zip(*out, strict=True)))

    def _parsed(self, line: bytes) -> bytes:
        """A line whose strings hold commas: parsed, masked and written whole."""
        values = json.loads(b"[" + line + b"]")
        masked = self.row((None,) * self.system + tuple(values))[self.system :]
        return dumps_compact(list(masked))[1:-1].encode("utf-8")


def masked_event_messages(
    prefix: bytes,
    line_mask: LineMask,
    ums_id: str,
    ums_ts: str,
    op: str,
    lines: list[bytes],
    before_update_image: bool,
    max_tuples: int,
    max_bytes: int,
) -> list[bytes]:
    """``ums.text.event_messages`` of one rows event with its lines masked: tuples cut into messages by
    the unmasked lines' sizes (as the value path cuts them), then written with the masked lines.
    ``prefix``: ``masked_prefix`` of the masked fields. An update's ``b`` lines are masked only when
    they are written (``before_update_image``)."""
    if op == "u" and not before_update_image:
        masked: list[bytes] = [b""] * len(lines)
        masked[1::2] = line_mask(lines[1::2])
    else:
        masked = line_mask(lines)
    return event_messages(
        prefix, ums_id, ums_ts, op, masked, before_update_image, max_tuples, max_bytes, sized_by=lines
    )
