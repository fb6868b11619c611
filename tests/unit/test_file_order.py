"""tests/fileorder.py: each exclusive file is followed by unit files of about its duration."""

from __future__ import annotations

from fileorder import order_files


def test_exclusive_files_come_first_each_followed_by_unit_files_that_fit_its_duration():
    files = [
        "tests/integration/test_a.py",
        "tests/integration/test_cluster.py",
        "tests/integration/test_heartbeat.py",
        "tests/unit/test_big.py",
        "tests/unit/test_mid.py",
        "tests/unit/test_small.py",
        "tests/unit/test_new.py",
    ]
    exclusive = {"tests/integration/test_cluster.py", "tests/integration/test_heartbeat.py"}
    took = {
        "tests/integration/test_cluster.py": 200,
        "tests/integration/test_heartbeat.py": 60,
        "tests/unit/test_big.py": 150,
        "tests/unit/test_mid.py": 55,
        "tests/unit/test_small.py": 40,
    }
    assert order_files(files, exclusive, took) == [
        "tests/integration/test_cluster.py",
        "tests/unit/test_big.py",  # 150, then test_small (40) fits the 50 left, test_mid (55) does not
        "tests/unit/test_small.py",
        "tests/unit/test_new.py",  # not in the durations: 1 s, fits the 10 s left
        "tests/integration/test_heartbeat.py",
        "tests/unit/test_mid.py",
        "tests/integration/test_a.py",
    ]


def test_an_alone_file_comes_first_followed_by_an_integration_file_that_waits_for_it():
    files = ["tests/integration/test_a.py", "tests/integration/test_hb.py", "tests/unit/test_u.py"]
    out = order_files(
        files, {"tests/integration/test_hb.py"}, {}, frozenset({"tests/integration/test_hb.py"})
    )
    assert out == ["tests/integration/test_hb.py", "tests/integration/test_a.py", "tests/unit/test_u.py"]


def test_shared_integration_files_come_longest_first_then_the_unit_files_left():
    files = [
        "tests/integration/test_a.py",
        "tests/integration/test_b.py",
        "tests/integration/test_c.py",
        "tests/unit/test_u.py",
        "tests/unit/test_v.py",
    ]
    took = {"tests/integration/test_b.py": 300, "tests/integration/test_c.py": 10, "tests/unit/test_v.py": 5}
    assert order_files(files, set(), took) == [
        "tests/integration/test_b.py",
        "tests/integration/test_a.py",  # not in the durations: 30 s
        "tests/integration/test_c.py",
        "tests/unit/test_v.py",
        "tests/unit/test_u.py",
    ]


def test_every_file_appears_once_whatever_the_durations():
    files = [f"tests/unit/test_{i}.py" for i in range(5)] + ["tests/integration/test_x.py"]
    out = order_files(files, {"tests/integration/test_x.py"}, {})
    assert sorted(out) == sorted(files) and out[0] == "tests/integration/test_x.py"
