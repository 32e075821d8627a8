"""A scripted OpenAI-compatible HTTP server for tests: real sockets, answers chosen by the test."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedOpenAI:
    """Serve /v1/chat/completions; `behaviour` and `content` say what the next answers are."""

    def __init__(self):
        # ok | slow | error | invalid | hang (no answer until `released` is set) | stall (a streamed step sends
        # its first content piece, then nothing until `released` is set, then the rest)
        self.behaviour = "ok"
        self.released = threading.Event()
        self.content = "{}"
        # Scripted model steps, one per request: {"content": str} or {"tool_calls": [{"name", "arguments"}]}.
        self.steps: list[dict] = []
        # When `steps` is empty: the step every request gets (a benchmark's steady model), or None for `content`.
        self.every_step: dict | None = None
        self.delay = 5.0
        self.requests: list[dict] = []
        self.api_keys: list[str] = []  # the bearer key of each request, in order
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.api_keys.append(self.headers.get("Authorization", "").removeprefix("Bearer "))
                if server.behaviour == "slow":
                    time.sleep(server.delay)
                if server.behaviour == "hang":
                    server.released.wait()
                if server.behaviour == "error":
                    self._send(500, {"error": {"message": "scripted failure", "type": "server_error"}})
                    return
                if server.steps or server.every_step is not None:
                    step = server.steps.pop(0) if server.steps else server.every_step
                    if body.get("stream"):
                        self._stream(stream_chunks(step, body.get("model", "scripted")))
                    else:
                        self._send(200, completion(step.get("content", ""), body.get("model", "scripted")))
                    return
                content = "this is not json {" if server.behaviour == "invalid" else server.content
                self._send(200, completion(content, body.get("model", "scripted")))

            def _stream(self, chunks):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                stall = server.behaviour == "stall"
                try:
                    for index, item in enumerate(chunks):
                        if stall and index == 2:  # the role chunk and one content piece are out
                            server.released.wait()
                        self.wfile.write(f"data: {json.dumps(item)}\n\n".encode())
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (deadline tests)

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        # shutdown() waits for serve_forever's next poll: 0.5 s by default, paid by every test that used one.
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.released.set()  # hanging handlers end
        self.httpd.shutdown()
        self.httpd.server_close()


def completion(content: str, model: str) -> dict:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"},
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def stream_chunks(step: dict, model: str) -> list[dict]:
    """A model step as OpenAI streams it: content in pieces, tool calls in fragments by index."""

    def chunk(delta, finish=None):
        return {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip

    chunks = [chunk({"role": "assistant", "content": ""})]
    content = step.get("content", "")
    for start in range(0, len(content), 7):
        chunks.append(chunk({"content": content[start : start + 7]}))
    for index, call in enumerate(step.get("tool_calls", [])):
        arguments = json.dumps(call.get("arguments", {}))
        chunks.append(chunk({"tool_calls": [{"index": index, "id": f"call_{index}", "type": "function",
                                             "function": {"name": call["name"], "arguments": ""}}]}))  # fmt: skip
        half = len(arguments) // 2
        for part in (arguments[:half], arguments[half:]):
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]}))
    chunks.append(chunk({}, "tool_calls" if step.get("tool_calls") else "stop"))
    return chunks
