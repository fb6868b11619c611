"""Kafka record keys of UMS messages, exactly as the original builds them (spec 1.12).

The heartbeat monitor splits keys on ``.`` and expects 10 parts, so the format is load-bearing:

    >>> ns = Namespace("mysql", "demo", "shop", "orders", 3)
    >>> data_key(ProtocolType.DATA_INCREMENT_DATA, ns, 1704164645000, "demo")
    'data_increment_data.mysql.demo.shop.orders.3.0.0.1704164645000|demo.wh_placeholder'
"""

from __future__ import annotations

from ums.errors import BadMessageError
from ums.message import ProtocolType
from ums.namespace import Namespace

PLACEHOLDER = "wh_placeholder"


def data_key(protocol: ProtocolType, namespace: Namespace, ums_ts_epoch_ms: int, ds_name: str) -> str:
    """``<type>.<namespace>.<ums_ts_ ms>|<dsName>.wh_placeholder`` (appender output)."""
    return f"{protocol.value}.{namespace}.{_ms(ums_ts_epoch_ms)}|{_ds(ds_name)}.{PLACEHOLDER}"


def heartbeat_key(
    namespace: Namespace, packet_time_ms: int, tx_time_ms: int, table_status: str, ds_name: str
) -> str:
    """``data_increment_heartbeat.<ns>.<time>|<txTime>|<status>|<dsName>.wh_placeholder``."""
    status = _ds(table_status)
    head = f"{ProtocolType.DATA_INCREMENT_HEARTBEAT.value}.{namespace}"
    return f"{head}.{_ms(packet_time_ms)}|{_ms(tx_time_ms)}|{status}|{_ds(ds_name)}.{PLACEHOLDER}"


def initial_data_key(namespace: Namespace, now_ms: int) -> str:
    """Full-pull key ``data_initial_data.<namespace>.<now ms>.wh_placeholder`` (no dsName)."""
    return f"{ProtocolType.DATA_INITIAL_DATA.value}.{namespace}.{_ms(now_ms)}.{PLACEHOLDER}"


def _ms(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        msg = f"key timestamp {value!r}: expected non-negative epoch milliseconds"
        raise BadMessageError(msg)
    return value


def _ds(value: str) -> str:
    if not isinstance(value, str) or not value or "." in value or "|" in value:
        msg = f"key part {value!r}: must be non-empty, without '.' or '|'"
        raise BadMessageError(msg)
    return value
