"""The readers behind ``dbus status`` and the web console (status/readers.py)."""
