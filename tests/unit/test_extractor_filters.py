import pytest

from dbuslib.config import Capture
from dbuslib.filters import TableFilter


@pytest.mark.parametrize(
    ("include", "exclude", "table", "allowed"),
    [
        (("shop.*",), (), "shop.orders", True),
        (("shop.*",), (), "crm.orders", False),
        (("shop.*",), ("shop.tmp_*",), "shop.tmp_load", False),
        (("*.*",), ("mysql.*",), "mysql.user", False),
        (("shop.order?",), (), "shop.orders", True),
        (("shop.orders",), (), "shop.orders_archive", False),
        (("dbus.db_heartbeat_monitor", "shop.*"), (), "dbus.db_heartbeat_monitor", True),
    ],
)
def test_include_then_exclude(include, exclude, table, allowed):
    f = TableFilter(Capture(include=include, exclude=exclude))
    assert f.allows(*table.split(".")) is allowed
    assert f.allows(*table.split(".")) is allowed  # cached answer is the same
