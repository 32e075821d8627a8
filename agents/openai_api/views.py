"""The OpenAI-compatible API: POST /v1/chat/completions (JSON or SSE), GET /v1/models and /v1/models/<id>,
and its description, GET /v1/openapi.json (agents.openai_api.openapi).

`model` names a model profile (or `toolhub`, the default one; absent: `toolhub`); each profile calls its
own upstream model. An answer's `model` is the upstream model that answered, or
`builtin-offline-rule-based` when the builtin offline model did.

Thin: authenticate, validate, store the conversation and a queued turn in one
transaction, start the turn, then relay the turn's events (agents.openai_api.completions).
Every database access goes through database_sync_to_async, which hands the
connection back to the pool when the call returns: a request waiting on its
turn (streamed or not) holds no connection.
Errors are OpenAI-style error objects (agents.openai_api.errors): bad input and a
newest turn too long for the model's budget (`context_length_exceeded`) are
refused before anything runs; a turn that fails answers with the error of its
FailureReason (502 model unavailable, 504 past the deadline), or, once a
stream has started, an error frame and then [DONE]. Never a failure as content.

Client tools (agents.turns.client_tools) follow OpenAI's semantics: a turn that ends
calling them answers `message.tool_calls` with finish_reason "tool_calls"
(streamed as `delta.tool_calls`); the client's next request carries the
assistant's tool_calls and `role: "tool"` results and continues from there.
"""

import json

from channels.db import database_sync_to_async
from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import transaction
from django.http import JsonResponse, StreamingHttpResponse

from agents.access.abilities import DECIDE_APPROVAL, LIST_MODELS, START_TURN, Ability, refusal
from agents.access.api_keys import authenticate
from agents.models import ApiKey, Conversation, Message, ModelProfile, ToolApproval, default_profile
from agents.providers import upstream_of
from agents.turns import memory, prompt
from agents.turns.approvals import ApprovalClosed, FourEyes, decide_approval
from agents.turns.client_tools import ClientToolError, check_name_conflicts, check_transcript, parse_client_tools
from agents.turns.start import create_turn
from catalog.models import Tool
from catalog.models.tokens import count_tokens
from toolhub import rate_limits

from .attribution import parse_attribution
from .body_limits import InputRejected, check_chat_request, check_json_body
from .completions import completion, sse_stream
from .errors import ApiError
from .openapi import openapi_document

DEFAULT_MODEL = "toolhub"
READ_METHODS = ("GET", "HEAD")
ROLES = {"system", "user", "assistant", "tool"}


