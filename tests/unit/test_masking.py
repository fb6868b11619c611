"""Column masking: each rule by UMS type, salts, glob precedence, encoded-once, and no clear value leaks."""

import dataclasses
import hashlib
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbuslib.config import MaskRule
from ums.decode import check_wire_value
from ums.masking import DEFAULTS, MaskError, compile_rules, replace_value
from ums.message import ProtocolType, UmsField, UmsMessage, UmsSchema
from ums.namespace import Namespace
from ums.types import UmsType

T = UmsType
NS = Namespace("mysql", "demo", "shop", "customers", 1)
SYSTEM = (
    UmsField("ums_id_", T.LONG, False),
    UmsField("ums_ts_", T.DATETIME, False),
    UmsField("ums_op_", T.STRING, False),
    UmsField("ums_uid_", T.STRING, False),
)
SYS_VALUES = ("1030000012345678", "2024-01-02 03:04:05.000", "i", "1030000012345678000000")
PHONE = r"^(\+?\d{2}-?)?(\d{3})\d{4}(\d{4})$"


def rule(kind, **kw):
    return MaskRule(type=kind, **kw)


def mask_one(r, ums_type, value, nullable=True):
    """Mask one column ``c`` of type ``ums_type``: (out field, out value, table mask)."""
    plan = compile_rules({"shop.customers": {"c": r}})
    fields = (*SYSTEM, UmsField("c", ums_type, nullable))
    mask = plan.for_table("shop", "customers", fields)
    return mask.fields[-1], mask.apply_row((*SYS_VALUES, value))[-1], mask


def md5(text):
    return hashlib.md5(text.encode()).hexdigest()


# ---------------------------------------------------------------- rule x type tables

DEFAULT_CASES = [
    (T.STRING, "alice", "*"),
    (T.RAW, "x", "*"),
    (T.JSONOBJECT, '{"a":1}', '"*"'),
    (T.BINARY, "AAE=", "Kg=="),
    (T.INT, 42, 0),
    (T.LONG, "42", "0"),
    (T.DECIMAL, "12.50", "0"),
    (T.FLOAT, 1.5, 0.0),
    (T.DOUBLE, 2.5, 0.0),
    (T.BOOLEAN, True, False),
    (T.DATE, "2024-05-06", "1970-01-01"),
    (T.DATETIME, "2024-05-06 07:08:09.000", "1970-01-01 00:00:00.000"),
]


@pytest.mark.parametrize(("ums_type", "clear", "masked"), DEFAULT_CASES)
def test_default_gives_the_type_default_and_keeps_the_type(ums_type, clear, masked):
    field, value, _ = mask_one(rule("default"), ums_type, clear)
    assert (value, field.type, field.encoded) == (masked, ums_type, True)
    assert DEFAULTS[ums_type] == masked and check_wire_value(ums_type, masked) is None


REPLACE_CASES = [  # literal, column type -> value, field type
    ("0", T.INT, 0, T.INT),
    ("-7", T.INT, -7, T.INT),
    ("secret", T.INT, "secret", T.STRING),
    ("99999999999", T.INT, "99999999999", T.STRING),
    ("123", T.LONG, "123", T.LONG),
    ("1.5", T.LONG, "1.5", T.STRING),
    ("1.50", T.DECIMAL, "1.50", T.DECIMAL),
    ("1.5", T.DOUBLE, 1.5, T.DOUBLE),
    ("nan", T.FLOAT, "nan", T.STRING),
    ("true", T.BOOLEAN, True, T.BOOLEAN),
    ("yes", T.BOOLEAN, "yes", T.STRING),
    ("2000-01-01", T.DATE, "2000-01-01", T.DATE),
    ("soon", T.DATE, "soon", T.STRING),
    ("2000-01-01 00:00:00", T.DATETIME, "2000-01-01 00:00:00", T.DATETIME),
    ("x", T.STRING, "x", T.STRING),
    ('{"k":0}', T.JSONOBJECT, '{"k":0}', T.JSONOBJECT),
    ("x", T.JSONOBJECT, "x", T.STRING),
    ("*", T.BINARY, "Kg==", T.BINARY),
]


@pytest.mark.parametrize(("literal", "ums_type", "masked", "out_type"), REPLACE_CASES)
def test_replace_converts_the_literal_or_turns_the_column_into_string(literal, ums_type, masked, out_type):
    clear = {T.INT: 5, T.DOUBLE: 2.0, T.FLOAT: 2.0, T.BOOLEAN: False}.get(ums_type, "AAE=")
    field, value, _ = mask_one(rule("replace", value=literal), ums_type, clear)
    assert (value, field.type) == (masked, out_type)
    assert replace_value(literal, ums_type) == (masked if out_type is ums_type else None)


