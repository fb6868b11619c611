"""Kafka record keys of UMS messages, exactly as the original builds them (spec 1.12).

The heartbeat monitor splits keys on ``.`` and expects 10 parts, so the format is load-bearing:

    >>> ns = Namespace("mysql", "demo", "shop", "orders", 3)
    >>> data_key(ProtocolType.DATA_INCREMENT_DATA, ns, 1704164645000, "demo")
    'data_increment_data.mysql.demo.shop.orders.3.0.0.1704164645000|demo.wh_placeholder'

The original's log processor wrote the same keys without ``|<dsName>`` (log spec §5.6); ``ds_name=None``
gives that form:

    >>> log = Namespace("log_logstash", "applog", "applog_schema", "order_events", 3, "app-01_prod")
    >>> data_key(ProtocolType.DATA_INCREMENT_DATA, log, 1709604930123, None)
    'data_increment_data.log_logstash.applog.applog_schema.order_events.3.app-01_prod.0.1709604930123.wh_placeholder'
"""

from __future__ import annotations

from ums.errors import BadMessageError
from ums.message import ProtocolType
from ums.namespace import Namespace

PLACEHOLDER = "wh_placeholder"


def data_key(protocol: ProtocolType, namespace: Namespace, ums_ts_epoch_ms: int, ds_name: str | None) -> str:
    """``<type>.<namespace>.<ums_ts_ ms>|<dsName>.wh_placeholder`` (appender output); without ``|<dsName>``
    when ``ds_name`` is None (log tables)."""
    return f"{protocol.value}.{namespace}.{_ms(ums_ts_epoch_ms)}{_ds_suffix(ds_name)}.{PLACEHOLDER}"


def heartbeat_key(
    namespace: Namespace, packet_time_ms: int, tx_time_ms: int, table_status: str, ds_name: str | None
) -> str:
    """``data_increment_heartbeat.<ns>.<time>|<txTime>|<status>|<dsName>.wh_placeholder``; without
    ``|<dsName>`` when ``ds_name`` is None (log tables)."""
    status = _ds(table_status)
    head = f"{ProtocolType.DATA_INCREMENT_HEARTBEAT.value}.{namespace}"
    times = f"{_ms(packet_time_ms)}|{_ms(tx_time_ms)}|{status}"
    return f"{head}.{times}{_ds_suffix(ds_name)}.{PLACEHOLDER}"


def initial_data_key(namespace: Namespace, now_ms: int) -> str:
    """Full-pull key ``data_initial_data.<namespace>.<now ms>.wh_placeholder`` (no dsName)."""
    return data_key(ProtocolType.DATA_INITIAL_DATA, namespace, now_ms, None)


def _ds_suffix(ds_name: str | None) -> str:
    return "" if ds_name is None else f"|{_ds(ds_name)}"


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