def _text(content, index: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    raise ApiError(400, f"messages[{index}].content must be a string or a list of text parts.", param="messages")


def _tool_calls(calls) -> list[dict]:
    """An assistant message's tool calls as toolhub stores them (checked by client_tools.check_transcript)."""
    return [{"id": call["id"], "type": "function", "function": {
        "name": call["function"]["name"], "arguments": call["function"].get("arguments") or "{}"}}
        for call in calls or []]  # fmt: skip


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
        role = message.get("role") if isinstance(message, dict) else None
        if not isinstance(role, str) or role not in ROLES:  # a list or object role is unhashable: check the type first
            raise ApiError(400, f"messages[{index}] needs a role: one of {', '.join(sorted(ROLES))}.", param="messages")
        parsed.append(
            {
                "role": message["role"],
                "content": _text(message.get("content"), index),
                "tool_calls": message.get("tool_calls") or [],
                "tool_call_id": message.get("tool_call_id") or "",
            }
        )
    users = [m for m in parsed if m["role"] == "user"]
    # The last message is the user's request, or the client's tool results that continue the request before it.
    if parsed[-1]["role"] not in ("user", "tool") or not users or not users[-1]["content"].strip():
        raise ApiError(
            400, "The last message must be a non-empty user message, or tool results answering the assistant's "
            "tool_calls after one.", param="messages"
        )  # fmt: skip
    try:
        check_transcript(parsed)
        client = parse_client_tools(
            payload.get("tools"),
            payload.get("tool_choice"),
            payload.get("parallel_tool_calls"),
            max_tools=settings.TOOLHUB_MAX_CLIENT_TOOLS,
        )
    except ClientToolError as problem:
        raise ApiError.of(problem) from None
    for message in parsed:
        message["tool_calls"] = _tool_calls(message["tool_calls"])
    for name, kind in (("stream", bool), ("two_stage_analysis", bool), ("model", str)):
        if payload.get(name) is not None and not isinstance(payload[name], kind):
            raise ApiError(400, f"{name} must be a {kind.__name__}.", param=name)
    temperature = payload.get("temperature", 1)
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not 0 <= temperature <= 2:
        raise ApiError(400, "temperature must be a number between 0 and 2.", param="temperature")
    end_user, metadata = parse_attribution(payload)
    return {
        "messages": parsed,
        "model": payload.get("model") or DEFAULT_MODEL,  # no model (or null): the default, as docs/api.md says
        "stream": bool(payload.get("stream")),
        "two_stage": payload.get("two_stage_analysis") is not False,
        "client": client,
        "end_user": end_user,
        "metadata": metadata,
    }


def model_profiles() -> list[tuple[str, ModelProfile]]:
    """The models a client may name: `toolhub` (the default profile) and every profile, by id."""
    return [(DEFAULT_MODEL, default_profile()), *((p.name, p) for p in ModelProfile.objects.all())]


def served_model(profile: ModelProfile | None) -> str:
    """The answer's `model`: the upstream model's name, or the builtin's offline, rule-based label."""
    return upstream_of(profile or default_profile()).model_id


def requested_profile(name: str) -> ModelProfile | None:
    """The profile a request's `model` names (None for the default model), or a 404 error."""
    if name == DEFAULT_MODEL:
        return None
    profile = ModelProfile.objects.filter(name=name).first()
    if profile is None:
        raise ApiError(404, f"The model {name!r} does not exist.", param="model", code="model_not_found")
    return profile


def check_context_length(profile: ModelProfile, request: dict) -> None:
    """400 context_length_exceeded when the newest turn alone cannot fit the model's conversation budget.

    The budget counted here is a lower bound of the turn's (base system prompt, the client's instructions
    and tools): a request refused here would fail in the turn; one that passes may still lose old turns.
    """
    messages = request["messages"]
    instructions = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    available = prompt.request_budget(profile, instructions=instructions, tools=list(request["client"].definitions))
    conversation = [{k: v for k, v in m.items() if v} | {"role": m["role"]} for m in messages if m["role"] != "system"]
    try:
        memory.evict_whole_turns(conversation, budget=available)
    except memory.BudgetExceeded as exceeded:
        raise ApiError(
            400,
            f"This model's maximum context length is {profile.context_window} tokens, of which {max(available, 0)} "
            f"are left for the conversation after the system prompt, the tools and the reserved reply; the newest "
            f"turn needs {exceeded.needed} tokens. Please reduce the length of the messages.",
            param="messages",
            code="context_length_exceeded",
        ) from None


@transaction.atomic
def open_turn(user, request: dict, *, api_key: ApiKey | None = None):
    """Check what needs the database, then store the conversation, its history and the queued turn together,
    or nothing. The client's messages after the last user message (tool calls and their results) follow it.
    `api_key`: the key the request came with, recorded on the conversation (the API channel)."""
    profile = requested_profile(request["model"])
    client = request["client"]
    try:
        taken = {*Tool.objects.filter(name__in=client.names).values_list("name", flat=True)}
        check_name_conflicts(client, taken | {settings.TOOLHUB_SEARCH_TOOL})
    except ClientToolError as problem:
        raise ApiError.of(problem) from None
    check_context_length(profile or default_profile(), request)
    messages = request["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    request_text = messages[last_user]["content"]
    conversation = Conversation.objects.create(
        owner=user, model_profile=profile, title=request_text[:200], channel=Conversation.Channel.API,
        api_key=api_key, api_key_name=api_key.name if api_key else "",
        end_user=request.get("end_user", ""), metadata=request.get("metadata", {}),
    )  # fmt: skip
    stored = [
        Message(
            conversation=conversation,
            role=m["role"],
            content=m["content"],
            tool_calls=m["tool_calls"],
            tool_call_id=m["tool_call_id"],
            tokens=count_tokens(m["content"]),
        )  # fmt: skip
        for m in messages
    ]
    Message.objects.bulk_create(stored[:last_user])
    turn = create_turn(conversation, request_text, two_stage=request["two_stage"], client=client)
    Message.objects.bulk_create(stored[last_user + 1 :])
    return turn


def start_turn(user, request: dict, *, api_key: ApiKey | None = None):
    """open_turn, and the `model` its answer carries."""
    turn = open_turn(user, request, api_key=api_key)
    return turn, served_model(turn.conversation.model_profile)


def _authorize(header: str, ability: Ability):
    """The key's owner, if the key is valid (else 401), within its rate limits (else 429) and agents.access.abilities
    allows it `ability` (else 403)."""
    api_key = authenticate(header.removeprefix("Bearer ").strip())
    if api_key is None:
        raise ApiError(401, "Invalid API key.", type="authentication_error", code="invalid_api_key")
    exceeded = rate_limits.api_request(api_key)
    if exceeded is not None:
        raise ApiError.rate_limited(exceeded)
    refused = refusal(api_key.user, ability, scopes=api_key.scopes)
    if refused is not None:
        code = "insufficient_scope" if refused.missing_scopes else "insufficient_permissions"
        raise ApiError(403, refused.message, type="permission_error", code=code)
    return api_key


async def api_user(request, ability: Ability):
    """The user an API request acts as, for `ability`: 401 without a valid key, 403 when it may not. The key
    itself is left on the request (`request.api_key`) for what records who asked."""
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer "):
        raise ApiError(401, "Missing API key: send Authorization: Bearer <key>.", type="authentication_error")
    api_key = await database_sync_to_async(_authorize)(header, ability)
    request.api_key = api_key
    return api_key.user


async def chat_completions(request):
    try:
        if request.method != "POST":
            raise ApiError.method_not_allowed("Use POST for /v1/chat/completions.", allow=("POST",))
        user = await api_user(request, START_TURN)
        parsed = parse_request(check_chat_request(request))  # size, depth, strings, types: body_limits
        turn, answering = await database_sync_to_async(start_turn)(user, parsed, api_key=request.api_key)
    except (ApiError, InputRejected) as error:
        return error.response()
    if parsed["stream"]:
        response = StreamingHttpResponse(sse_stream(turn.id, answering), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    prompt_tokens = sum(count_tokens(m["content"]) for m in parsed["messages"])
    try:
        return JsonResponse(await completion(turn.id, answering, prompt_tokens))
    except ApiError as error:
        return error.response()


async def approval(request, approval_id: int):
    """POST {"approve": true|false}: the conversation's owner (or an operator) decides a pending call; at a four-eyes
    risk level the owner may only deny it (403 four_eyes)."""
    try:
        if request.method != "POST":
            raise ApiError.method_not_allowed("Use POST to decide an approval.", allow=("POST",))
        user = await api_user(request, DECIDE_APPROVAL)
        try:
            body = json.loads(check_json_body(request) or b"")
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
        except FourEyes as refused:
            raise ApiError(403, str(refused), type="permission_error", code="four_eyes") from None
        except PermissionDenied:
            raise ApiError(403, "This key may not decide that approval.", type="permission_error") from None
        except ApprovalClosed as closed:
            raise ApiError(409, str(closed), code="approval_closed") from None
    except (ApiError, InputRejected) as error:
        return error.response()
    return JsonResponse({"id": decided.pk, "status": decided.status, "tool_name": decided.tool_name})


def model_object(name: str, profile: ModelProfile) -> dict:
    """OpenAI's model object, with what toolhub adds: the budget and the model that answers."""
    upstream = upstream_of(profile)
    return {
        "id": name,
        "object": "model",
        "created": 0,
        "owned_by": "toolhub",
        "context_window": profile.context_window,
        "max_output_tokens": profile.max_output_tokens,
        "upstream_model": upstream.model_id,
        "offline": upstream.offline,
    }


def model_objects() -> list[dict]:
    return [model_object(name, profile) for name, profile in model_profiles()]


async def model(request, model_id: str):
    """GET /v1/models/<id>: the model object, or a JSON 404 error object for an unknown id."""
    try:
        if request.method not in READ_METHODS:
            raise ApiError.method_not_allowed("Use GET for /v1/models/<id>.", allow=READ_METHODS)
        await api_user(request, LIST_MODELS)
        found = [m for m in await database_sync_to_async(model_objects)() if m["id"] == model_id]
        if not found:
            raise ApiError(404, f"The model {model_id!r} does not exist.", param="model", code="model_not_found")
    except ApiError as error:
        return error.response()
    return JsonResponse(found[0])


async def models(request):
    try:
        if request.method not in READ_METHODS:
            raise ApiError.method_not_allowed("Use GET for /v1/models.", allow=READ_METHODS)
        await api_user(request, LIST_MODELS)
    except ApiError as error:
        return error.response()
    return JsonResponse({"object": "list", "data": await database_sync_to_async(model_objects)()})


def openapi(request):
    """GET /v1/openapi.json: the OpenAPI 3.1 description of /v1 (public, like the API's documentation)."""
    if request.method not in READ_METHODS:
        return ApiError.method_not_allowed("Use GET for /v1/openapi.json.", allow=READ_METHODS).response()
    return JsonResponse(openapi_document())
