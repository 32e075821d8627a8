"""A stdio MCP server runs with only its configured environment, in its own directory, under resource limits
(catalog.mcp_client.stdio_process and launcher), both when an admin tests its connection and when toolhub calls it."""

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from catalog.mcp_client import client as mcp_client
from catalog.mcp_client import launcher, stdio_process
from catalog.models import McpServer
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db

# Run by its path, not `-m`, so the test fork server leaves it alone: a fresh process the launcher really limits.
INTROSPECTING = [str(Path(__file__).parents[2] / "support" / "generated_mcp_server.py"), "--tools", "0", "--introspect"]
TOOLHUB_SECRETS = {
    "SECRET_KEY": "toolhub-secret-key",
    "DATABASE_URL": "postgres://toolhub:db-password@db/toolhub",
    "REDIS_URL": "redis://:redis-password@redis:6379/0",
    "OPENAI_API_KEY": "sk-toolhub-model-key",
    "TOOLHUB_MODEL_API_KEY": "toolhub-model-key",
}
MIB = 1024 * 1024
NO_LIMIT = resource.RLIM_INFINITY


@pytest.fixture(autouse=True)
def _close_connections():
    yield
    mcp_client.close_all()


@pytest.fixture
def servers_dir(settings, tmp_path, monkeypatch):
    """toolhub's process with secrets in its environment, small limits, and servers' directories under tmp_path."""
    for name, value in TOOLHUB_SECRETS.items():
        monkeypatch.setenv(name, value)
    for name in ("USER", "LOGNAME", "SHELL", "TERM"):  # what the MCP SDK's stdio transport passes on by default
        monkeypatch.setenv(name, f"toolhub-{name.lower()}")
    settings.TOOLHUB_MCP_SERVERS_DIR = tmp_path / "servers"
    settings.TOOLHUB_MCP_STDIO_MEMORY_MB = 768
    settings.TOOLHUB_MCP_STDIO_ADDRESS_SPACE_MB = 0
    settings.TOOLHUB_MCP_STDIO_CPU_SECONDS = 120
    settings.TOOLHUB_MCP_STDIO_PROCESSES = 2048
    settings.TOOLHUB_MCP_STDIO_OPEN_FILES = 256
    return tmp_path / "servers"


def introspecting_server(name="introspect") -> McpServer:
    return McpServer.objects.create(
        name=name, command=sys.executable, args=INTROSPECTING, env={"API_TOKEN": "configured-token", "MODE": "test"}
    )


def assert_started_as_configured(report: dict, directory: Path) -> None:
    environ = report["environ"]
    assert set(environ) == {"PATH", "LANG", "HOME", "PYTHONPATH", "API_TOKEN", "MODE"}
    assert (environ["API_TOKEN"], environ["MODE"], environ["HOME"]) == ("configured-token", "test", str(directory))
    assert not set(TOOLHUB_SECRETS.values()) & set(environ.values())
    assert report["cwd"] == str(directory)
    assert report["limits"] == {
        "RLIMIT_DATA": [768 * MIB, 768 * MIB],
        "RLIMIT_AS": [NO_LIMIT, NO_LIMIT],
        "RLIMIT_CPU": [120, 120],
        "RLIMIT_NPROC": [2048, 2048],
        "RLIMIT_NOFILE": [256, 256],
        "RLIMIT_CORE": [0, 0],
    }


def test_a_called_server_has_its_configured_environment_its_own_directory_and_limits(servers_dir):
    server = introspecting_server()

    result = mcp_client.call_tool(server, "gen_process", {})

    assert not result.is_error, result.content
    assert_started_as_configured(json.loads(result.content), servers_dir / "introspect")


def test_test_connection_starts_the_server_the_same_way(client, servers_dir):
    server = introspecting_server("tested")
    client.force_login(make_user(username="admin", role="admin"))

    response = client.post(reverse("mcp-server-test", args=[server.name]))

    assert "the server lists 1 tool" in response.content.decode()
    report = json.loads((servers_dir / "tested" / "process.json").read_text())
    assert_started_as_configured(report, servers_dir / "tested")


def test_configured_variables_win_over_the_base(settings, tmp_path):
    env = stdio_process.environment(program="node", home=tmp_path, configured={"HOME": "/srv/node-home", "X": "1"})

    assert env == {"PATH": env["PATH"], "LANG": "C.UTF-8", "HOME": "/srv/node-home", "X": "1"}


def test_default_limits_bound_memory_written_not_address_space_and_never_dump_core():
    assert stdio_process.limits() == {"data": 1024 * MIB, "cpu": 3600, "nproc": 4096, "nofile": 1024, "core": 0}


def test_a_relative_command_runs_from_the_servers_own_directory(servers_dir):
    directory = servers_dir / "local"
    directory.mkdir(parents=True)
    (directory / "serve").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (directory / "serve").chmod(0o755)
    server = McpServer.objects.create(name="local", command="./serve", args=INTROSPECTING)

    result = mcp_client.call_tool(server, "gen_process", {})

    assert not result.is_error, result.content
    assert json.loads(result.content)["cwd"] == str(directory)


def run_launcher(*options: str, env: dict) -> subprocess.CompletedProcess:
    report = "import os, resource; print(sorted(os.environ), resource.getrlimit(resource.RLIMIT_NOFILE))"
    command = launcher.command_line(program=sys.executable, args=["-c", report], limits={}, keep=())
    return subprocess.run([*command[:4], *options, "--", *command[5:]], env=env, capture_output=True, text=True)


def test_the_launcher_keeps_only_the_named_variables_and_sets_its_limits():
    env = {"KEPT": "1", "LANG": "C.UTF-8", "DROPPED": "2", "PATH": "/usr/bin"}

    ran = run_launcher("--limit=nofile=100", "--keep=KEPT", "--keep=LANG", env=env)

    assert (ran.returncode, ran.stdout) == (0, "['KEPT', 'LANG'] (100, 100)\n"), ran.stderr


def test_the_launcher_refuses_what_it_does_not_know():
    ran = run_launcher("--limit=swap=1", env={})

    assert ran.returncode == 2 and "unknown limit 'swap'" in ran.stderr
