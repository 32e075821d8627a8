"""The OpenAI-compatible API: POST /v1/chat/completions (JSON or SSE) and GET /v1/models.

Thin: authenticate, validate, store the conversation and a queued turn in one
transaction, start the turn, then relay the turn's events. Streams replay the
stored events and follow the channel-layer group, so nothing is missed
whichever side starts first. Errors are OpenAI-style error objects.
"""

import asyncio
import json
import time
import uuid

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import transaction
from django.http import JsonResponse, StreamingHttpResponse

from catalog.tokens import count_tokens

from .access import DECIDE_APPROVAL, LIST_MODELS, START_TURN, Ability, refusal
from .api_input import InputRejected, check_chat_request, check_json_body
from .api_keys import authenticate
from .approvals import ApprovalClosed, decide_approval
from .events import stored_events, turn_group
from .models import Conversation, Message, ModelProfile, ToolApproval, TurnEvent
from .turns import create_turn, enqueue_turn

DEFAULT_MODEL = "toolhub"
ROLES = {"system", "user", "assistant", "tool"}
EventType = TurnEvent.Type


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param=None, code=None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def response(self) -> JsonResponse:
        error = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        return JsonResponse({"error": error}, status=self.status)


def _text(content, index: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    raise ApiError(400, f"messages[{index}].content must be a string or a list of text parts.", param="messages")


def parse_request(body: bytes) -> dict:
    try:
        payload = json.loads(body or b"")
    except ValueError:
        raise ApiError(400, "The request body is not valid JSON.") from None
    if not isinstance(payload, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty array.", param="messages")
    parsed = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ApiError(400, f"messages[{index}] needs a role: one of {', '.join(sorted(ROLES))}.", param="messages")
        parsed.append(
            {
                "role": message["role"],
                "content": _text(message.get("content"), index),
                "tool_calls": message.get("tool_calls") or [],
                "tool_call_id": message.get("tool_call_id") or "",
            }
        )
    if parsed[-1]["role"] != "user" or not parsed[-1]["content"].strip():
        raise ApiError(400, "The last message must be a non-empty user message.", param="messages")
    for name, kind in (("stream", bool), ("two_stage_analysis", bool), ("model", str)):
        if name in payload and not isinstance(payload[name], kind):
            raise ApiError(400, f"{name} must be a {kind.__name__}.", param=name)
    temperature = payload.get("temperature", 1)
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not 0 <= temperature <= 2:
        raise ApiError(400, "temperature must be a number between 0 and 2.", param="temperature")
    return {
        "messages": parsed,
        "model": payload.get("model") or DEFAULT_MODEL,
        "stream": payload.get("stream", False),
        "two_stage": payload.get("two_stage_analysis", True),
    }


def model_names() -> list[str]:
    return [DEFAULT_MODEL, *ModelProfile.objects.values_list("name", flat=True)]


@transaction.atomic
def open_turn(user, request: dict):
    """Store the conversation, its history and the queued turn together, or nothing."""
    profile = None
    if request["model"] != DEFAULT_MODEL:
        profile = ModelProfile.objects.filter(name=request["model"]).first()
        if profile is None:
            raise ApiError(
                404, f"The model {request['model']!r} does not exist.", param="model", code="model_not_found"
            )
    *history, last = request["messages"]
    conversation = Conversation.objects.create(owner=user, model_profile=profile, title=last["content"][:200])
    Message.objects.bulk_create(
        Message(
            conversation=conversation,
            role=m["role"],
            content=m["content"],
            tool_calls=m["tool_calls"],
            tool_call_id=m["tool_call_id"],
            tokens=count_tokens(m["content"]),
        )  # fmt: skip
        for m in history
    )
    return create_turn(conversation, last["content"], two_stage=request["two_stage"])


def _authorize(header: str, ability: Ability):
    """The key's owner, if the key is valid (else 401) and agents.access allows it `ability` (else 403)."""
    api_key = authenticate(header.removeprefix("Bearer ").strip())
    if api_key is None:
        raise ApiError(401, "Invalid API key.", type="authentication_error", code="invalid_api_key")
    refused = refusal(api_key.user, ability, scopes=api_key.scopes)
    if refused is not None:
        code = "insufficient_scope" if refused.missing_scopes else "insufficient_permissions"
        raise ApiError(403, refused.message, type="permission_error", code=code)
    return api_key.user


async def api_user(request, ability: Ability):
    """The user an API request acts as, for `ability`: 401 without a valid key, 403 when it may not."""
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer "):
        raise ApiError(401, "Missing API key: send Authorization: Bearer <key>.", type="authentication_error")
    return await sync_to_async(_authorize)(header, ability)


async def turn_events(turn_id: int, *, start):
    """The turn's events in order: stored ones first, then live ones; ends after `done`."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(turn_group(turn_id), channel)
    runner = asyncio.ensure_future(start())
    deadline = time.monotonic() + settings.TOOLHUB_TURN_TIME_LIMIT + 30
    last = 0
    try:
        while time.monotonic() < deadline:
            # database_sync_to_async hands the connection back after each read: a waiting stream holds none.
            for event in await database_sync_to_async(stored_events)(turn_id, after=last):
                last = event["sequence"]
                yield event
                if event["type"] == EventType.DONE:
                    return
            while True:  # live events until a gap or a quiet second sends us back to the store
                try:
                    message = await asyncio.wait_for(layer.receive(channel), timeout=1.0)
                except TimeoutError:
                    break
                event = message["event"]
                if event["sequence"] <= last:
                    continue
                if event["sequence"] != last + 1:
                    break
                last = event["sequence"]
                yield event
                if event["type"] == EventType.DONE:
                    return
        yield {"type": EventType.ERROR, "payload": {"message": "The turn did not finish in time."}, "sequence": 0}
    finally:
        await layer.group_discard(turn_group(turn_id), channel)
        if runner.done() and runner.exception():
            raise runner.exception()


def starter(turn_id: int):
    # Eager Celery runs the turn inside this call, so it must not hold the event loop.
    return lambda: sync_to_async(enqueue_turn, thread_sensitive=False)(turn_id)


def chunk(completion_id: str, model: str, **fields) -> dict:
    return {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            **fields}  # fmt: skip


def sse_frame(event: dict, completion_id: str, model: str) -> dict | None:
    payload = event.get("payload", {})
    if event["type"] == EventType.STATUS:
        return chunk(
            completion_id,
            model,
            choices=[],
            type="status",
            message=payload.get("message", ""),
            phase=event.get("phase", ""),
            tool_name=payload.get("tool_name"),
            arguments=payload.get("arguments"),
            recommended_tools=payload.get("recommended_tools"),
            **({"approval_id": payload["approval_id"]} if "approval_id" in payload else {}),
        )
    if event["type"] == EventType.DELTA:
        delta = {"content": payload.get("content", "")}
        return chunk(
            completion_id, model, type="content", choices=[{"index": 0, "delta": delta, "finish_reason": None}]
        )
    if event["type"] == EventType.ERROR:
        delta = {"content": payload.get("message", "The turn failed.")}
        return chunk(
            completion_id, model, type="content", choices=[{"index": 0, "delta": delta, "finish_reason": None}]
        )
    if event["type"] == EventType.DONE:
        return chunk(completion_id, model, type="content", choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
    return None


async def sse_stream(turn_id: int, model: str):
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    async for event in turn_events(turn_id, start=starter(turn_id)):
        frame = sse_frame(event, completion_id, model)
        if frame is not None:
            yield f"data: {json.dumps(frame, ensure_ascii=False)}\n\n"
    yield "data: [DONE]\n\n"


async def completion(turn_id: int, model: str, prompt_tokens: int) -> dict:
    content = ""
    async for event in turn_events(turn_id, start=starter(turn_id)):
        if event["type"] == EventType.DELTA:
            content += event["payload"].get("content", "")
        elif event["type"] == EventType.ERROR:
            content += event["payload"].get("message", "")
    completion_tokens = count_tokens(content)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },  # fmt: skip
    }


async def chat_completions(request):
    try:
        if request.method != "POST":
            raise ApiError(405, "Use POST for /v1/chat/completions.")
        user = await api_user(request, START_TURN)
        parsed = parse_request(check_chat_request(request))  # size, depth, strings, types: agents.api_input
        turn = await sync_to_async(open_turn)(user, parsed)
    except (ApiError, InputRejected) as error:
        return error.response()
    if parsed["stream"]:
        response = StreamingHttpResponse(sse_stream(turn.id, parsed["model"]), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    prompt_tokens = sum(count_tokens(m["content"]) for m in parsed["messages"])
    return JsonResponse(await completion(turn.id, parsed["model"], prompt_tokens))


async def approval(request, approval_id: int):
    """POST {"approve": true|false}: the conversation's owner (or an operator) decides a pending call."""
    try:
        if request.method != "POST":
            raise ApiError(405, "Use POST to decide an approval.")
        user = await api_user(request, DECIDE_APPROVAL)
        try:
            body = json.loads(check_json_body(request) or b"")
        except (ValueError, RequestDataTooBig):
            raise ApiError(400, "The request body is not valid JSON.") from None
        if not isinstance(body, dict) or not isinstance(body.get("approve"), bool):
            raise ApiError(400, 'Send {"approve": true} or {"approve": false}.', param="approve")
        try:
            decided = await sync_to_async(decide_approval)(approval_id=approval_id, user=user, approve=body["approve"])
        except ToolApproval.DoesNotExist:
            raise ApiError(404, f"No approval {approval_id}.", code="approval_not_found") from None
        except PermissionDenied:
            raise ApiError(403, "This key may not decide that approval.", type="permission_error") from None
        except ApprovalClosed as closed:
            raise ApiError(409, str(closed), code="approval_closed") from None
    except (ApiError, InputRejected) as error:
        return error.response()
    return JsonResponse({"id": decided.pk, "status": decided.status, "tool_name": decided.tool_name})


async def models(request):
    try:
        if request.method not in {"GET", "HEAD"}:
            raise ApiError(405, "Use GET for /v1/models.")
        await api_user(request, LIST_MODELS)
    except ApiError as error:
        return error.response()
    names = await sync_to_async(model_names)()
    data = [{"id": name, "object": "model", "created": 0, "owned_by": "toolhub"} for name in names]
    return JsonResponse({"object": "list", "data": data})
