"""The `dbus` command, status screen, demo and stage launcher: the only package that imports stages (floor 5)."""