HASH_CASES = [  # column type, clear wire value, hashed text
    (T.STRING, "alice@example.com", "alice@example.com"),
    (T.LONG, "42", "42"),
    (T.INT, 42, "42"),
    (T.DECIMAL, "-1.50", "-1.50"),
    (T.DOUBLE, 1.5, "1.5"),
    (T.DATE, "2024-05-06", "2024-05-06"),
    (T.BOOLEAN, True, "true"),
    (T.BINARY, "AAE=", "AAE="),
]


@pytest.mark.parametrize(("ums_type", "clear", "text"), HASH_CASES)
@pytest.mark.parametrize("algo", ["md5", "sha256"])
def test_digest_is_hex_of_value_plus_salt_and_the_column_becomes_string(algo, ums_type, clear, text):
    field, value, _ = mask_one(rule(algo, salt="pepper"), ums_type, clear)
    assert value == hashlib.new(algo, (text + "pepper").encode()).hexdigest()
    assert (field.type, field.encoded) == (T.STRING, True)


def test_no_salt_hashes_the_value_alone():
    assert mask_one(rule("md5"), T.STRING, "abc")[1] == md5("abc") == "900150983cd24fb0d6963f7d28e17f72"


def test_murmur3_is_guava_murmur3_128_hex():
    # MurmurHash3_x64_128("hello", seed 0) = h1 cbd8a7b341bd9b02, h2 5b1e906a48ae1d19; Guava prints the
    # little-endian bytes of h1 then h2.
    field, value, _ = mask_one(rule("murmur3"), T.LONG, "hello")
    assert (value, field.type) == ("029bbd41b3a7d8cb191dae486a901e5b", T.STRING)
    assert mask_one(rule("murmur3", salt="llo"), T.STRING, "he")[1] == value


REGEX_CASES = [  # pattern, replacement, column type, clear, masked
    (PHONE, r"\1\2****\3", T.STRING, "13812345678", "138****5678"),
    (PHONE, r"\1\2****\3", T.STRING, "+86-13812345678", "+86-138****5678"),
    (PHONE, r"\1\2****\3", T.STRING, "call 13812345678", "*"),  # not a full match -> default
    (r"^\s*(\w).*", r"\1**", T.STRING, "Alice", "A**"),
    (r"(\d{2})\d*", r"\1--", T.LONG, "123456", "12--"),
    (r"(\d{2})\d*", r"\1--", T.INT, 123456, "12--"),
    (r"a|ab", r"X", T.STRING, "ab", "X"),  # the full match is replaced, not the first search hit
    (r"(?P<head>.)(.*)", r"\g<head>***", T.STRING, "secret", "s***"),
]


@pytest.mark.parametrize(("pattern", "replacement", "ums_type", "clear", "masked"), REGEX_CASES)
def test_regex_replaces_a_full_match_else_default(pattern, replacement, ums_type, clear, masked):
    field, value, mask = mask_one(rule("regex", pattern=pattern, replacement=replacement), ums_type, clear)
    assert (value, field.type, mask.errors) == (masked, T.STRING, 0)


def test_regex_that_gives_back_its_input_falls_back_to_default():
    field, value, mask = mask_one(rule("regex", pattern=r"(.*)", replacement=r"\1"), T.STRING, "secret")
    assert (value, mask.errors) == ("*", 1)


TRUNCATE_CASES = [
    (T.STRING, "abcdef", 3, "abc", T.STRING),
    (T.STRING, "ab", 3, "ab", T.STRING),
    (T.STRING, "héllo", 2, "hé", T.STRING),
    (T.LONG, "123456", 2, "12", T.STRING),
    (T.INT, 123456, 2, "12", T.STRING),
    (T.STRING, "abc", 0, "", T.STRING),
]


@pytest.mark.parametrize(("ums_type", "clear", "length", "masked", "out_type"), TRUNCATE_CASES)
def test_truncate_keeps_the_first_characters(ums_type, clear, length, masked, out_type):
    field, value, _ = mask_one(rule("truncate", length=length), ums_type, clear)
    assert (value, field.type, field.encoded) == (masked, out_type, True)


@pytest.mark.parametrize(
    "r",
    [
        rule("default"),
        rule("replace", value="x"),
        rule("md5"),
        rule("sha256", salt="s"),
        rule("murmur3"),
        rule("regex", pattern=".*", replacement="x"),
        rule("truncate", length=1),
    ],
)
@pytest.mark.parametrize("ums_type", [T.STRING, T.LONG, T.INT, T.DATE])
def test_null_stays_null(r, ums_type):
    field, value, mask = mask_one(r, ums_type, None)
    assert (value, field.encoded, field.nullable, mask.errors) == (None, True, True, 0)


