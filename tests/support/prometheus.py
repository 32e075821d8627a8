"""Prometheus for integration tests: Debian's /usr/bin/prometheus (`make test-integration` installs it) scraping a
running toolhub's /metrics with the bearer token, as deploy/prometheus/prometheus.yml does, but every second, so a
test reads through Prometheus's HTTP API (/api/v1/query) what a real scrape stored.

Each server has its own configuration, storage and free loopback port in a temporary directory, and is always
stopped; the Debian package's own service is never used.

    with prometheus_server(base_url, token, rule_files=[ALERTS]) as prometheus:
        prometheus.wait_for('up{job="toolhub"}', lambda value: value == 1)
"""

import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager, suppress
from pathlib import Path

import yaml

from tests.support.servers import ROOT, free_port, output_of

PROMETHEUS = Path("/usr/bin/prometheus")
PROMTOOL = Path("/usr/bin/promtool")
JOB = "toolhub"


class PrometheusServer:
    def __init__(self, process: subprocess.Popen, log, port: int):
        self.process = process
        self.log = log
        self.url = f"http://127.0.0.1:{port}"

    def output(self) -> str:
        return output_of(self.log)

    def get(self, path: str, **query) -> dict:
        with urllib.request.urlopen(f"{self.url}{path}?{urllib.parse.urlencode(query)}", timeout=30) as response:
            answer = json.load(response)
        assert answer["status"] == "success", answer
        return answer["data"]

    def value(self, promql: str) -> float | None:
        """The value of an instant query that selects one series; None when it selects none."""
        result = self.get("/api/v1/query", query=promql)["result"]
        assert len(result) <= 1, f"{promql} selects {len(result)} series"
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, promql: str, condition, *, seconds: float = 30) -> float | None:
        """The query's value once `condition(value)` holds (scrapes come every second)."""
        deadline = time.monotonic() + seconds
        while True:
            value = self.value(promql)
            if condition(value):
                return value
            assert self.process.poll() is None, f"Prometheus exited: {self.output()}"
            assert time.monotonic() < deadline, f"{promql} was {value} after {seconds} s"
            time.sleep(0.25)

    def rules_evaluated(self, *, seconds: float = 30) -> list[dict]:
        """The loaded alerting and recording rules once each has been evaluated (`health` no longer "unknown")."""
        deadline = time.monotonic() + seconds
        while True:
            rules = [rule for group in self.get("/api/v1/rules")["groups"] for rule in group["rules"]]
            if all(rule["health"] != "unknown" for rule in rules):
                return rules
            assert time.monotonic() < deadline, f"rules not evaluated after {seconds} s: {rules}"
            time.sleep(0.25)

    def wait_until_ready(self, seconds: float = 30) -> None:
        deadline = time.monotonic() + seconds
        while True:
            with suppress(OSError):
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            assert self.process.poll() is None, f"Prometheus exited: {self.output()}"
            assert time.monotonic() < deadline, f"Prometheus was not ready within {seconds} s: {self.output()}"
            time.sleep(0.2)


def scrape_config(base_url: str, token_file: Path, rule_files=()) -> dict:
    """deploy/prometheus/prometheus.yml's job, on `base_url` and every second."""
    target = urllib.parse.urlsplit(base_url)
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [{
            "job_name": JOB,
            "metrics_path": "/metrics",
            "scheme": target.scheme,
            "scrape_timeout": "1s",
            "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
            "static_configs": [{"targets": [target.netloc]}],
        }],
    }  # fmt: skip


@contextmanager
def prometheus_server(base_url: str, token: str, *, rule_files=()):
    """Yield a ready PrometheusServer scraping `base_url`'s /metrics with `token`; stop it and remove its data after."""
    assert PROMETHEUS.exists(), f"{PROMETHEUS} is missing: `make test-integration` installs Debian's prometheus"
    directory = Path(tempfile.mkdtemp(prefix="toolhub-prometheus-"))
    token_file = directory / "token"
    token_file.write_text(token)
    config = directory / "prometheus.yml"
    config.write_text(yaml.safe_dump(scrape_config(base_url, token_file, rule_files)))
    port = free_port()
    log = tempfile.TemporaryFile()
    command = [str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
               f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    server = PrometheusServer(process, log, port)
    try:
        server.wait_until_ready()
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        log.close()
        shutil.rmtree(directory, ignore_errors=True)


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(PROMTOOL), *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
