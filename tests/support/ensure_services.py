"""Make sure PostgreSQL and Redis answer before the integration suite runs.

Usage: ensure_services.py DATABASE_URL REDIS_URL

A service that is installed but stopped is started (the same commands the
machine uses at boot); a service that is missing fails the run with how to
start it. Never a silent skip.
"""

import glob
import os
import shutil
import socket
import subprocess
import sys
import time
from urllib.parse import urlparse


def answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def wait_for(host: str, port: int, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if answers(host, port):
            return True
        time.sleep(0.5)
    return False


def start_postgres() -> bool:
    if not shutil.which("pg_ctlcluster"):
        return False
    versions = sorted(os.path.basename(p) for p in glob.glob("/etc/postgresql/*"))
    if not versions:
        return False
    command = ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "start"]
    return subprocess.run(command, check=False).returncode == 0


def start_redis() -> bool:
    if not shutil.which("redis-server"):
        return False
    command = ["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", "6379", "--save", ""]
    command += ["--appendonly", "no"]
    return subprocess.run(command, check=False).returncode == 0


HOW_TO = {
    "PostgreSQL": "install PostgreSQL 15+ and start it with trust auth for user postgres on 127.0.0.1:5432 "
    "(Debian: apt-get install postgresql && pg_ctlcluster 15 main start), or set TEST_DATABASE_URL",
    "Redis": "install Redis and start it on 127.0.0.1:6379 "
    "(Debian: apt-get install redis-server && redis-server --daemonize yes), or set TEST_REDIS_URL",
}


def ensure(name: str, url: str, default_port: int, start) -> str | None:
    parsed = urlparse(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or default_port
    if answers(host, port):
        print(f"{name} answers at {host}:{port}")
        return None
    local = host in {"127.0.0.1", "localhost", "::1"}
    if local and start() and wait_for(host, port):
        print(f"{name} was stopped; started it at {host}:{port}")
        return None
    return f"{name} does not answer at {host}:{port}: {HOW_TO[name]}."


def main(argv: list[str]) -> int:
    database_url, redis_url = argv[1], argv[2]
    problems = [
        problem
        for problem in (
            ensure("PostgreSQL", database_url, 5432, start_postgres),
            ensure("Redis", redis_url, 6379, start_redis),
        )
        if problem
    ]
    for problem in problems:
        print(f"ERROR: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
