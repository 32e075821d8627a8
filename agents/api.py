"""The OpenAI-compatible API: POST /v1/chat/completions (JSON or SSE) and GET /v1/models.

Thin: authenticate, validate, store the conversation and a queued turn in one
transaction, start the turn, then relay the turn's events. Streams replay the
stored events and follow the channel-layer group, so nothing is missed
whichever side starts first. Errors are OpenAI-style error objects.
"""

import asyncio
import contextlib
import json
import logging
import time
import uuid

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import transaction
from django.http import JsonResponse, StreamingHttpResponse
from django.utils import timezone

from catalog.tokens import count_tokens
from toolhub.db_busy import BUSY_MESSAGE, is_database_busy

from . import liveness
from .access import DECIDE_APPROVAL, LIST_MODELS, START_TURN, Ability, refusal
from .api_keys import authenticate
from .approvals import ApprovalClosed, decide_approval
from .events import stored_events, turn_group
from .models import Conversation, Message, ModelProfile, ToolApproval, TurnEvent
from .turns import create_turn, enqueue_turn

DEFAULT_MODEL = "toolhub"
KEEPALIVE = "keepalive"  # not a stored event: what a quiet stream sends so clients and proxies keep waiting
STILL_WORKING_TEXT = "⏳ Still working"
# HTTP status of a non-streamed answer whose turn failed, by the error's code (others: 500).
FAILED_TURN_STATUS = {liveness.TIMEOUT_CODE: 504, liveness.MODEL_CODE: 502}
log = logging.getLogger(__name__)
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
    # database_sync_to_async gives the connection back at once: a waiting stream holds none.
    return await database_sync_to_async(_authorize)(header, ability)


async def turn_events(turn_id: int, *, start):
    """The turn's events in order: stored ones first, then live ones; ends after `done`, by the turn's deadline.

    Holds no database connection while it waits (each read gives its connection back). A quiet stream gets a
    keep-alive event every TOOLHUB_STREAM_KEEPALIVE seconds. When the channel layer is away (Redis restarting)
    it reads the store every second until the layer is back. At the turn's deadline plus the grace it fails the
    unfinished turn itself (agents.liveness), so its error and `done` are the last events whatever happened to
    the worker.
    """
    layer = get_channel_layer()
    channel = await layer.new_channel()
    live = await _follow(layer, turn_id, channel)
    runner = asyncio.ensure_future(start())
    last = 0
    quiet_since = time.monotonic()
    _status, stop_at = await database_sync_to_async(liveness.stream_deadline)(turn_id)
    try:
        while True:
            for event in await database_sync_to_async(stored_events)(turn_id, after=last):
                last, quiet_since = event["sequence"], time.monotonic()
                yield event
                if event["type"] == EventType.DONE:
                    return
            if stop_at is not None and timezone.now() >= stop_at:
                await database_sync_to_async(liveness.fail_if_overdue)(turn_id)
                _status, stop_at = await database_sync_to_async(liveness.stream_deadline)(turn_id)
                continue  # its error and done are stored now, or it moved its deadline (waiting on an approval)
            if time.monotonic() - quiet_since >= settings.TOOLHUB_STREAM_KEEPALIVE:
                quiet_since = time.monotonic()
                yield {"type": KEEPALIVE, "payload": {}, "sequence": last}
            if not live:
                await asyncio.sleep(1.0)
                live = await _follow(layer, turn_id, channel)
                continue
            while True:  # live events until a gap or a quiet second sends us back to the store
                try:
                    message = await asyncio.wait_for(layer.receive(channel), timeout=1.0)
                except TimeoutError:
                    break
                except Exception as exc:  # the channel layer went away: read the store until it is back
                    log.warning("stream of turn %s lost the channel layer: %r", turn_id, exc)
                    live = False
                    break
                event = message["event"]
                if event["sequence"] <= last:
                    continue
                if event["sequence"] != last + 1:
                    break
                last, quiet_since = event["sequence"], time.monotonic()
                yield event
                if event["type"] == EventType.DONE:
                    return
    finally:
        if live:
            with contextlib.suppress(Exception):
                await layer.group_discard(turn_group(turn_id), channel)
        if runner.done() and runner.exception():
            raise runner.exception()


async def _follow(layer, turn_id: int, channel: str) -> bool:
    """Join the turn's group; False when the channel layer cannot be reached now."""
    try:
        await layer.group_add(turn_group(turn_id), channel)
    except Exception as exc:
        log.warning("stream of turn %s cannot reach the channel layer: %r", turn_id, exc)
        return False
    return True


