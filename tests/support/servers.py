"""Real server processes for integration tests: Daphne, a Celery worker, the production layout of deploy/Procfile,
started like a deployment.

Daphne, the Celery workers and manage.py run as forks of the test process's warm interpreter
(tests/support/forkserver.py): the same program, arguments, environment and pipes, and a signal to stop them
reaches their own shutdown, without
each start importing Django, Celery, the MCP SDK and the rest again (~1.5 s of CPU, some fifty starts a run). The
production layout (Layout, below) starts deploy/Procfile's own command lines, as honcho does."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, suppress
from pathlib import Path

from tests.support import forkserver

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
EMBEDDED_UNSET = (
    "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "TOOLHUB_MODEL_BASE_URL", "SECRET_KEY", "DEBUG", "TOOLHUB_DEBUG",
)  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def embedded_env(data_dir) -> dict:
    """The environment of `make run`: nothing configured but a data dir, and DEBUG=1 as make run sets it."""
    env = {k: v for k, v in os.environ.items() if k not in EMBEDDED_UNSET} | {"TOOLHUB_DATA_DIR": str(data_dir)}
    env["DEBUG"] = "1"
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


def database_env(**extra) -> dict:
    """The environment of a server process on this test run's database (rows committed by transactional tests).

    It shares the test process's SECRET_KEY: rows either side encrypts (MCP server secrets) must open on the other.
    """
    from django.conf import settings
    from django.db import connection

    database = connection.settings_dict
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    return (
        env
        | {
            "DJANGO_SETTINGS_MODULE": "toolhub.settings",
            "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
            "SECRET_KEY": settings.SECRET_KEY,
        }
        | extra
    )


def manage(env: dict, *args: str) -> str:
    result = subprocess.run(forkserver.command(["manage.py", *args]), cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def output_of(log) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-5000:]


def start(command: list[str], env: dict):
    """Popen with output to a temp file: a pipe nobody reads would block a busy server."""
    log = tempfile.TemporaryFile()
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log


def wait_for_port(port: int, process: subprocess.Popen, log, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert process.poll() is None, output_of(log)
            assert time.monotonic() < deadline, f"nothing listened on {port} within {seconds} s"
            time.sleep(0.3)


# Twisted listens with a backlog of 50 unless told: 200 clients connecting at once would wait on SYN retries.
LISTEN_BACKLOG = 1024


@contextmanager
def daphne(env: dict):
    """Yield the base URL of a Daphne serving toolhub.asgi with `env` (its process: `daphne_process(url)`)."""
    port = free_port()
    endpoint = f"tcp:port={port}:interface=127.0.0.1:backlog={LISTEN_BACKLOG}"
    process, log = start(forkserver.command([str(BIN / "daphne"), "-e", endpoint, "toolhub.asgi:application"]), env)
    process.log = log  # the caller may read it (output_of) while the server runs
    _daphnes[f"http://127.0.0.1:{port}"] = process
    try:
        wait_for_port(port, process, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        _daphnes.pop(f"http://127.0.0.1:{port}", None)
        process.terminate()
        process.wait(timeout=30)
        log.close()


_daphnes: dict[str, subprocess.Popen] = {}


def daphne_process(base_url: str) -> subprocess.Popen:
    """The process of a Daphne that `daphne()` started and that still runs."""
    return _daphnes[base_url]


@contextmanager
def celery_worker(env: dict, app, *, pool: str = "solo", concurrency: int = 1):
    """Yield a running Celery worker (solo pool, or `pool` with `concurrency` children) once it answers a ping."""
    name = f"itest-{os.getpid()}-{time.monotonic_ns()}@{os.uname().nodename}"
    worker = ["-m", "celery", "-A", "toolhub", "worker", "--pool", pool, "--concurrency", str(concurrency),
              "--loglevel", "WARNING", "--hostname", name, "--without-gossip", "--without-mingle"]  # fmt: skip
    process, log = start(forkserver.command(worker), env)
    process.log = log  # the test may read it (output_of) while the worker runs
    try:
        deadline = time.monotonic() + 90
        while not app.control.ping(timeout=1, destination=[name]):
            assert process.poll() is None, f"worker exited: {output_of(log)}"
            assert time.monotonic() < deadline, "worker did not answer a ping within 90 s"
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


class RedisServer:
    """A redis-server of the test's own, on its own port, without persistence: `restart()` loses everything."""

    def __init__(self):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = None

    def start(self) -> None:
        self.process, self.log = start(["redis-server", "--port", str(self.port), "--save", "", "--appendonly", "no",
                                        "--bind", "127.0.0.1"], os.environ.copy())  # fmt: skip
        wait_for_port(self.port, self.process, self.log, seconds=20)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()

    def restart(self, down_seconds: float = 1.0) -> None:
        self.stop()
        time.sleep(down_seconds)
        self.start()


