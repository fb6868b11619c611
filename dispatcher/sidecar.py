"""The dispatcher's sidecar in real-time mode: the records the JVM does not route alone, in order.

Usage: python -m dispatcher.sidecar --config conf/dbus.yaml --source demo

Started by the JVM (dispatcher/jvm ``DispatchUdf``), one per partition of ``<ds>``, never by hand: it
answers frames on stdin/stdout (dbuslib/sidecar.py). A request ``route, topic, value, key`` gets the
routes ``dispatcher.job`` gives that record (``topic`` set: a record the JVM tagged routable, whose topic
is made sure to exist; else its bytes, routed by ``dispatcher.routing.route``), five fields per route:
topic, code, error, withheld, key.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from dbuslib import sidecar
from dbuslib.ship import load_document
from dbuslib.sidecar import Field, ProtocolError, text
from dispatcher.job import _python_routes, routing
from dispatcher.routing import Router


def handler(router: Router, ensure_topic: Callable[[str], None]) -> Callable[[list[Field]], Sequence[Field]]:
    def handle(fields: list[Field]) -> list[Field]:
        if len(fields) != 4 or fields[0] != b"route":
            msg = f"expected route, topic, value, key; got {len(fields)} field(s)"
            raise ProtocolError(msg)
        _, topic, value, key = fields
        out: list[Field] = []
        for route in _python_routes(router, ensure_topic, text(topic), value, key):
            out.extend(None if f is None else str(f).encode() for f in route)
        return out

    return handle


def main(argv: list[str] | None = None) -> int:
    return sidecar.main(
        "dispatcher.sidecar", __doc__, lambda doc, ds: handler(*routing(load_document(doc), ds)), argv
    )


if __name__ == "__main__":
    sys.exit(main())
