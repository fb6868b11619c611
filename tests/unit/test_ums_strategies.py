"""The hypothesis strategies of ums_strategies.py generate what they promise."""

from __future__ import annotations

from hypothesis import given
from ums_strategies import messages

from ums import SYSTEM_FIELDS


@given(messages())
def test_generated_messages_hold_one_namespace_and_their_protocols_fixed_fields(msg):
    fixed = SYSTEM_FIELDS[msg.protocol]
    assert msg.schema.fields[: len(fixed)] == fixed
    assert all(len(row) == len(msg.schema.fields) for row in msg.payload)
