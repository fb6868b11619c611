"""The ums package: pure Python, public names exported, one error code per error class."""

import importlib
import pkgutil
import subprocess
import sys
from types import ModuleType

import pytest

import ums
from ums import errors


def test_importing_ums_pulls_in_no_spark_kafka_or_database_client():
    code = (
        "import sys, ums; bad = [m for m in ('pyspark', 'kafka', 'pymysql', 'kazoo', 'sqlalchemy',"
        " 'pymysqlreplication', 'influxdb_client') if m in sys.modules]; print(bad)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_all_lists_exactly_the_public_names_the_package_imports():
    public = {n for n, v in vars(ums).items() if not n.startswith("_") and not isinstance(v, ModuleType)}
    assert len(ums.__all__) == len(set(ums.__all__)), "a name listed twice"
    assert set(ums.__all__) == public


def _submodules() -> list[ModuleType]:
    return [importlib.import_module(f"ums.{m.name}") for m in pkgutil.iter_modules(ums.__path__)]


@pytest.mark.parametrize("name", ums.__all__)
def test_every_exported_name_is_defined_in_a_ums_module(name):
    value = getattr(ums, name)
    homes = [m.__name__ for m in _submodules() if any(v is value for v in vars(m).values())]
    assert homes, f"ums.{name} is defined in no ums module"


def test_error_codes_are_stable_and_distinct():
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.UmsError)]
    codes = {c.code for c in classes}
    assert len(codes) == len(classes)
    assert codes == {
        "UMS_ERROR",
        "UMS_BAD_NAMESPACE",
        "UMS_BAD_VALUE",
        "UMS_BAD_MESSAGE",
        "UMS_BAD_POSITION",
        "UMS_BAD_TIMESTAMP",
        "UMS_BAD_COLUMN_TYPE",
        "UMS_BAD_AVRO",
        "UMS_BAD_CONTROL",
    }
    assert all(issubclass(c, ValueError) for c in classes)
