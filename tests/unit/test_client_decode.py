"""dbusclient.decode: UMS data messages (JSON and Avro) -> RowChange; a golden pull-and-increments example."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbusclient.decode import BadRowError, Decoder, RowChange, TableRef
from dbusclient.merge import Delete, Merger, Upsert
from ums.avro import avro_schema, encode_avro
from ums.encoding import from_json
from ums.message import Op

T = TableRef("demo", "shop", "orders")
FIELDS = (
    '{"name":"ums_id_","type":"long","nullable":false,"encoded":false},'
    '{"name":"ums_ts_","type":"datetime","nullable":false,"encoded":false},'
    '{"name":"ums_op_","type":"string","nullable":false,"encoded":false},'
    '{"name":"ums_uid_","type":"string","nullable":false,"encoded":false},'
    '{"name":"id","type":"%s","nullable":false,"encoded":false},'
    '{"name":"amount","type":"decimal","nullable":true,"encoded":false}'
)


def message(protocol: str, version: int, tuples: str, id_type: str = "long") -> str:
    return (
        f'{{"protocol":{{"type":"{protocol}","version":"1.3"}},'
        f'"schema":{{"namespace":"mysql.demo.shop.orders.{version}.0.0","fields":[{FIELDS % id_type}],'
        f'"batchId":0}},"payload":[{tuples}]}}'
    )


# UPDATE orders SET amount = 20.00 WHERE id = 1 (with before image), then DELETE id 2, at binlog 103
INCREMENT = message(
    "data_increment_data",
    3,
    '{"tuple":["1030000000000900","2024-01-02 03:04:05.000","b","1030000000000900000000","1","19.90"]},'
    '{"tuple":["1030000000000900","2024-01-02 03:04:05.000","u","1030000000000900000001","1","20.00"]},'
    '{"tuple":["1030000000001200","2024-01-02 03:04:06.000","d","1030000000001200000000","2","5.00"]}',
)
# a full pull at snapshot position 1030000000000500: it read ids 1 and 2 before either change
PULL = message(
    "data_initial_data",
    3,
    ",".join(
        f'{{"tuple":["1030000000000500","2024-01-02 03:04:00.000","i","{1030000000000500000001 * 10**9 + n}",'
        f"{values}]}}"
        for n, values in enumerate(['"1","19.90"', '"2","5.00"', '"3","7.50"'])
    ),
)
DECODER = Decoder({"shop.orders": ("id",)})


def test_a_tuple_becomes_a_row_change():
    first = DECODER.from_json(INCREMENT)[1]
    assert first == RowChange(
        table=T,
        version=3,
        key=(1,),
        op=Op.UPDATE,
        ums_id=1030000000000900,
        ums_uid=1030000000000900000001,
        ums_ts="2024-01-02 03:04:05.000",
        values={"id": "1", "amount": "20.00"},
    )
    rows = DECODER.from_json(PULL)
    assert [r.initial for r in rows] == [True] * 3
    assert rows[2].ums_uid == 1030000000000500000001000000002  # 15 digits past ums_id_, as an int


def test_golden_pull_read_after_its_increments():
    # the increments reached the consumer first (another partition, or the pull was slow); the pull's
    # older rows must not undo them: id 1 stays at 20.00, id 2 stays deleted, id 3 comes from the pull
    merger = Merger()
    first = merger.merge(DECODER.from_json(INCREMENT))
    assert [(type(e).__name__, e.change.key) for e in first.effects] == [("Upsert", (1,)), ("Delete", (2,))]
    second = merger.merge(DECODER.from_json(PULL))
    assert (second.stale, second.duplicates) == (2, 0)
    assert second.effects == (Upsert(DECODER.from_json(PULL)[2]),)
    third = merger.merge(DECODER.from_json(INCREMENT) + DECODER.from_json(PULL))  # all delivered again
    # the same tuples are duplicates; the b of id 1 and the pull's rows of ids 1 and 2 stay stale
    assert (third.applied, third.effects, third.duplicates, third.stale) == ((), (), 3, 3)


def test_golden_pull_read_before_its_increments():
    merger = Merger()
    merger.merge(DECODER.from_json(PULL))
    result = merger.merge(DECODER.from_json(INCREMENT))
    assert [type(e) for e in result.effects] == [Upsert, Delete]
    assert result.effects[0].change.values["amount"] == "20.00"


def test_avro_gives_the_same_changes():
    msg = from_json(INCREMENT)
    assert DECODER.from_avro(encode_avro(msg), avro_schema(msg.schema)) == DECODER.from_json(INCREMENT)


def test_key_compares_by_value_across_versions_of_another_wire_form():
    # version 2 had id as int (a JSON number), version 3 as long (a JSON string): one key
    old = message(
        "data_increment_data",
        2,
        '{"tuple":["100","2024-01-02 03:04:05.000","i","100000000",1,"1.00"]}',
        "int",
    )
    (v2,) = DECODER.from_json(old)
    v3 = DECODER.from_json(INCREMENT)[1]
    assert v2.key == v3.key == (1,)


def test_heartbeat_has_no_row_changes():
    beat = (
        '{"protocol":{"type":"data_increment_heartbeat","version":"1.3"},"schema":{"namespace":'
        '"mysql.demo.shop.orders.3.0.0","fields":[{"name":"ums_id_","type":"long","nullable":false},'
        '{"name":"ums_ts_","type":"datetime","nullable":false}],"batchId":0},'
        '"payload":[{"tuple":["110000986900417","2018-01-25 20:04:35.000"]}]}'
    )
    assert DECODER.from_json(beat) == []


@pytest.mark.parametrize(
    ("decoder", "text", "error"),
    [
        (Decoder({"shop.other": ("id",)}), INCREMENT, "no key columns given for shop.orders"),
        (
            Decoder({"shop.orders": ("nope",)}),
            INCREMENT,
            r"key column\(s\) \['nope'\] are not fields of version 3",
        ),
        (
            DECODER,
            INCREMENT.replace('"1","20.00"', 'null,"20.00"').replace(
                '"nullable":false,"encoded":false},{"name":"amount"',
                '"nullable":true,"encoded":false},{"name":"amount"',
            ),
            r"payload\[1\] \(ums_uid_ 1030000000000900000001\): key column 'id' is null",
        ),
        (DECODER, INCREMENT.replace('"1030000000000900000001"', '"10e5"'), r"payload\[1\]: ums_uid_ '10e5'"),
        (DECODER, '{"protocol": 1}', r"^demo\.shop\.result/0@41: UMS_BAD_MESSAGE"),
    ],
)
def test_errors_name_the_namespace_tuple_and_column(decoder, text, error):
    with pytest.raises(BadRowError, match=error):
        decoder.from_json(text, "demo.shop.result/0@41")


def test_a_bad_table_name_in_the_key_map_is_refused():
    with pytest.raises(BadRowError, match="key columns of 'orders'"):
        Decoder({"orders": ("id",)})


# ---------------------------------------------------------------- the fast path (Decoder.read_json)
#
# read_json trusts the user values of a message whose protocol and schema it has read checked before, and
# checks the rest (JSON, structure, system values, keys): whatever the bytes, a record gives row changes or
# BadRowError, and a valid message gives what the checked path gives.

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


def outcome(decoder: Decoder, value: str | bytes, checked: bool = False) -> list[RowChange] | str:
    try:
        return decoder.from_json(value, "demo.shop.result/0@41", checked=checked)
    except BadRowError as e:
        assert str(e).startswith("demo.shop.result/0@41: "), e
        return "BadRowError"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_bytes_give_row_changes_or_a_bad_row(value):
    decoder = Decoder({"shop.orders": ("id",)})
    decoder.from_json(INCREMENT)  # the shape of INCREMENT is known: its messages take the fast path
    for checked in (False, True):
        assert isinstance(outcome(decoder, value, checked), (list, str))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_broken_message_gives_row_changes_or_a_bad_row(data):
    """A known message with any part replaced by any JSON: the fast path reads past the JSON parse."""
    decoder = Decoder({"shop.orders": ("id",)})
    decoder.from_json(INCREMENT)
    obj = json.loads(INCREMENT)
    node, path = obj, []
    while isinstance(node, (dict, list)) and node and data.draw(st.booleans()):
        at = data.draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
        path.append(at)
        node = node[at]
    if path:
        parent = obj
        for at in path[:-1]:
            parent = parent[at]
        parent[path[-1]] = data.draw(JSON)
    else:
        obj = data.draw(JSON)
    text = json.dumps(obj)
    fast, checked = outcome(decoder, text), outcome(decoder, text, checked=True)
    assert isinstance(fast, (list, str)) and isinstance(checked, (list, str))
    if isinstance(checked, list):  # a message the checked path takes gives the same on the fast path
        assert fast == checked


COLUMN_TYPES = {
    "long": st.integers(-(2**63), 2**64 - 1).map(str),
    "int": st.integers(-(2**31), 2**31 - 1),
    "decimal": st.decimals(allow_nan=False, allow_infinity=False, places=3).map(lambda d: format(d, "f")),
    "string": st.text(max_size=10),
    "datetime": st.datetimes(datetime.fromisoformat("1000-01-01")).map(
        lambda d: d.strftime("%Y-%m-%d %H:%M:%S.%f")
    ),
    "double": st.floats(allow_nan=False, allow_infinity=False),
    "boolean": st.booleans(),
}


@st.composite
def valid_messages(draw: st.DrawFn) -> tuple[str, tuple[str, ...]]:
    """A valid data message of 1-5 user columns of any type, 1-3 of them the key (never null)."""
    names = draw(st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=5, unique=True))
    types = [draw(st.sampled_from(sorted(COLUMN_TYPES))) for _ in names]
    key = tuple(draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True)))
    nullable = [n not in key and draw(st.booleans()) for n in names]
    initial = draw(st.booleans())
    protocol = "data_initial_data" if initial else "data_increment_data"
    system = "},{".join(FIELDS.split("},{")[:4]) + "}"
    fields = ",".join(
        [system]
        + [
            json.dumps({"name": n, "type": t, "nullable": z, "encoded": False})
            for n, t, z in zip(names, types, nullable, strict=True)
        ]
    )
    tuples = []
    for i in range(draw(st.integers(1, 4))):
        ums_id = draw(st.integers(0, 2**62))
        uid = str(ums_id * 10**6 + i) + ("0" * 15 if initial else "")
        op = "i" if initial else draw(st.sampled_from("iudb"))
        values = [
            None if z and draw(st.booleans()) else draw(COLUMN_TYPES[t])
            for t, z in zip(types, nullable, strict=True)
        ]
        tuples.append({"tuple": [str(ums_id), "2024-01-02 03:04:05.000", op, uid, *values]})
    text = (
        f'{{"protocol":{{"type":"{protocol}","version":"1.3"}},"schema":{{"namespace":'
        f'"mysql.demo.shop.orders.{draw(st.integers(0, 9))}.0.0","fields":[{fields}],"batchId":0}},'
        f'"payload":{json.dumps(tuples)}}}'
    )
    return text, key


@settings(max_examples=300, deadline=None)
@given(valid_messages())
def test_the_fast_path_gives_what_the_checked_path_gives(message_and_key):
    text, key = message_and_key
    decoder = Decoder({"shop.orders": key})
    checked = decoder.from_json(text, checked=True)
    assert decoder.read_json(text) == decoder.read_checked(text)  # the first of a shape: read checked
    assert decoder.read_json(text).payload == decoder.read_checked(text).payload  # then the fast path
    assert decoder.from_json(text) == checked
    assert decoder.from_json(text.encode()) == checked
