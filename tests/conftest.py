"""Shared fixtures. Unit tests need nothing; integration fixtures live in tests/integration/conftest.py."""
