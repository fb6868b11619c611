"""``schema.table`` as a user types it on a command line: one home for splitting it (pure).

A name may itself hold a dot (MariaDB allows `` `t.dot` ``): quote it with backquotes as in SQL, a
backquote inside doubled. Without backquotes the text is split at its first dot, so a dotted *table*
needs no quotes but a dotted *schema* does::

    >>> split_table("shop.orders")
    ('shop', 'orders')
    >>> split_table("shop.t.dot")
    ('shop', 't.dot')
    >>> split_table("`my.db`.`t.dot`")
    ('my.db', 't.dot')
    >>> quote_table("shop", "t.dot"), quote_table("my.db", "t")
    ('shop.t.dot', '`my.db`.t')
"""

from __future__ import annotations


def split_table(text: str) -> tuple[str, str]:
    """``(schema, table)``; ValueError names the text when it is not ``schema.table``."""
    if not isinstance(text, str):
        msg = f"{text!r}: expected schema.table"
        raise ValueError(msg)
    schema, rest = _name(text, 0)
    if rest >= len(text) or text[rest] != ".":
        msg = f"{text!r}: expected schema.table (quote a name holding a dot with backquotes)"
        raise ValueError(msg)
    table, end = _name(text, rest + 1, to_end=True)
    if end != len(text) or not schema or not table:
        msg = f"{text!r}: expected schema.table (quote a name holding a dot with backquotes)"
        raise ValueError(msg)
    return schema, table


def quote_table(schema: str, table: str) -> str:
    """The text ``split_table`` gives back as ``(schema, table)``: names quoted only when needed."""

    def q(name: str, first: bool) -> str:
        plain = name and not name.startswith("`") and (("." not in name) if first else True)
        return name if plain else "`" + name.replace("`", "``") + "`"

    return f"{q(schema, True)}.{q(table, False)}"


def _name(text: str, i: int, to_end: bool = False) -> tuple[str, int]:
    """One name from ``text[i:]``: backquoted (doubled backquotes inside), else up to the next dot
    (or, with ``to_end``, the rest of the text). Returns the name and the index after it."""
    if i < len(text) and text[i] == "`":
        out, j = [], i + 1
        while j < len(text):
            if text[j] == "`":
                if j + 1 < len(text) and text[j + 1] == "`":
                    out.append("`")
                    j += 2
                    continue
                return "".join(out), j + 1
            out.append(text[j])
            j += 1
        msg = f"{text!r}: a backquote is not closed"
        raise ValueError(msg)
    end = len(text) if to_end else (text.find(".", i) if "." in text[i:] else len(text))
    return text[i:end], end
