"""Arize Phoenix for integration tests: a real trace store to point toolhub's OTLP exporter at, as a deployment
would, and to read back through Phoenix's REST API what it stored and what it made of the GenAI attributes.

Phoenix runs from its own venv (var/phoenix-venv: `make test-integration` installs requirements/phoenix.txt), on free
loopback ports, with its SQLite database in a temporary directory, and is always stopped. It takes 15-30 s to start
(most of it importing), so `phoenix_server()` yields as soon as the process runs: the caller starts its own servers
meanwhile and calls `wait_until_ready()` before anything is exported to it.

    with phoenix_server() as phoenix:       # phoenix.url: what OTEL_EXPORTER_OTLP_ENDPOINT names (.../v1/traces)
        ...                                 # start Daphne, a worker
        phoenix.wait_until_ready()
        spans = phoenix.wait_for_spans("toolhub", trace_id, lambda spans: ..., seconds=60)
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager, suppress
from pathlib import Path

from tests.support.servers import ROOT, free_port, output_of

PHOENIX = ROOT / "var" / "phoenix-venv" / "bin" / "phoenix"


class PhoenixServer:
    def __init__(self, process: subprocess.Popen, log, port: int):
        self.process = process
        self.log = log
        self.url = f"http://127.0.0.1:{port}"

    def output(self) -> str:
        return output_of(self.log)

    def wait_until_ready(self, seconds: float = 120) -> None:
        """Until /readyz answers (the database migrated, the OTLP endpoint served)."""
        deadline = time.monotonic() + seconds
        while True:
            with suppress(OSError):
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=2) as response:
                    if response.status == 200:
                        return
            assert self.process.poll() is None, f"Phoenix exited: {self.output()}"
            assert time.monotonic() < deadline, f"Phoenix was not ready within {seconds} s: {self.output()}"
            time.sleep(0.3)

    def get(self, path: str, **query) -> dict:
        url = f"{self.url}{path}?{urllib.parse.urlencode(query, doseq=True)}"
        with urllib.request.urlopen(url, timeout=30) as response:
            return json.load(response)

    def spans(self, project: str, trace_id: str) -> list[dict]:
        """The spans of one trace in a project (REST: GET /v1/projects/{project}/spans), none while the project does
        not exist yet (Phoenix makes it with the first span that names it)."""
        try:
            return self.get(f"/v1/projects/{urllib.parse.quote(project)}/spans", trace_id=trace_id, limit=1000)["data"]
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return []
            raise

    def wait_for_spans(self, project: str, trace_id: str, condition, *, seconds: float = 60) -> list[dict]:
        """The trace's spans once `condition(spans)` holds; AssertionError with the names stored when it never does."""
        deadline = time.monotonic() + seconds
        while True:
            spans = self.spans(project, trace_id)
            if condition(spans):
                return spans
            assert self.process.poll() is None, f"Phoenix exited: {self.output()}"
            assert time.monotonic() < deadline, f"spans stored: {sorted(span['name'] for span in spans)}"
            time.sleep(0.5)


def phoenix_env(directory: Path, port: int) -> dict:
    # Nothing of the test's own configuration (OTEL_*, Django's, the databases'); bytecode written once into
    # Phoenix's venv, which halves its later starts.
    unset = ("PYTHONDONTWRITEBYTECODE", "DJANGO_SETTINGS_MODULE", "DATABASE_URL")
    env = {k: v for k, v in os.environ.items() if k not in unset and not k.startswith(("OTEL_", "PHOENIX_"))}
    return env | {
        "PHOENIX_WORKING_DIR": str(directory),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),  # the UI, the REST API and OTLP over HTTP (/v1/traces)
        "PHOENIX_GRPC_PORT": str(free_port()),  # OTLP over gRPC: unused, but it must not take the default 4317
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",  # no web fonts nor downloads: the tests have no network
    }


@contextmanager
def phoenix_server():
    """Yield a started PhoenixServer (not yet ready: `wait_until_ready`); stop it and remove its data after."""
    assert PHOENIX.exists(), f"{PHOENIX} is missing: `make test-integration` installs it (requirements/phoenix.txt)"
    directory = Path(tempfile.mkdtemp(prefix="toolhub-phoenix-"))
    port = free_port()
    log = tempfile.TemporaryFile()
    process = subprocess.Popen([str(PHOENIX), "serve"], cwd=directory, env=phoenix_env(directory, port), stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        yield PhoenixServer(process, log, port)
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        log.close()
        shutil.rmtree(directory, ignore_errors=True)
