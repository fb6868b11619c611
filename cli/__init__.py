"""The `dbus` command, status screen, demo and stage launcher (floor 5): the only package that imports
stages."""
