"""The fork server the test MCP servers start from (tests/support/forkserver.py) behaves as the process it stands
for."""

import json
import os
import signal
import subprocess
import time

import pytest

from tests.support import forkserver

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def launch(*args):
    command = forkserver.launched(list(args))
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
    process = launch("-m", "tests.support.generated_mcp_server", "--tools", "1")
    process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"]
    process.stdin.close()  # as a client ends a stdio session: the server reads the end of its input and exits
    assert process.wait(timeout=10) == 0


def test_a_server_that_fails_exits_the_launcher_with_its_code_and_its_words_on_stderr():
    process = launch("-m", "demo.loyalty_mcp.server", "--db", os.devnull, "--no-such-option")
    _, stderr = process.communicate(timeout=10)
    assert process.returncode == 2  # argparse's exit code for a bad option
    assert stderr.decode().splitlines() == [
        "usage: python -m demo.loyalty_mcp.server [-h] --db DB [--http HOST:PORT]",
        *stderr.decode().splitlines()[1:-1],
        "python -m demo.loyalty_mcp.server: error: unrecognized arguments: --no-such-option",
    ]


def launched_server(*args):
    """(launcher, the fork server's child running the server); other tests' servers may be running beside it."""
    forkserver.socket_path()
    server = forkserver._running["process"].pid
    before = set(children_of(server))
    process = launch(*args)
    wait_until(lambda: len(set(children_of(server)) - before) == 1)
    [child] = set(children_of(server)) - before
    return process, child


def test_killing_the_launcher_kills_the_server_it_stands_for():
    process, child = launched_server("-m", "tests.support.generated_mcp_server", "--tools", "1")
    server = forkserver._running["process"].pid
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    wait_until(lambda: child not in children_of(server))
    assert process.returncode == -signal.SIGKILL


def test_a_server_killed_by_a_signal_ends_its_launcher_by_the_same_signal():
    process, child = launched_server("-m", "tests.support.generated_mcp_server", "--tools", "1")
    os.kill(child, signal.SIGTERM)
    assert process.wait(timeout=10) == -signal.SIGTERM


def test_a_signal_to_stop_reaches_the_program_so_its_own_shutdown_runs():
    """As a test stops a server it started (terminate(), SIGINT): the server's handler runs, its exit is the
    launcher's."""
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: (print('stopping cleanly', flush=True), sys.exit(0)))\n"
        "signal.signal(signal.SIGINT, lambda *_: (print('interrupted', flush=True), sys.exit(4)))\n"
        "print('ready', flush=True)\n"
        "while True: time.sleep(0.05)"
    )
    for stop, said, code_after in ((signal.SIGTERM, "stopping cleanly", 0), (signal.SIGINT, "interrupted", 4)):
        process = subprocess.Popen(forkserver.command(["-c", code]), stdout=subprocess.PIPE, text=True)
        assert process.stdout.readline() == "ready\n"
        process.send_signal(stop)
        assert process.wait(timeout=10) == code_after
        assert process.stdout.read() == f"{said}\n"


def test_code_runs_as_python_c_would_run_it_with_the_launchers_environment_and_directory(tmp_path):
    code = (
        "import json, os, sys, __main__\n"
        "from django.conf import settings\n"
        "print(json.dumps([sys.argv, sys.path[0], __name__, __main__.__dict__ is globals(), 'serve' in globals(),"
        " os.getcwd(), os.environ.get('PROBE'), settings.configured]))\n"
        "sys.exit(3)"
    )
    result = subprocess.run(
        forkserver.command(["-c", code, "one", "two"]), cwd=tmp_path, env=os.environ | {"PROBE": "seen"},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert json.loads(result.stdout) == [
        ["-c", "one", "two"],
        "",
        "__main__",
        True,
        False,
        str(tmp_path),
        "seen",
        False,
    ]


def test_a_script_runs_with_its_directory_first_on_the_path_as_python_script_would(tmp_path):
    (tmp_path / "helper.py").write_text("WORD = 'beside the script'\n")
    (tmp_path / "script.py").write_text(
        "import sys, helper\nprint(sys.argv[1:], helper.WORD, __name__)\nraise SystemExit('failed on purpose')\n"
    )
    result = subprocess.run(forkserver.command([str(tmp_path / "script.py"), "--flag"]), capture_output=True, text=True,
                            timeout=30)  # fmt: skip
    assert result.stdout == "['--flag'] beside the script __main__\n"
    assert (result.returncode, result.stderr) == (1, "failed on purpose\n")


def test_only_programs_are_forked():
    for args in ([], ["-c"], ["-S", "x.py"], ["-X", "importtime", "-c", "pass"]):
        with pytest.raises(ValueError):
            forkserver.command(args)
