"""How toolhub starts a stdio MCP server's process: its environment, its own working directory and its limits.

A server gets only what its configuration gives it over a small fixed base (PATH; LANG; HOME, its own directory;
PYTHONPATH to toolhub's directory when it runs on toolhub's own interpreter, as the demo server does): never the
toolhub process's environment, which holds SECRET_KEY, DATABASE_URL, REDIS_URL and API keys. It runs in
TOOLHUB_MCP_SERVERS_DIR/<server name>/ (created on first start), or, for a per-user or per-session connection
(McpServer.connection_scope), in its own directory below that one (users/<user id>/, sessions/<digest>/), which
`{home}` in its arguments and environment values names, under the TOOLHUB_MCP_STDIO_* limits, which
catalog.mcp_client.launcher applies in the child before it runs the server's program. Never spawns anything itself:
it returns the parameters the MCP SDK's stdio transport spawns with.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from django.conf import settings
from mcp import StdioServerParameters

from . import launcher

MIB = 1024 * 1024
_DIRECTORY_NAME = re.compile(r"[A-Za-z0-9_-]+")  # a server's name is a slug


def server_dir(name: str) -> Path:
    """The server's own working directory (and HOME), created on demand, readable by toolhub's user only."""
    if not _DIRECTORY_NAME.fullmatch(name):
        raise ValueError(f"MCP server name {name!r} is not a slug, so it names no directory")
    path = Path(settings.TOOLHUB_MCP_SERVERS_DIR) / name
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


_OWNER = re.compile(r"(users|sessions)/[A-Za-z0-9_-]+")
HOME_PLACEHOLDER = "{home}"


def connection_dir(name: str, owner: str = "") -> Path:
    """The directory of one connection's process: the server's own for a shared one, else `owner`'s below it
    (`owner`: "users/<id>" or "sessions/<digest>", catalog.mcp_client.callers.connection_owner)."""
    path = server_dir(name)
    if not owner:
        return path
    if not _OWNER.fullmatch(owner):
        raise ValueError(f"{owner!r} names no connection directory")
    path = path / owner
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def limits() -> dict[str, int]:
    """The resource limits a server runs under (catalog.mcp_client.launcher's names), from the settings; a setting
    of 0 leaves that limit as toolhub's own. Core dumps are always off."""
    configured = {
        "data": settings.TOOLHUB_MCP_STDIO_MEMORY_MB * MIB,
        "as": settings.TOOLHUB_MCP_STDIO_ADDRESS_SPACE_MB * MIB,
        "cpu": settings.TOOLHUB_MCP_STDIO_CPU_SECONDS,
        "nproc": settings.TOOLHUB_MCP_STDIO_PROCESSES,
        "nofile": settings.TOOLHUB_MCP_STDIO_OPEN_FILES,
    }
    return {name: int(value) for name, value in configured.items() if value} | {"core": 0}


def environment(*, program: str, home: Path, configured: Mapping[str, str]) -> dict[str, str]:
    """The server's whole environment: the fixed base, then its configured variables (which win)."""
    base = {"PATH": os.environ.get("PATH") or os.defpath, "LANG": "C.UTF-8", "HOME": str(home)}
    if program == sys.executable:  # `python -m demo.loyalty_mcp.server` finds toolhub's modules from any directory
        base["PYTHONPATH"] = str(settings.BASE_DIR)
    return base | dict(configured)


def resolve(command: str, *, cwd: Path, path: str) -> str:
    """The program `command` names, as the server's process would find it (a relative path from its own directory,
    a bare name on its PATH); raises FileNotFoundError, as spawning it would, when there is none to run."""
    candidate = str(cwd / command) if os.sep in command and not os.path.isabs(command) else command
    found = shutil.which(candidate, path=path)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, "no such program (or not executable)", command)
    return found


def stdio_parameters(
    *, name: str, command: str, args: Iterable[str], env: Mapping[str, str], owner: str = ""
) -> StdioServerParameters:
    """What the stdio transport spawns for server `name` (for `owner`, connection_dir): the launcher, which applies
    the limits, keeps exactly `environment(...)` and runs `command args` in that directory, `{home}` in an argument
    or environment value replaced with it."""
    home = connection_dir(name, owner)
    args = [arg.replace(HOME_PLACEHOLDER, str(home)) for arg in args]
    configured = {key: value.replace(HOME_PLACEHOLDER, str(home)) for key, value in env.items()}
    child_env = environment(program=command, home=home, configured=configured)
    program = resolve(command, cwd=home, path=child_env["PATH"])
    argv = launcher.command_line(program=program, args=args, limits=limits(), keep=child_env)
    # The transport adds some of toolhub's variables under child_env; the launcher drops all but child_env's.
    return StdioServerParameters(command=argv[0], args=argv[1:], env=child_env, cwd=home)
