"""The suite's own scheduling (tests/conftest.py): files longest first, each file's tests together and in order."""

import json
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
