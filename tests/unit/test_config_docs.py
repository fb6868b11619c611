"""docs/configuration.md lists every key of dbuslib/config.py, and no key the models do not have.

The keys are read from the pydantic models (aliases as written in YAML: ``topics.schema``), and from the
first column of the doc's ``| key | ...`` tables under each ``## `section` `` heading. A cell may list
siblings after a full key, ``.org`` after ``influxdb.url`` meaning ``influxdb.org``; a ``<...>`` part
stands for a name the user picks (``sources.<name>``, ``masking.<schema.table>.<column>``).
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from dbuslib.config import DbusConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
ANY = "<*>"


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
    return []


def _dict_of_models(annotation: object) -> object | None:
    """The value type of ``dict[str, X]`` when X holds models (a level of user-chosen names), else None."""
    if typing.get_origin(annotation) is not dict:
        return None
    value = typing.get_args(annotation)[1]
    return value if _models_in(value) or _dict_of_models(value) is not None else None


def model_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every leaf key under ``model`` as a dotted path; a free-form dict (``kafka.client``) is one leaf."""
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        key = f"{prefix}{field.alias or name}"
        annotation = field.annotation
        while (inner := _dict_of_models(annotation)) is not None:
            key, annotation = f"{key}.{ANY}", inner
        nested = _models_in(annotation)
        keys |= {key} if not nested else set().union(*(model_keys(m, f"{key}.") for m in nested))
    return keys


def _expand(tokens: list[str]) -> list[str]:
    full: list[str] = []
    for token in tokens:
        if token.startswith(".") and full:
            token = full[-1].rsplit(".", 1)[0] + token
        full.append(token)
    return full


def documented_keys(text: str) -> set[str]:
    """The keys of the ``| key |`` tables, each prefixed with its ``## `section` `` heading."""
    keys: set[str] = set()
    section, in_key_table = "", False
    for line in text.splitlines():
        line = re.sub(r"<[^>]*>", ANY, line)
        if line.startswith("## "):
            heading = re.findall(r"`([^`]+)`", line)
            section, in_key_table = (heading[0] + "." if heading else ""), False
        elif not line.startswith("|"):
            in_key_table = False
        elif re.match(r"^\|\s*key\s*\|", line):
            in_key_table = True
        elif in_key_table and section and not re.match(r"^\|\s*-", line):
            first_cell = line.split("|")[1]
            keys |= {section + k for k in _expand(re.findall(r"`([^`]+)`", first_cell))}
    return keys


@pytest.fixture(scope="module")
def documented() -> set[str]:
    return documented_keys(DOC.read_text(encoding="utf-8"))


def test_every_config_key_is_in_configuration_md(documented: set[str]) -> None:
    missing = sorted(model_keys(DbusConfig) - documented)
    assert not missing, f"{DOC.name}: keys of dbuslib/config.py with no row: {missing}"


def test_configuration_md_names_no_key_the_models_lack(documented: set[str]) -> None:
    stale = sorted(documented - model_keys(DbusConfig))
    assert not stale, f"{DOC.name}: rows for keys dbuslib/config.py does not have: {stale}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("## `endpoints`\n| key | m |\n|---|---|\n| `kafka.client` | x |\n", {"endpoints.kafka.client"}),
        ("## `e`\n| key | m |\n| `influxdb.url`, `.org` | x |\n", {"e.influxdb.url", "e.influxdb.org"}),
        (
            "## `sources.<name>`\n| key |\n| `masking.<s.t>.<c>.type` |\n",
            {"sources.<*>.masking.<*>.<*>.type"},
        ),
        ("## `s`\n| type | m |\n| `replace` | x |\n", set()),
        ("## `s`\n| key |\n\n| `a` | after the table |\n", set()),
    ],
)
def test_documented_keys_reads_key_tables(text: str, expected: set[str]) -> None:
    assert documented_keys(text) == expected


def test_model_keys_walks_nested_models_aliases_and_named_levels() -> None:
    keys = model_keys(DbusConfig)
    assert "sources.<*>.topics.schema" in keys
    assert "sources.<*>.heartbeat.smtp.host" in keys
    assert "sources.<*>.masking.<*>.<*>.salt_field" in keys
    assert "endpoints.kafka.client" in keys
    assert "path" not in keys
