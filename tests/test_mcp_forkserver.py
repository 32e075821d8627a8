"""The fork server the test MCP servers start from (tests/mcp_forkserver.py) behaves as the process it stands for."""

import json
import os
import signal
import subprocess
import sys
import time

from tests import mcp_forkserver

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def launch(*args):
    command = [sys.executable, "-S", str(mcp_forkserver.LAUNCHER), mcp_forkserver.socket_path(), *args]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def wait_until(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_launched_server_answers_on_the_launchers_pipes_and_its_end_is_the_launchers_exit():
    process = launch("-m", "tests.generated_mcp_server", "--tools", "1")
    process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"]
    process.stdin.close()  # as a client ends a stdio session: the server reads the end of its input and exits
    assert process.wait(timeout=10) == 0


def test_a_server_that_fails_exits_the_launcher_with_its_code_and_its_words_on_stderr():
    process = launch("-m", "demo_mcp.loyalty_server", "--db", os.devnull, "--no-such-option")
    _, stderr = process.communicate(timeout=10)
    assert process.returncode == 2  # argparse's exit code for a bad option
    assert stderr.decode().splitlines() == [
        "usage: python -m demo_mcp.loyalty_server [-h] --db DB [--http HOST:PORT]",
        *stderr.decode().splitlines()[1:-1],
        "python -m demo_mcp.loyalty_server: error: unrecognized arguments: --no-such-option",
    ]


def launched_server(*args):
    """(launcher, the fork server's child running the server); other tests' servers may be running beside it."""
    mcp_forkserver.socket_path()
    forkserver = mcp_forkserver._running["process"].pid
    before = set(children_of(forkserver))
    process = launch(*args)
    wait_until(lambda: len(set(children_of(forkserver)) - before) == 1)
    [child] = set(children_of(forkserver)) - before
    return process, child


def test_killing_the_launcher_kills_the_server_it_stands_for():
    process, child = launched_server("-m", "tests.generated_mcp_server", "--tools", "1")
    forkserver = mcp_forkserver._running["process"].pid
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    wait_until(lambda: child not in children_of(forkserver))
    assert process.returncode == -signal.SIGKILL


def test_a_server_killed_by_a_signal_ends_its_launcher_by_the_same_signal():
    process, child = launched_server("-m", "tests.generated_mcp_server", "--tools", "1")
    os.kill(child, signal.SIGTERM)
    assert process.wait(timeout=10) == -signal.SIGTERM
