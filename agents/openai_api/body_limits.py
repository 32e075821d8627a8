"""Bounds on what a /v1 request body may be, checked before and while it is read, each in bounded time.

A body is refused (OpenAI-style error) when it is over TOOLHUB_API_MAX_BODY_BYTES
(413, judged from Content-Length before reading), nests JSON deeper than
TOOLHUB_API_MAX_JSON_DEPTH (400, counted on the raw bytes before the recursive
parser sees them), carries more than TOOLHUB_API_MAX_MESSAGES messages, has a
NUL byte or a lone surrogate in any string (PostgreSQL and UTF-8 cannot store
them), or a message field of the wrong type. Every refusal names the field.
This module only checks; agents.openai_api.views parses and stores.
"""

import json
import re
from itertools import accumulate

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse

# A JSON string, escapes included: removed before brackets are counted, so "[[[" inside a string counts nothing.
JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
BRACKETS = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
NOT_BRACKETS = bytes(c for c in range(256) if c not in BRACKETS)
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
CONTENT_PART_TYPES = {"text"}


class InputRejected(Exception):
    def __init__(self, status: int, message: str, *, param=None, code=None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def response(self) -> JsonResponse:
        error = {"message": self.message, "type": "invalid_request_error", "param": self.param, "code": self.code}
        return JsonResponse({"error": error}, status=self.status)


def read_body(request) -> bytes:
    """The body, or 413 when it is (or says it is) over the cap; a declared size over it is refused unread."""
    cap = settings.TOOLHUB_API_MAX_BODY_BYTES
    too_large = InputRejected(413, f"The request body is over {cap} bytes.", code="request_too_large")
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        declared = 0
    if declared > cap:
        raise too_large
    try:
        body = request.body
    except RequestDataTooBig:
        raise too_large from None
    if len(body) > cap:
        raise too_large
    return body


def json_depth(body: bytes) -> int:
    """How deep arrays and objects nest in `body`, in linear time and without recursion (strings ignored)."""
    brackets = JSON_STRING.sub(b"", body).translate(None, NOT_BRACKETS)
    return max(accumulate(BRACKETS[c] for c in brackets), default=0)


def unstorable_field(value, path: str) -> str | None:
    """The path of the first string (or key) in `value` with a NUL byte or a lone surrogate, else None."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if UNSTORABLE.search(item):
                return where
        elif isinstance(item, dict):
            for key, child in item.items():
                if UNSTORABLE.search(key):
                    return f"{where}.{key.encode('unicode_escape').decode()}"
                stack.append((child, f"{where}.{key}" if where else key))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{index}]") for index, child in enumerate(item))
    return None


def top_level(field: str) -> str:
    return re.split(r"[.\[]", field, maxsplit=1)[0]


def _message_type_error(message: dict, index: int) -> str | None:
    where = f"messages[{index}]"
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        return f"{where}.content must be a string, a list of content parts or null."
    if isinstance(content, list):
        for part_index, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if not isinstance(kind, str) or kind not in CONTENT_PART_TYPES:  # a list or object type is unhashable
                return f'{where}.content[{part_index}] must be an object of type "text".'
            if not isinstance(part.get("text", ""), str):
                return f"{where}.content[{part_index}].text must be a string."
    tool_calls = message.get("tool_calls")
    if tool_calls is not None:
        if not isinstance(tool_calls, list):
            return f"{where}.tool_calls must be an array."
        for call_index, call in enumerate(tool_calls):
            call_where = f"{where}.tool_calls[{call_index}]"
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not isinstance(function, dict):
                return f"{call_where} must be an object with an id and a function."
            if not isinstance(function.get("name"), str) or not isinstance(function.get("arguments", ""), str):
                return f"{call_where}.function needs a name and arguments as strings."
    for name in ("tool_call_id", "name"):
        if message.get(name) is not None and not isinstance(message[name], str):
            return f"{where}.{name} must be a string."
    return None


def check_json_body(request) -> bytes:
    """The body once its size and JSON nesting are within bounds (safe for json.loads); InputRejected otherwise."""
    body = read_body(request)
    limit = settings.TOOLHUB_API_MAX_JSON_DEPTH
    if json_depth(body) > limit:
        raise InputRejected(400, f"The request body nests JSON deeper than {limit} levels.", code="too_deep")
    return body


def check_chat_request(request) -> bytes:
    """The body of POST /v1/chat/completions once it is within every bound; InputRejected otherwise."""
    body = check_json_body(request)
    try:
        payload = json.loads(body or b"")
    except ValueError:
        return body  # agents.openai_api.views.parse_request says what is wrong with it
    field = unstorable_field(payload, "")
    if field is not None:
        raise InputRejected(
            400, f"{field} contains a NUL byte or a lone surrogate, which cannot be stored.", param=top_level(field)
        )
    messages = payload.get("messages") if isinstance(payload, dict) else None
    if isinstance(messages, list):
        cap = settings.TOOLHUB_API_MAX_MESSAGES
        if len(messages) > cap:
            raise InputRejected(400, f"messages has {len(messages)} items; at most {cap} are accepted.",
                                param="messages", code="too_many_messages")  # fmt: skip
        for index, message in enumerate(messages):
            problem = _message_type_error(message, index) if isinstance(message, dict) else None
            if problem:
                raise InputRejected(400, problem, param="messages")
    return body
