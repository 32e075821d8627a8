"""Start a stdio MCP server's program under resource limits, with only the environment toolhub chose for it.

    python -I -S launcher.py --limit data=1073741824 --limit nofile=1024 --keep PATH --keep HOME -- PROGRAM ARGS...

Runs as the server's process (`command_line` builds the command the stdio transport spawns): it sets each limit,
soft and hard alike so the server cannot raise it again (never above a hard limit it inherited), drops every
environment variable not named by --keep (the MCP SDK's stdio transport adds some of toolhub's own: HOME, USER,
SHELL, TERM, LOGNAME), then replaces itself with PROGRAM, which keeps this process's id, pipes and working directory.
Standard library only: it never imports toolhub, Django or site packages, so it starts in milliseconds from any
directory. Never runs PROGRAM through a shell.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Iterable, Mapping

LIMITS = {
    "cpu": resource.RLIMIT_CPU,  # seconds of CPU time; past it the kernel ends the process (SIGXCPU, then SIGKILL)
    "data": resource.RLIMIT_DATA,  # bytes of memory written to (heap and private mappings), not reserved
    "as": resource.RLIMIT_AS,  # bytes of address space, reserved included
    "nproc": resource.RLIMIT_NPROC,  # processes and threads of the whole user, not of this process alone
    "nofile": resource.RLIMIT_NOFILE,  # open file descriptors
    "core": resource.RLIMIT_CORE,  # bytes of a core dump (0: none, so a crash never writes the server's memory out)
}
EXIT_CANNOT_RUN = 127  # as a shell answers a command it cannot run


def command_line(*, program: str, args: Iterable[str], limits: Mapping[str, int], keep: Iterable[str]) -> list[str]:
    """The argv that runs `program args` through this launcher: the interpreter first."""
    options = [f"--limit={name}={int(value)}" for name, value in limits.items()]
    options += [f"--keep={name}" for name in sorted(keep)]
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), *options, "--", program, *args]


def apply_limits(limits: Mapping[str, int]) -> None:
    for name, value in limits.items():
        kind = LIMITS[name]
        _soft, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)  # only a privileged process may raise a hard limit
        resource.setrlimit(kind, (value, value))


def parse(argv: list[str]) -> tuple[dict[str, int], set[str], list[str]]:
    """(limits, names to keep, program and its arguments) from the launcher's arguments."""
    if "--" not in argv:
        raise ValueError("no program: its command line goes after --")
    split = argv.index("--")
    limits, keep, program = {}, set(), argv[split + 1 :]
    for option in argv[:split]:
        if option.startswith("--limit="):
            name, _, value = option.removeprefix("--limit=").partition("=")
            if name not in LIMITS:
                raise ValueError(f"unknown limit {name!r} (known: {', '.join(LIMITS)})")
            limits[name] = int(value)
        elif option.startswith("--keep="):
            keep.add(option.removeprefix("--keep="))
        else:
            raise ValueError(f"unknown option {option!r}")
    if not program:
        raise ValueError("no program: its command line goes after --")
    return limits, keep, program


def main(argv: list[str]) -> None:
    try:
        limits, keep, program = parse(argv)
        apply_limits(limits)
    except (ValueError, OSError) as exc:
        print(f"toolhub's MCP server launcher: {exc}", file=sys.stderr)
        os._exit(2)
    env = {name: value for name, value in os.environ.items() if name in keep}
    try:
        os.execvpe(program[0], program, env)
    except OSError as exc:
        print(f"toolhub's MCP server launcher: cannot run {program[0]}: {exc}", file=sys.stderr)
        os._exit(EXIT_CANNOT_RUN)


if __name__ == "__main__":
    main(sys.argv[1:])