# ---------------------------------------------------------------- salts


def fields_of(*names_types):
    return (*SYSTEM, *(UmsField(n, t, True) for n, t in names_types))


def test_salt_field_uses_the_clear_value_of_the_other_column_even_when_it_is_masked():
    plan = compile_rules({"shop.customers": {"email": rule("md5", salt_field="id"), "id": rule("default")}})
    mask = plan.for_table("shop", "customers", fields_of(("id", T.LONG), ("email", T.STRING)))
    assert mask.apply_row((*SYS_VALUES, "42", "a@b.c"))[-2:] == ("0", md5("a@b.c42"))
    assert mask.apply_row((*SYS_VALUES, None, "a@b.c"))[-1] == md5("a@b.c")  # NULL salt = no salt
    assert {c.mask.name: c.salt_index for c in mask.columns} == {"id": None, "email": 4}


def test_salt_field_missing_from_the_table_masks_with_the_default_and_counts():
    plan = compile_rules({"shop.customers": {"email": rule("sha256", salt_field="nope")}})
    mask = plan.for_table("shop", "customers", fields_of(("email", T.STRING)))
    assert mask.apply_row((*SYS_VALUES, "a@b.c"))[-1] == "*"
    assert (mask.errors, mask.error_counts["email"]) == (1, 1)


def test_fixed_salt_changes_the_digest_and_never_prints():
    _, salted, mask = mask_one(rule("md5", salt="very-secret"), T.STRING, "abc")
    assert salted == md5("abcvery-secret") != md5("abc")
    assert "very-secret" not in repr(mask) and "very-secret" not in repr(mask.columns)


# ---------------------------------------------------------------- fallbacks


def test_any_exception_gives_the_default_and_is_counted():
    _, value, mask = mask_one(rule("sha256"), T.STRING, b"not a wire value")
    assert (value, mask.errors) == ("*", 1)
    _, value, mask = mask_one(rule("truncate", length=2), T.LONG, object())
    assert (value, mask.errors) == ("*", 1)


def test_a_result_that_is_not_a_wire_value_of_the_output_type_gives_the_default():
    _, _, mask = mask_one(rule("md5"), T.LONG, "42")
    broken = dataclasses.replace(mask.columns[0].mask, encode=lambda value, salt: 12)  # int for string
    assert (broken("42"), broken(None), mask.errors) == ("*", None, 1)


# ---------------------------------------------------------------- tables and fields


RULES = {
    "shop.*": {"email": rule("sha256"), "phone": rule("default")},
    "shop.customers": {"phone": rule("regex", pattern=PHONE, replacement=r"\1\2****\3")},
    "*.customers": {"name": rule("replace", value="?"), "email": rule("md5")},
    "*.*": {"name": rule("default"), "ssn": rule("default")},
}


@pytest.mark.parametrize(
    ("schema", "table", "column", "winner"),
    [
        ("shop", "customers", "phone", "shop.customers"),  # literal beats every glob
        ("shop", "customers", "email", "*.customers"),  # literal table beats literal schema
        ("shop", "customers", "name", "*.customers"),
        ("shop", "customers", "ssn", "*.*"),  # columns merge over every matching pattern
        ("shop", "orders", "email", "shop.*"),
        ("hr", "customers", "email", "*.customers"),
        ("hr", "staff", "email", None),
    ],
)
def test_most_specific_pattern_wins_per_column(schema, table, column, winner):
    rules = compile_rules(RULES).rules_for(schema, table)
    assert (rules.source_of(column) if rules else None) == winner


def test_schema_and_table_globs_match_separately_and_case_sensitively():
    plan = compile_rules({"sh*.c?stomers": {"x": rule("default")}})
    assert plan.rules_for("shop", "customers") is not None
    assert plan.rules_for("sh", "op.customers") is None  # "sh.op.customers" would match as one string
    assert plan.rules_for("Shop", "customers") is None


def test_fields_are_encoded_once_and_masked_values_of_encoded_fields_pass_through():
    plan = compile_rules({"shop.customers": {"email": rule("md5"), "id": rule("default")}})
    upstream = (*SYSTEM, UmsField("id", T.LONG, True), UmsField("email", T.STRING, True, encoded=True))
    mask = plan.for_table("shop", "customers", upstream)
    assert [c.mask.name for c in mask.columns] == ["id"]
    assert mask.fields[-1] is upstream[-1] and mask.fields[-2] == UmsField("id", T.LONG, True, True)
    assert mask.apply_row((*SYS_VALUES, "7", "already-masked"))[-2:] == ("0", "already-masked")
    assert mask.apply_fields(mask.fields) == mask.fields == mask.apply_fields(upstream)
    assert plan.for_table("shop", "customers", mask.fields) is None  # nothing left to mask


