"""Shared fixtures. Unit tests need nothing; integration fixtures live in tests/integration/conftest.py.

A Spark session a test makes runs its Python workers (Python UDFs, ``mapInArrow``) with this interpreter,
the project's venv, not the ``python3`` on PATH: PySpark reads ``PYSPARK_PYTHON`` when its context starts.
Tests that start stages or a cluster set their own.
"""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