def starter(turn_id: int):
    # Eager Celery runs the turn inside this call, so it must not hold the event loop.
    return lambda: database_sync_to_async(enqueue_turn, thread_sensitive=False)(turn_id)


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
    if event["type"] == KEEPALIVE:
        return chunk(completion_id, model, choices=[], type="status", phase="keepalive", message=STILL_WORKING_TEXT)
    if event["type"] == EventType.ERROR:  # the OpenAI SDKs raise on an error frame
        return {"error": turn_error(payload)}
    if event["type"] == EventType.DONE:
        if payload.get("status") == "failed":
            return None  # its error frame was the last word
        return chunk(completion_id, model, type="content", choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
    return None


async def sse_stream(turn_id: int, model: str):
    """The turn as SSE frames; whatever fails on the way, the last frames are an error (if any) and [DONE]."""
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    try:
        async for event in turn_events(turn_id, start=starter(turn_id)):
            frame = sse_frame(event, completion_id, model)
            if frame is not None:
                yield f"data: {json.dumps(frame, ensure_ascii=False)}\n\n"
    except Exception as exc:  # the response has started: its status cannot say it any more, the frame does
        busy = is_database_busy(exc)
        if not busy:
            log.exception("stream of turn %s failed", turn_id)
        message = BUSY_MESSAGE if busy else "The stream of this turn failed; its events are stored, ask again."
        error = {"message": message, "type": "server_error", "param": None,
                 "code": "database_busy" if busy else "stream_failed"}  # fmt: skip
        yield f"data: {json.dumps({'error': error})}\n\n"
    yield "data: [DONE]\n\n"


def turn_error(payload: dict) -> dict:
    """A failed turn's error, in the OpenAI shape."""
    message = payload.get("message") or "The turn failed."
    return {"message": message, "type": "server_error", "param": None, "code": payload.get("code") or "turn_failed"}


async def completion(turn_id: int, model: str, prompt_tokens: int) -> dict:
    """The whole answer; a failed turn raises its error (ApiError, 502 for the model, 504 for the deadline)."""
    content = ""
    async for event in turn_events(turn_id, start=starter(turn_id)):
        if event["type"] == EventType.DELTA:
            content += event["payload"].get("content", "")
        elif event["type"] == EventType.ERROR:
            error = turn_error(event["payload"])
            raise ApiError(FAILED_TURN_STATUS.get(error["code"], 500), error["message"], type=error["type"],
                           code=error["code"])  # fmt: skip
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
        try:
            body = request.body
        except RequestDataTooBig:
            raise ApiError(413, "The request body is too large.", code="request_too_large") from None
        parsed = parse_request(body)
        turn = await database_sync_to_async(open_turn)(user, parsed)
    except ApiError as error:
        return error.response()
    if parsed["stream"]:
        response = StreamingHttpResponse(sse_stream(turn.id, parsed["model"]), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    prompt_tokens = sum(count_tokens(m["content"]) for m in parsed["messages"])
    try:
        return JsonResponse(await completion(turn.id, parsed["model"], prompt_tokens))
    except ApiError as error:
        return error.response()


async def approval(request, approval_id: int):
    """POST {"approve": true|false}: the conversation's owner (or an operator) decides a pending call."""
    try:
        if request.method != "POST":
            raise ApiError(405, "Use POST to decide an approval.")
        user = await api_user(request, DECIDE_APPROVAL)
        try:
            body = json.loads(request.body or b"")
        except (ValueError, RequestDataTooBig):
            raise ApiError(400, "The request body is not valid JSON.") from None
        if not isinstance(body, dict) or not isinstance(body.get("approve"), bool):
            raise ApiError(400, 'Send {"approve": true} or {"approve": false}.', param="approve")
        try:
            decided = await database_sync_to_async(decide_approval)(
                approval_id=approval_id, user=user, approve=body["approve"]
            )
        except ToolApproval.DoesNotExist:
            raise ApiError(404, f"No approval {approval_id}.", code="approval_not_found") from None
        except PermissionDenied:
            raise ApiError(403, "This key may not decide that approval.", type="permission_error") from None
        except ApprovalClosed as closed:
            raise ApiError(409, str(closed), code="approval_closed") from None
    except ApiError as error:
        return error.response()
    return JsonResponse({"id": decided.pk, "status": decided.status, "tool_name": decided.tool_name})


async def models(request):
    try:
        if request.method not in {"GET", "HEAD"}:
            raise ApiError(405, "Use GET for /v1/models.")
        await api_user(request, LIST_MODELS)
    except ApiError as error:
        return error.response()
    names = await database_sync_to_async(model_names)()
    data = [{"id": name, "object": "model", "created": 0, "owned_by": "toolhub"} for name in names]
    return JsonResponse({"object": "list", "data": data})