def test_system_fields_are_never_masked():
    with pytest.raises(MaskError, match=r"UMS_BAD_MASK: masking.shop.t.ums_id_: the system field"):
        compile_rules({"shop.t": {"ums_id_": rule("default")}})


@pytest.mark.parametrize(
    ("r", "text"),
    [
        (rule("regex", pattern="(a)", replacement=r"\2"), r"masking.s.t.c: .*invalid group reference 2"),
        (rule("md5", salt_field="c"), "masking.s.t.c: salt_field cannot be the masked column itself"),
    ],
)
def test_bad_rules_fail_at_compile_naming_the_key(r, text):
    with pytest.raises(MaskError, match=text):
        compile_rules({"s.t": {"c": r}})


def test_for_table_is_cached_and_none_without_masked_fields():
    plan = compile_rules(RULES)
    fields = fields_of(("email", T.STRING))
    assert plan.for_table("shop", "orders", fields) is plan.for_table("shop", "orders", fields)
    assert plan.for_table("shop", "orders", fields_of(("total", T.DECIMAL))) is None
    assert plan.for_table("hr", "staff", fields) is None


def test_columns_one_at_a_time_equal_apply_row_and_the_mask_pickles():
    plan = compile_rules(RULES)
    fields = fields_of(("name", T.STRING), ("email", T.STRING), ("phone", T.STRING), ("n", T.INT))
    mask = plan.for_table("shop", "customers", fields)
    row = (*SYS_VALUES, "Ann", "a@b.c", "13812345678", 3)
    by_column = list(row)
    for col in mask.columns:
        salt = row[col.salt_index] if col.salt_index is not None else None
        by_column[col.index] = col.mask(row[col.index], salt)
    clone = pickle.loads(pickle.dumps(mask))
    assert tuple(by_column) == mask.apply_row(row) == clone.apply_row(row)
    assert mask.apply_row(row)[4:] == ("?", md5("a@b.c"), "138****5678", 3)


# ---------------------------------------------------------------- properties

ALL_RULES = [
    rule("default"),
    rule("replace", value="masked"),
    rule("replace", value="0"),
    rule("md5"),
    rule("md5", salt="s"),
    rule("sha256", salt_field="other"),
    rule("murmur3", salt="s"),
    rule("regex", pattern=r"(.)(.*)", replacement=r"\1***"),
    rule("regex", pattern=r"(.*)", replacement=r"\1"),
    rule("regex", pattern=r"\d+", replacement="#"),
    rule("truncate", length=3),
]
VALUES = {
    T.STRING: st.none() | st.text(max_size=12),
    T.LONG: st.none() | st.integers(-(2**63), 2**63 - 1).map(str),
    T.INT: st.none() | st.integers(-(2**31), 2**31 - 1),
}


@st.composite
def masked_rows(draw):
    ums_type = draw(st.sampled_from(sorted(VALUES, key=lambda t: t.value)))
    r = draw(st.sampled_from(ALL_RULES))
    return r, ums_type, draw(VALUES[ums_type]), draw(VALUES[T.STRING])


@given(masked_rows())
def test_the_clear_value_never_survives_masking(case):
    r, ums_type, clear, other = case
    plan = compile_rules({"shop.customers": {"c": r}})
    fields = (*SYSTEM, UmsField("other", T.STRING, True), UmsField("c", ums_type, True))
    mask = plan.for_table("shop", "customers", fields)
    out_row = mask.apply_row((*SYS_VALUES, other, clear))
    out, out_type = out_row[-1], mask.fields[-1].type
    UmsMessage(ProtocolType.DATA_INCREMENT_DATA, UmsSchema(NS, mask.fields), (out_row,))  # stays valid
    if clear is None:
        assert out is None
        return
    text = clear if isinstance(clear, str) else str(clear)
    if r.type == "truncate":
        assert out == text[: r.length]
        assert out != clear or len(text) <= r.length  # truncate limits size; short values pass
        return
    constants = {DEFAULTS[out_type], replace_value(r.value, ums_type) if r.type == "replace" else None}
    if r.type == "replace":
        constants.add(r.value)
    # Only a constant (which tells nothing about the input) may equal the clear value.
    assert out in constants or (out != clear and out != text)