@contextmanager
def redis_server():
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


class PostgresServer:
    """A PostgreSQL of the test's own (initdb in a temporary directory, its own port, trust auth, no fsync):
    `restart(mode)` is `pg_ctl restart -m fast|immediate`, what an operator or a crash does to a deployment's."""

    def __init__(self):
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="toolhub-pg-"))
        self.data = self.directory / "data"
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"
        binaries = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
        assert binaries, "PostgreSQL's server programs (initdb, pg_ctl) are not installed"
        self.bin = binaries[-1]

    def _run(self, program: str, *args: str) -> None:
        # The server refuses to run as root: as the postgres account then, which owns the directory.
        as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        result = subprocess.run([*as_user, str(self.bin / program), *args], capture_output=True, text=True,
                                timeout=120)  # fmt: skip
        assert result.returncode == 0, f"{program}: {result.stdout}{result.stderr}"

    def _options(self) -> str:
        return f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60"

    def start(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres")
        if not self.data.exists():
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        self._run("pg_ctl", "-D", str(self.data), "-o", self._options(), "-l", str(self.directory / "log"), "-w",
                  "start")  # fmt: skip

    def restart(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-o", self._options(), "-l", str(self.directory / "log"), "-m",
                  mode, "-w", "restart")  # fmt: skip

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")


@contextmanager
def postgres_server():
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        with suppress(AssertionError):
            server.stop()
        shutil.rmtree(server.directory, ignore_errors=True)


PROCFILE = ROOT / "deploy" / "Procfile"


class Layout:
    """The production layout from the shipped files: each line of deploy/Procfile run as honcho runs it (`sh -c`,
    from the project's root, with `env`), but each in a process group of its own, so that one can be killed whole
    (a Celery worker with its pool children, as when its machine or container dies) while the others run on.
    Honcho itself would stop them all when one exits."""

    def __init__(self, env: dict):
        from honcho.environ import parse_procfile

        self.commands = parse_procfile(PROCFILE.read_text()).processes
        self.env = env | {"PATH": f"{BIN}{os.pathsep}{env.get('PATH', os.defpath)}"}  # daphne, celery: the venv's
        self.processes: dict[str, tuple[subprocess.Popen, object]] = {}

    def start(self, *names: str) -> None:
        """Start these processes at once; the caller waits for what it needs."""
        for name in names:
            log = tempfile.TemporaryFile()
            process = subprocess.Popen(["sh", "-c", f"exec {self.commands[name]}"], cwd=ROOT, env=self.env,
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
            self.processes[name] = (process, log)

    def process(self, name: str) -> subprocess.Popen:
        return self.processes[name][0]

    def output(self, name: str) -> str:
        return output_of(self.processes[name][1])

    def alive(self, name: str) -> None:
        assert self.process(name).poll() is None, f"{name} exited: {self.output(name)}"

    def kill(self, name: str) -> None:
        """SIGKILL the process and everything it started: no clean shutdown, no acknowledgement."""
        process, log = self.processes.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        log.close()

    def stop(self) -> None:
        for process, _log in self.processes.values():
            with suppress(ProcessLookupError):  # the group is gone already
                os.killpg(process.pid, signal.SIGTERM)
        for name, (process, log) in list(self.processes.items()):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
            log.close()
            del self.processes[name]
