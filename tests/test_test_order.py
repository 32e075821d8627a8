"""The suite's own scheduling (tests/conftest.py): files longest first, each file's tests together and in order."""

import json
import subprocess
import sys
from types import SimpleNamespace

from tests import conftest


def test_files_run_longest_first_each_file_together_and_in_order_and_unknown_files_last(tmp_path, monkeypatch):
    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"tests/test_short.py": 1.5, "tests/test_long.py": 40.0}))
    monkeypatch.setattr(conftest, "DURATIONS", durations)
    names = ["tests/test_new.py::a", "tests/test_short.py::a", "tests/test_short.py::b", "tests/test_long.py::a",
             "tests/test_other_new.py::a", "tests/test_long.py::b[x]", "tests/test_long.py::b[y]"]  # fmt: skip
    items = [SimpleNamespace(nodeid=name) for name in names]
    conftest._longest_files_first(items)
    assert [item.nodeid for item in items] == [
        "tests/test_long.py::a",
        "tests/test_long.py::b[x]",
        "tests/test_long.py::b[y]",
        "tests/test_short.py::a",
        "tests/test_short.py::b",
        "tests/test_new.py::a",
        "tests/test_other_new.py::a",
    ]


def test_the_durations_file_names_only_test_files_that_exist():
    listed = json.loads(conftest.DURATIONS.read_text())
    root = conftest.DURATIONS.parent.parent
    assert listed and all((root / path).is_file() and path.startswith("tests/") for path in listed)


def test_the_longest_file_first_still_runs_transactional_tests_after_the_others():
    """pytest-django runs the tests whose database is rolled back before those whose tables are emptied after
    (as Django does); the file order must not undo that, or a flush empties the migrated rows the next test reads."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not integration",
            "tests/test_api_fuzz.py",
            "tests/test_router.py",
        ],  # fmt: skip
        cwd=conftest.DURATIONS.parent.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    collected = [line for line in result.stdout.splitlines() if "::" in line]
    fuzzed = [i for i, line in enumerate(collected) if "test_fuzzed_requests" in line]  # transaction=True
    routed = [i for i, line in enumerate(collected) if line.startswith("tests/test_router.py")]
    assert json.loads(conftest.DURATIONS.read_text())["tests/test_api_fuzz.py"] > 0  # the longer file of the two
    assert fuzzed and routed and max(routed) < min(fuzzed)
