"""The one reader of a JSON request body for every console endpoint (docs/console.md, Requests).

``json_object(**fields)`` gives the body as a dict or aborts with 400 naming the problem, before any
endpoint code sees it:

- the size: above the app's ``MAX_CONTENT_LENGTH`` werkzeug refuses the body with 413 as it is read;
- the content type must be JSON (``application/json``) and the bytes UTF-8;
- the nesting is counted before parsing (``json`` recurses: a 100k-deep body would raise RecursionError)
  and refused above ``MAX_DEPTH``;
- the document must be an object, and each named field, when present and not null, of its kind::

      body = json_object(groups=LIST, records=LIST, raw=BOOL, group=TEXT)
      # {"groups": 5}  ->  400 "groups: must be a list, not a number"

Pure except ``json_object``, which reads Flask's request.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from flask import abort, request

MAX_DEPTH = 64  # nesting levels of a body: a rule's grammar in a group in a list is 5

TEXT, LIST, OBJECT, BOOL, INT = "text", "list", "object", "boolean", "whole number"
_KINDS: dict[str, type] = {TEXT: str, LIST: list, OBJECT: dict, BOOL: bool, INT: int}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class BodyError(ValueError):
    """Why a body is refused (the 400's reason)."""


def kind(value: Any) -> str:
    """A JSON value's kind as a refusal names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    return "an object"


def depth(text: str) -> int:
    """How deep ``text``'s arrays and objects nest (brackets inside strings do not count)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def parse(data: bytes, fields: dict[str, str]) -> dict[str, Any]:
    """``data`` as a JSON object whose ``fields`` (name -> kind) are of their kind when present and not
    null; BodyError naming the problem otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        msg = f"the body is not UTF-8 text (byte {e.start})"
        raise BodyError(msg) from None
    levels = depth(text)
    if levels > MAX_DEPTH:
        msg = f"the body nests {levels} levels deep (at most {MAX_DEPTH})"
        raise BodyError(msg)
    try:
        doc = json.loads(text)
    except ValueError as e:  # JSONDecodeError, or an integer of more digits than Python converts
        msg = f"the body is not JSON: {e}"
        raise BodyError(msg) from None
    if not isinstance(doc, dict):
        msg = f"the body must be a JSON object, not {kind(doc)}"
        raise BodyError(msg)
    for name, want in fields.items():
        value = doc.get(name)
        if value is None:
            continue
        if not isinstance(value, _KINDS[want]) or (want == INT and isinstance(value, bool)):
            msg = f"{name}: must be {_article(want)}, not {kind(value)}"
            raise BodyError(msg)
    return doc


def _article(want: str) -> str:
    return want if want == TEXT else f"a {want}" if want[0] not in "aeiou" else f"an {want}"


def json_object(**fields: str) -> dict[str, Any]:
    """The request's body (``Content-Type: application/json``) as ``parse`` checks it; 400 naming the
    problem, 413 above ``MAX_CONTENT_LENGTH``."""
    if not request.is_json:
        why = f"the body must be JSON (Content-Type: application/json, not {request.mimetype!r})"
        abort(400, description=why)
    try:
        return parse(request.get_data(cache=True), fields)
    except BodyError as e:
        abort(400, description=str(e))
