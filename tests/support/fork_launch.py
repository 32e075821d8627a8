"""Stand-in for `python ARGS...` of a test subprocess: the program runs in a fork of a warm interpreter.

    python -S tests/support/fork_launch.py SOCKET ARGS...      (ARGS: -m MODULE ..., -c CODE ... or SCRIPT ...)

Started exactly where the program's own process would be (tests/support/forkserver.py rewrites the command): it hands
its stdin, stdout and stderr, its arguments, working directory and environment to the fork server listening on
SOCKET, which forks a child that already imported the heavy packages and runs the program as __main__ on those
pipes. This process then waits and exits as the child did (same code, same signal); told to stop (SIGTERM, SIGINT,
SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) it passes the signal on to the child through the fork server and goes on
waiting, so a server's own shutdown runs; killed itself, the fork server kills the child. Standard library only,
no site packages (-S): it starts in ~15 ms, where a fresh interpreter importing the MCP SDK takes ~0.7 s of CPU.
"""

import array
import json
import os
import signal
import socket
import struct
import sys

PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def main() -> None:
    path, argv = sys.argv[1], sys.argv[2:]
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    fds = array.array("i", [0, 1, 2])
    connection.sendmsg([struct.pack("!I", len(request)), request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    # Only the child holds the pipes now: the client reads the end of the output when the child ends.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)

    def pass_on(number, _frame):
        try:
            connection.sendall(struct.pack("!i", number))
        except OSError:  # the child has ended: its status is on its way
            pass

    for number in PASSED_ON:
        signal.signal(number, pass_on)
    answer = b""
    while len(answer) < 8:
        chunk = connection.recv(8 - len(answer))
        if not chunk:
            os._exit(70)  # the fork server went away
        answer += chunk
    kind, value = struct.unpack("!ii", answer)
    if kind == 1:  # ended by a signal: end the same way
        signal.signal(value, signal.SIG_DFL)
        os.kill(os.getpid(), value)
    os._exit(value)


if __name__ == "__main__":
    main()
