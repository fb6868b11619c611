"""The web console (``dbus console``, docs/console.md): the bus at a glance, full pulls, dead letters,
alerts and log rules in a browser. The top floor beside ``cli/``: it reads through the same readers
``dbus status`` uses (status/readers.py) and acts through the stages' own request paths."""
