"""Test subprocesses start as forks of one warm interpreter instead of fresh ones (test processes only).

Two kinds of processes the tests start spent most of their CPU importing what every one of them imports:
- the test MCP servers (`python -m demo.loyalty_mcp.server ...`, `python -m tests.support.generated_mcp_server ...`,
  `python -m tests.support.asking_mcp_server`), about a hundred a fast stage at ~0.7 s of CPU each for the MCP SDK:
  `install()` (tests/conftest.py) wraps the SDK's spawn so that exactly those commands run through the launcher;
- the fresh Django processes of the settings and checks tests (`python -c CODE`, `python manage.py ...`, through
  `command()`), ~1.6-2 s of CPU each, mostly importing the MCP SDK, Django, Celery, numpy and the rest.

The launcher (tests/support/fork_launch.py, stdlib only) runs in the process's place with the same arguments after it:
the caller still starts a process, talks to it over its pipes, sees its output end and its exit code, and may kill it.
The launcher hands its stdin, stdout and stderr, arguments, working directory and environment to this fork server
(one per test process, started at first use), which imported those packages once, never toolhub's own modules nor
Django's settings (a child reads its settings from its own environment, as a fresh process does), and forks a child
that runs the module, code or script as __main__ on those pipes.

    python -m tests.support.forkserver SOCKET      (cwd: the repository; stdin: a pipe from the test process)

The fork server ends when its stdin ends (the test process is gone), killing its children. A launcher that ends
before its child (killed by a test or by the SDK) gets its child killed at once; a child that ends has its status
sent to its launcher, which exits the same way; a signal the launcher was sent to stop it (SIGTERM and the like) is
passed on to the child. Any other command is spawned as it was.
"""

import array
import atexit
import importlib
import json
import os
import runpy
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
import types
from pathlib import Path

MODULES = ("demo.loyalty_mcp.server", "tests.support.generated_mcp_server", "tests.support.asking_mcp_server")
# What the fork server imports before it forks: the test MCP servers, and the third-party packages a toolhub process
# imports (none of them reads Django's settings or starts a thread at import).
WARM = (
    *MODULES,
    "django.core.management",
    "django.db.models",
    "django.core.handlers.asgi",
    "django.urls",
    "mcp.server.auth.middleware.bearer_auth",
    "mcp.client.stdio",
    "celery",
    "numpy",
    "scipy.sparse",
    "bm25s",
    "openai",
    "channels.layers",
    "psycopg",
    "redis",
    "tiktoken",
    # What django.setup() imports for toolhub's apps (~0.3 s of each fork's ~0.4 s setup): Daphne's Twisted and
    # Autobahn, but never twisted.internet.reactor (daphne.server installs its own reactor in the fork that
    # imports it), django-oauth-toolkit's oauthlib and jwcrypto, Celery's app and worker.
    "twisted.internet.asyncioreactor",
    "twisted.internet.endpoints",
    "twisted.web.http",
    "autobahn.twisted.websocket",
    "oauthlib.oauth2",
    "jwcrypto.jwk",
    "celery.app.base",
    "celery.worker",
)
LAUNCHER = Path(__file__).with_name("fork_launch.py")
REPOSITORY = Path(__file__).resolve().parents[2]

# --- in the test process ------------------------------------------------------------------------------------------

_lock = threading.Lock()
_running: dict = {}


def install() -> None:
    """Spawn this process's test MCP servers through the fork server (idempotent)."""
    from mcp.client import stdio

    if getattr(stdio._create_platform_compatible_process, "forks_test_servers", False):
        return
    spawn = stdio._create_platform_compatible_process

    async def create(command, args, env=None, errlog=sys.stderr, cwd=None):
        # toolhub starts a server through its launcher (catalog.mcp_client.launcher): `... launcher.py OPTIONS --
        # PROGRAM ARGS`. The launcher still runs (environment, and limits on the fork launcher); the fork runs the
        # program in the directory and environment the launcher hands on, without the launcher's limits.
        split = args.index("--") + 1 if "--" in args and any(a.endswith("launcher.py") for a in args[:3]) else 0
        program, program_args = (args[split], args[split + 1 :]) if split else (command, args)
        if program == sys.executable and program_args[:2] in [["-m", module] for module in MODULES]:
            if split:
                args = [*args[:split], *launched(program_args)]
            else:
                command, *args = launched(args)
        return await spawn(command, args, env, errlog, cwd)

    create.forks_test_servers = True
    stdio._create_platform_compatible_process = create


