"""One turn: memory -> steward -> bundle -> knowledge -> prompt -> model loop -> record.

Each step is a call into its own module; data flows forward only. Every step
emits an event through events.emit. A finished turn is never run again; a
turn found running (a worker died mid-turn) restarts cleanly.
"""

import json
import logging
import time

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog.bundle import build_bundle
from catalog.knowledge import select_snippets

from . import memory, prompt
from .events import emit
from .models import Message, ModelProfile, RoutingLog, Turn, TurnEvent, Workflow
from .providers import TurnHints, get_provider
from .router import ConversationState
from .routing_log import record_analysis, record_outcome
from .steward import StewardContext, analyze
from .tool_calls import execute

log = logging.getLogger(__name__)
EventType = TurnEvent.Type


def status_text(phase: str) -> str:
    return settings.TOOLHUB_STATUS_TEXTS[phase]


def model_profile(conversation) -> ModelProfile:
    if conversation.model_profile_id:
        return conversation.model_profile
    profile = ModelProfile.objects.filter(name=settings.TOOLHUB_MODEL_PROFILE).first()
    return profile or ModelProfile(
        name="default", context_window=8192, max_output_tokens=1024, reserved_result_tokens=1024
    )


def conversation_state(conversation) -> ConversationState:
    workflow = (
        Workflow.objects.filter(conversation=conversation, status=Workflow.Status.ACTIVE, expires_at__gt=timezone.now())
        .order_by("-updated_at")
        .first()
    )
    if workflow is None:
        return ConversationState()
    return ConversationState(workflow.kind, workflow.phase, workflow.state.get("action", "create"))


def as_message(message: Message) -> dict:
    data = {"role": message.role, "content": message.content}
    if message.tool_calls:
        data["tool_calls"] = message.tool_calls
    if message.tool_call_id:
        data["tool_call_id"] = message.tool_call_id
    return data


def claim(turn_id: int) -> Turn | None:
    """Move a queued turn to running; restart a running one cleanly; skip a finished one."""
    now = timezone.now()
    with transaction.atomic():
        turn = Turn.objects.select_for_update().select_related("conversation").get(pk=turn_id)
        if turn.status in (Turn.Status.DONE, Turn.Status.FAILED):
            return None
        if turn.status == Turn.Status.RUNNING:
            # Redelivered after a worker died: drop the partial answer, keep the user message.
            turn.messages.exclude(role=Message.Role.USER).delete()
            RoutingLog.objects.filter(turn=turn).delete()
        turn.status, turn.started_at = Turn.Status.RUNNING, now
        turn.save(update_fields=["status", "started_at"])
    return turn


def run_turn(turn_id: int) -> None:
    turn = claim(turn_id)
    if turn is None:
        return
    try:
        TurnRun(turn).run()
    except Exception as exc:  # the turn fails visibly, never silently
        log.exception("turn %s failed", turn_id)
        emit(turn.id, EventType.ERROR, phase="error", message=f"The turn failed: {exc}")
        Turn.objects.filter(pk=turn.id).update(status=Turn.Status.FAILED, error=str(exc), finished_at=timezone.now())
        emit(turn.id, EventType.DONE, phase="done", status=Turn.Status.FAILED)


