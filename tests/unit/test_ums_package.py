"""The ums package: pure Python, public names exported, one error code per error class."""

import subprocess
import sys

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


@pytest.mark.parametrize("name", ums.__all__)
def test_every_public_name_is_exported(name):
    assert getattr(ums, name) is not None


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
