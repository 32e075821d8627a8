"""A turn read from outside: a streamed chat completion frame by frame, and what its stored events must show.

Shared by the integration tests that stream turns through real servers (tests/integration/test_faults.py,
test_layout.py).
"""

import http.client
import json
import time
from urllib.parse import urlsplit

from agents.models import Turn, TurnEvent

QUESTION = "hello there, how are you"


class Stream:
    """A streamed chat completion read frame by frame as it comes: JSON frames, "[DONE]", and keep-alive lines.

    `served_by`: the process that answered, as the balancer names it (deploy/haproxy.cfg), else None.
    """

    def __init__(self, base: str, key: str, text: str = QUESTION, model: str = "toolhub"):
        url = urlsplit(base)
        self.connection = http.client.HTTPConnection(url.hostname, url.port, timeout=300)
        body = {"model": model, "stream": True, "messages": [{"role": "user", "content": text}]}
        self.connection.request("POST", "/v1/chat/completions", json.dumps(body),
                                {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})  # fmt: skip
        self.response = self.connection.getresponse()
        assert self.response.status == 200, self.response.read()
        self.served_by = self.response.getheader("X-Served-By")
        self.frames: list = []
        self.keepalives = 0

    def read_all(self) -> list:
        for raw in self.response:
            line = raw.decode().strip()
            if line.startswith(":"):
                self.keepalives += 1
            elif line.startswith("data: "):
                data = line.removeprefix("data: ")
                self.frames.append(data if data == "[DONE]" else json.loads(data))
                if data == "[DONE]":
                    break
        self.connection.close()
        return self.frames

    @property
    def text(self) -> str:
        return "".join(choice["delta"].get("content") or "" for frame in self.frames if isinstance(frame, dict)
                       for choice in frame.get("choices", []))  # fmt: skip

    @property
    def errors(self) -> list[dict]:
        return [frame["error"] for frame in self.frames if isinstance(frame, dict) and "error" in frame]


def ended_once(turn: Turn) -> list[str]:
    """The turn ended (done or failed) and its stored events end with exactly one `done`; their types."""
    turn.refresh_from_db()
    assert turn.status in (Turn.Status.DONE, Turn.Status.FAILED), turn.status
    types = list(TurnEvent.objects.filter(turn=turn).order_by("sequence").values_list("type", flat=True))
    assert types[-1] == TurnEvent.Type.DONE and types.count(TurnEvent.Type.DONE) == 1, types
    return types


def no_event_twice(turn: Turn) -> None:
    events = TurnEvent.objects.filter(turn=turn).order_by("sequence").values_list("type", "phase", "payload")
    keys = [json.dumps(event, sort_keys=True) for event in events]
    assert len(keys) == len(set(keys)), keys


def wait_until(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {seconds} s"
        time.sleep(0.1)
