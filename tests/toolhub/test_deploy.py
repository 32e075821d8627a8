"""The production layout's files (deploy/) agree with each other, and /healthz answers the balancer.

tests/integration/test_layout.py runs the Procfile and the HAProxy config; systemd and compose cannot run here,
so what they must share with the Procfile (the programs and their options, the variables) is checked as text.
"""

import re
import shlex
from pathlib import Path

import pytest
import yaml
from honcho.environ import parse, parse_procfile

from toolhub.health import healthz

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PROCFILE = parse_procfile((DEPLOY / "Procfile").read_text()).processes
EXAMPLE = (DEPLOY / "toolhub.env.example").read_text()
COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
TOOLHUB_PROCESSES = ("web1", "web2", "worker1", "worker2", "beat")


def shape(command: str) -> list[str]:
    """A command's program and options, without the values a deployment chooses (variables, paths, ports)."""
    words = shlex.split(command)
    if words[:2] == ["/bin/sh", "-c"] or words[:2] == ["sh", "-c"]:
        words = shlex.split(words[2])
    words = [word for word in words if word != "exec"]
    return [Path(words[0]).name] + [word for word in words[1:] if not re.search(r"[$%=/]", word)]


def systemd_command(process: str) -> str:
    kind, number = re.fullmatch(r"([a-z]+?)(\d?)", process).groups()
    unit = (DEPLOY / "systemd" / (f"toolhub-{kind}@.service" if number else f"toolhub-{kind}.service")).read_text()
    (line,) = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    return line.removeprefix("ExecStart=").replace("%i", number)


def compose_command(process: str) -> str:
    command = COMPOSE["services"][process]["command"]
    return command if isinstance(command, str) else shlex.join(command)


@pytest.mark.parametrize("process", TOOLHUB_PROCESSES)
def test_systemd_and_compose_run_the_procfiles_commands(process):
    assert shape(systemd_command(process)) == shape(PROCFILE[process])
    assert shape(compose_command(process)) == shape(PROCFILE[process])


def test_every_variable_the_layout_reads_is_in_the_env_example():
    files = [path for path in DEPLOY.rglob("*") if path.is_file() and path.name != "toolhub.env.example"]
    lines = [line.replace("%i", "1") for path in files for line in path.read_text().splitlines()]
    code = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    read = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)[-:}\[]", code))
    example = set(parse(EXAMPLE)) | set(re.findall(r"^([A-Z][A-Z0-9_]*)=", EXAMPLE, re.M))  # empty ones too
    assert read - example == set()
    assert "TOOLHUB_BALANCER_BIND" in read and "TOOLHUB_WEB2_PORT" in read


def test_compose_runs_every_process_of_the_procfile():
    assert set(PROCFILE) <= set(COMPOSE["services"])


@pytest.mark.asyncio
@pytest.mark.parametrize("method, body", [("GET", b"ok\n"), ("HEAD", b"")])
async def test_healthz_answers_without_django(method, body):
    sent = []

    async def send(message):
        sent.append(message)

    await healthz({"type": "http", "method": method, "path": "/healthz"}, None, send)

    assert sent[0]["status"] == 200 and (b"cache-control", b"no-store") in sent[0]["headers"]
    assert sent[1]["body"] == body