class TurnRun:
    """The state of one running turn; each method is one step of the path."""

    def __init__(self, turn: Turn):
        self.turn = turn
        self.conversation = turn.conversation
        self.options = settings.TOOLHUB_STEWARD_OPTIONS
        self.started = time.perf_counter()
        self.called: list[str] = []

    def status(self, phase: str, message: str, **data) -> None:
        if self.options["enable_status_messages"]:
            emit(self.turn.id, EventType.STATUS, phase=phase, message=message, **data)

    def run(self) -> None:
        messages = [as_message(m) for m in self.conversation.messages.order_by("id")]
        # A client's own system messages become part of our system prompt.
        self.instructions = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        history = [m for m in messages if m["role"] != "system"]
        user_text = history[-1]["content"] if history and history[-1]["role"] == "user" else ""
        profile = model_profile(self.conversation)
        self.turn_model = get_provider()
        Turn.objects.filter(pk=self.turn.id).update(model=self.turn_model.label)

        analysis, context = self.consult_steward(user_text)
        self.entries = context.entries
        bundle = build_bundle(analysis.decision, self.entries, recommended=analysis.recommended_tools)
        routing = record_analysis(analysis, query=user_text, turn=self.turn, bundle=bundle, two_stage=self.two_stage)
        emit(
            self.turn.id,
            EventType.ROUTING,
            phase="routing",
            loaded=list(bundle.loaded_names),
            deferred=len(bundle.deferred_names),
            denied=len(bundle.denied),
            loaded_schema_tokens=bundle.loaded_schema_tokens,
            catalog_schema_tokens=bundle.catalog_schema_tokens,
        )
        knowledge = select_snippets(analysis.decision, budget_tokens=profile.reserved_result_tokens // 2)
        history[-1] = {**history[-1], "content": prompt.enrich(
            user_text, recommended=analysis.recommended_tools, context=analysis.context)}  # fmt: skip
        hints = TurnHints(user_text, analysis.recommended_tools, tuple(knowledge), analysis.context)
        answer = self.model_loop(history, bundle, knowledge, profile, hints, analysis)
        duration = int((time.perf_counter() - self.started) * 1000)
        record_outcome(routing, called=self.called, turn_ms=duration)
        Turn.objects.filter(pk=self.turn.id).update(status=Turn.Status.DONE, finished_at=timezone.now())
        emit(self.turn.id, EventType.DONE, phase="done", status=Turn.Status.DONE, content=answer, turn_ms=duration)

    @property
    def two_stage(self) -> bool:
        return self.options["two_stage_enabled"] and self.turn.two_stage

    def consult_steward(self, user_text: str):
        context = StewardContext.current()
        if not self.two_stage:
            result = analyze(user_text, context=context, max_tools=0, mode="rules")
            return result, context
        self.status("analysis", status_text("analysis"))
        result = analyze(user_text, self.state, context=context)
        if result.fallback:
            self.status("fallback", status_text("fallback"))
        elif result.recommended_tools and not result.silent:
            self.status("analysis_complete", status_text("analysis_complete"),
                        recommended_tools=list(result.recommended_tools))  # fmt: skip
        elif result.silent:
            self.status("analysis_complete", status_text("analysis_complete"))
        else:
            self.status("analysis_complete", status_text("analysis_complete_none"), recommended_tools=[])
        return result, context

    @property
    def state(self) -> ConversationState:
        return conversation_state(self.conversation)

    def fit(self, system: str, tools: list[dict], history: list[dict], profile) -> list[dict]:
        system_tokens, tool_tokens = prompt.prompt_tokens(system, tools)
        available = memory.budget(profile, system_tokens=system_tokens, tool_tokens=tool_tokens)
        fitted = memory.evict_whole_turns(history, budget=available)
        if fitted.evicted_turns:
            self.status("memory", f"Older messages left out to fit {profile.name}: {fitted.evicted_turns} turn(s)")
        return [{"role": "system", "content": system}, *fitted.messages]

    def model_loop(self, history, bundle, knowledge, profile, hints, analysis) -> str:
        provider = self.turn_model
        transcript = list(history)
        for _step in range(settings.TOOLHUB_MAX_STEPS):
            system = prompt.system_prompt(bundle, knowledge, self.instructions)
            tools = prompt.tool_definitions(bundle)
            messages = self.fit(system, tools, transcript, profile)
            content, calls = "", ()
            for chunk in provider.stream(messages, tools, hints=hints):
                if chunk.content:
                    content += chunk.content
                    emit(self.turn.id, EventType.DELTA, phase="content", content=chunk.content)
                if chunk.tool_calls:
                    calls = chunk.tool_calls
            if not calls:
                self.save_message(Message.Role.ASSISTANT, content)
                return content
            tool_calls = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
            ]
            transcript.append({"role": "assistant", "content": content or None, "tool_calls": tool_calls})
            self.save_message(Message.Role.ASSISTANT, content, tool_calls=tool_calls)
            found: list[str] = []
            for call in calls:
                outcome = self.call_tool(call, bundle, profile, silent=analysis.silent)
                found += outcome.found
                transcript.append({"role": "tool", "tool_call_id": call.id, "content": outcome.content})
                self.save_message(Message.Role.TOOL, outcome.content, tool_call_id=call.id)
            if found:
                recommended = [*bundle.loaded_names, *found]
                bundle = build_bundle(analysis.decision, self.entries, recommended=recommended)
        message = f"I stopped after {settings.TOOLHUB_MAX_STEPS} steps without a final answer."
        emit(self.turn.id, EventType.DELTA, phase="content", content=message)
        self.save_message(Message.Role.ASSISTANT, message)
        return message

    def call_tool(self, call, bundle, profile, *, silent: bool):
        def tool_emit(phase: str, message: str, **data):
            if call.name == settings.TOOLHUB_WEB_SEARCH_TOOL and not self.options["show_web_search_status"]:
                return
            self.status(phase, message, **data)

        if not silent and call.name != settings.TOOLHUB_WEB_SEARCH_TOOL:
            self.status("tool", f"🔧 Using {call.name}", tool_name=call.name, arguments=_arguments(call))
        emit(self.turn.id, EventType.TOOL_CALL, phase="tool", tool_name=call.name, arguments=_arguments(call))
        outcome = execute(call, bundle, emit=tool_emit, max_result_tokens=profile.reserved_result_tokens)
        if not outcome.refused:
            self.called.append(call.name)
        emit(self.turn.id, EventType.TOOL_RESULT, phase="tool", tool_name=call.name, is_error=outcome.is_error,
             refused=outcome.refused, content=outcome.content[:2000])  # fmt: skip
        return outcome

    def save_message(self, role: str, content: str, **fields) -> Message:
        data = {"role": role, "content": content or "", **fields}
        tokens = memory.message_tokens({**data, "content": content})
        return Message.objects.create(conversation=self.conversation, turn=self.turn, tokens=tokens, **data)


def _arguments(call) -> dict | str:
    try:
        return json.loads(call.arguments or "{}")
    except ValueError:
        return call.arguments
