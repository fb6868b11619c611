"""The log processor stage: shipped log lines -> rule operator groups -> UMS tables (docs/logs.md)."""
