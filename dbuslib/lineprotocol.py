"""InfluxDB's line protocol, read: what DBus's writers send (influxdb-client's ``Point.to_line_protocol``),
as the Prometheus exporter receives it (dbuslib/promexport.py). Pure.

A line is ``measurement[,tag=value...] field=value[,field=value...] [timestamp]``: a backslash escapes a
comma or a space in the measurement, a comma, an equals sign or a space in a tag key, tag value or field
key; a field value is a float (``1.5``, ``1e3``), an integer (``12i``), an unsigned integer (``12u``), a
boolean (``t``, ``true``, ``F``, ...) or a string in double quotes (``\\"`` and ``\\\\`` escaped).
https://docs.influxdata.com/influxdb/v1/write_protocols/line_protocol_reference/
"""

from __future__ import annotations

from dataclasses import dataclass

FieldValue = float | int | bool | str

_TRUE = {"t", "T", "true", "True", "TRUE"}
_FALSE = {"f", "F", "false", "False", "FALSE"}


class LineProtocolError(ValueError):
    """A line that is not InfluxDB line protocol; the message names the line's number and the reason."""


@dataclass(frozen=True)
class Sample:
    """One line: ``time_ns`` None when the line has no timestamp (the receiver's clock then)."""

    measurement: str
    tags: tuple[tuple[str, str], ...]
    fields: tuple[tuple[str, FieldValue], ...]
    time_ns: int | None


def _split(text: str, seps: str, escapable: str = ",= \\") -> tuple[str, int]:
    """The part of ``text`` up to the first unescaped character of ``seps``, each backslash before one of
    ``escapable`` dropped, and the index where it ends (``len(text)`` when no separator came)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in escapable:
            out.append(text[i + 1])
            i += 2
            continue
        if c in seps:
            break
        out.append(c)
        i += 1
    return "".join(out), i


def _field_value(text: str) -> FieldValue:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if text[-1:] in ("i", "u") and len(text) > 1:
        return int(text[:-1])
    return float(text)


def _string(text: str, start: int) -> tuple[str, int]:
    """A quoted field value starting at ``text[start]`` (the quote): its content and the index past it."""
    content, n = _split(text[start + 1 :], '"', escapable='"\\')
    end = start + 1 + n
    if end >= len(text):
        msg = "a string field value has no closing quote"
        raise ValueError(msg)
    return content, end + 1


def parse_line(line: str) -> Sample:
    """One line (without its newline); ValueError saying what is wrong."""
    measurement, i = _split(line, ", ")
    if not measurement:
        msg = "no measurement"
        raise ValueError(msg)
    tags: list[tuple[str, str]] = []
    while i < len(line) and line[i] == ",":
        key, n = _split(line[i + 1 :], "= ,")
        i += 1 + n
        if i >= len(line) or line[i] != "=" or not key:
            msg = f"tag {key!r} has no value"
            raise ValueError(msg)
        tag_value, n = _split(line[i + 1 :], ", ")
        tags.append((key, tag_value))
        i += 1 + n
    if i >= len(line) or line[i] != " ":
        msg = "no fields"
        raise ValueError(msg)
    i += 1
    fields: list[tuple[str, FieldValue]] = []
    while True:
        key, n = _split(line[i:], "= ,")
        i += n
        if i >= len(line) or line[i] != "=" or not key:
            msg = f"field {key!r} has no value"
            raise ValueError(msg)
        i += 1
        value: FieldValue
        if line[i : i + 1] == '"':
            value, i = _string(line, i)
        else:
            end = i
            while end < len(line) and line[end] not in ", ":
                end += 1
            raw, i = line[i:end], end
            if not raw:
                msg = f"field {key!r} has an empty value"
                raise ValueError(msg)
            value = _field_value(raw)
        fields.append((key, value))
        if i < len(line) and line[i] == ",":
            i += 1
            continue
        break
    rest = line[i:].strip()
    return Sample(measurement, tuple(tags), tuple(fields), int(rest) if rest else None)


def parse(text: str) -> list[Sample]:
    """Every line of ``text`` (blank lines and ``#`` comments skipped); ``LineProtocolError`` naming the
    first line that does not parse."""
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            samples.append(parse_line(line))
        except ValueError as e:
            msg = f"line {number}: {e}: {line[:200]!r}"
            raise LineProtocolError(msg) from None
    return samples