def command(args: list[str]) -> list[str]:
    """The command line that runs `python ARGS` (`-c CODE ...`, `-m MODULE ...` or `SCRIPT ...`) as a fork."""
    option = args[0] if args else "-"
    if option in ("-c", "-m") and len(args) >= 2 or not option.startswith("-"):
        return launched(args)
    raise ValueError(f"not a program the fork server runs: {args!r}")


def launched(args: list[str]) -> list[str]:
    return [sys.executable, "-S", str(LAUNCHER), socket_path(), *args]


def socket_path() -> str:
    """The fork server's socket, started on first use (about a second, once per test process)."""
    with _lock:
        process = _running.get("process")
        if process is None or process.poll() is not None:
            path = os.path.join(tempfile.mkdtemp(prefix="toolhub-forkserver-"), "socket")
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.forkserver", path],
                cwd=REPOSITORY,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            if process.stdout.readline() != b"ready\n":
                raise RuntimeError(f"the test fork server did not start (exit {process.wait()})")
            _running.update(process=process, path=path)
            atexit.register(_stop, process)
        return _running["path"]


def _stop(process: subprocess.Popen) -> None:
    process.stdin.close()  # its children are killed with it
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()


# --- the fork server ----------------------------------------------------------------------------------------------


def serve(path: str) -> None:
    for module in WARM:
        importlib.import_module(module)
    if "twisted.internet.reactor" in sys.modules:  # Daphne, forked from here, must install its own
        raise RuntimeError("a warm import installed Twisted's default reactor")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    children: dict[int, socket.socket] = {}  # pid -> its launcher's connection
    killed: set[int] = set()
    os.write(1, b"ready\n")
    while True:
        waiting = [listener, 0, *(c for pid, c in children.items() if pid not in killed)]
        readable, _, _ = select.select(waiting, [], [], 0.05)
        for item in readable:
            if item == 0:
                if not os.read(0, 1):  # the test process is gone
                    for pid in children:
                        _kill(pid)
                    return
            elif item is listener:
                connection, _ = listener.accept()
                pid = _fork(connection, listener, children)
                if pid:
                    children[pid] = connection
            else:  # a launcher passes on a signal it was sent, or its connection ends: it was killed
                pid = next(pid for pid, c in children.items() if c is item)
                message = item.recv(4, socket.MSG_WAITALL)
                if len(message) == 4:
                    _kill(pid, struct.unpack("!i", message)[0])
                else:
                    _kill(pid)
                    killed.add(pid)
        _reap(children, killed)


def _fork(connection: socket.socket, listener: socket.socket, children: dict) -> int:
    header, fds = _receive(connection)
    (size,) = struct.unpack("!I", header)
    body = b""
    while len(body) < size:
        chunk = connection.recv(size - len(body))
        if not chunk:
            break
        body += chunk
    if len(fds) != 3 or len(body) != size:
        for fd in fds:
            os.close(fd)
        connection.close()
        return 0
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        return pid
    # The child: the launcher's pipes become its stdio, then the module runs as `python -m` runs it.
    listener.close()
    connection.close()
    for other in children.values():
        other.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    request = json.loads(body)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    code = 0
    try:
        _run(request["argv"])
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            code = exit.code or 0
        else:
            print(exit.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _run(argv: list[str]) -> None:
    """Run `python ARGV` in this process, as the interpreter would: sys.argv and sys.path[0] set the same way."""
    if argv[0] == "-m":
        module = argv[1]
        sys.argv, sys.path[0] = [module, *argv[2:]], os.getcwd()
        sys.modules.pop(module, None)  # its imports are warm; its own code runs afresh as __main__
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    elif argv[0] == "-c":
        sys.argv, sys.path[0] = ["-c", *argv[2:]], ""
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        exec(compile(argv[1], "<string>", "exec"), main.__dict__)
    else:
        sys.argv, sys.path[0] = list(argv), os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")


def _receive(connection: socket.socket) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    header, ancillary, _, _ = connection.recvmsg(4, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return header, list(fds)


def _kill(pid: int, number: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


def _reap(children: dict, killed: set) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = children.pop(pid, None)
        killed.discard(pid)
        if connection is None:
            continue
        if os.WIFSIGNALED(status):
            answer = struct.pack("!ii", 1, os.WTERMSIG(status))
        else:
            answer = struct.pack("!ii", 0, os.waitstatus_to_exitcode(status))
        try:
            connection.sendall(answer)
        except OSError:
            pass
        connection.close()


if __name__ == "__main__":
    serve(sys.argv[1])
    os._exit(0)  # nothing to flush or close: the test process waits for this exit, not for a teardown of warm imports
