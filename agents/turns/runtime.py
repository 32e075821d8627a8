"""One turn: memory -> steward -> bundle -> knowledge -> prompt -> model loop -> record.

Each step is a call into its own module; data flows forward only. Every step
emits an event through events.emit. A finished turn is never run again; a
turn found running (a worker died mid-turn) restarts cleanly.

An API client's own tools (agents.turns.client_tools) join the bundle; toolhub's tools
the model calls run here as always, and a step that calls a client tool ends the
turn: its done event carries finish_reason "tool_calls" and the client's calls.
A failed turn's error event carries a FailureReason.
"""

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypedDict

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents.models import (
    TOOL_EXECUTION_PHASE,
    Conversation,
    Message,
    ModelProfile,
    RoutingLog,
    ToolApproval,
    Turn,
    TurnEvent,
    Workflow,
    default_profile,
)
from agents.providers import ModelTimeout, ModelUnavailable, ToolCall, TurnHints, followups, get_provider, upstream_of
from agents.router import ConversationState, Intent, StewardContext, StewardResult, analyze, current_time_context
from catalog.knowledge.registry import select_snippets
from catalog.mcp_client.callers import Caller
from catalog.mcp_client.content import non_text
from catalog.models import READ_ONLY_OPERATIONS
from catalog.policies.bundle import CapabilityBundle, build_bundle, with_client_tools
from catalog.policies.decision import RoutingDecision
from catalog.policies.flows import flow_to_start

from . import approvals, learning, lifecycle, memory, prompt, sampling, staged_flows, watchdog
from .budget import token_budget
from .client_tools import ClientTools
from .events import FailureReason, TurnTakenOver, emit, held_turn
from .memory import ChatMessage
from .routing_log import record_analysis, record_outcome
from .tool_calls import CallOutcome, execute
from .workflows import WorkflowError

log = logging.getLogger(__name__)
EventType = TurnEvent.Type


def status_text(phase: str) -> str:
    return settings.TOOLHUB_STATUS_TEXTS[phase]


def model_profile(conversation: Conversation) -> ModelProfile:
    """The conversation's profile (its upstream model and budget); `toolhub` (none chosen) is the default's."""
    if conversation.model_profile_id:
        assert conversation.model_profile is not None  # its id is set
        return conversation.model_profile
    return default_profile()


def conversation_state(workflow: Workflow | None) -> ConversationState:
    if workflow is None:
        return ConversationState()
    return ConversationState(workflow.kind, workflow.phase, workflow.state.get("action", "create"))


def as_message(message: Message) -> ChatMessage:
    data: ChatMessage = {"role": message.role, "content": message.content}
    if message.tool_calls:
        data["tool_calls"] = message.tool_calls
    if message.tool_call_id:
        data["tool_call_id"] = message.tool_call_id
    return data


def claim(turn_id: int) -> tuple[Turn, bool, list[str]] | None:
    """Move a queued turn to running (or resume a waiting one whose approvals are decided), as a new attempt.

    Returns (turn, resuming, shown), or None when there is nothing to run: a
    finished turn, a waiting one still waiting, or a running one whose lease
    is held (a redelivered copy of its task). A turn that ran before (its
    worker died: re-queued by the watchdog, or its task redelivered) restarts:
    its partial answer is dropped, and `shown` lists the events the dead run
    stored, which the new run does not store again (agents/turns/watchdog.py says
    when a turn restarts rather than fails).
    """
    with transaction.atomic():
        turn = Turn.objects.select_for_update().select_related("conversation").get(pk=turn_id)
        if turn.status in Turn.ENDED:
            return None
        ran = turn.status == Turn.Status.RUNNING
        if ran and not watchdog.take_over_locked(turn):
            return None  # still held by its run, or just failed by the watchdog
        resuming = turn.status == Turn.Status.WAITING
        if resuming and turn.approvals.filter(status=ToolApproval.Status.PENDING).exists():
            return None
        now = timezone.now()
        restarting = not resuming and (ran or turn.started_at is not None)
        shown: list[str] = []
        if restarting:
            turn.messages.exclude(role=Message.Role.USER).delete()
            RoutingLog.objects.filter(turn=turn).delete()
            turn.approvals.all().delete()
            shown = [event_key(e) for e in turn.events.order_by("sequence").values("type", "phase", "payload")]
        turn.status = Turn.Status.RUNNING
        turn.attempt += 1
        turn.heartbeat_at = now
        turn.started_at = turn.started_at or now
        turn.deadline_at = turn.deadline_at if restarting and turn.deadline_at else lifecycle.deadline_from(now)
        turn.save(update_fields=["status", "attempt", "heartbeat_at", "started_at", "deadline_at"])
    return turn, resuming, shown


def event_key(event: Mapping[str, object]) -> str:
    return json.dumps([event["type"], event["phase"], event["payload"]], sort_keys=True, default=str)


def run_turn(turn_id: int) -> None:
    claimed = claim(turn_id)
    if claimed is None:
        return
    turn, resuming, shown = claimed
    try:
        with lifecycle.lease_held(turn.id, turn.attempt):
            TurnRun(turn, shown=shown).run(resuming=resuming)
    except TurnTakenOver:
        log.warning("turn %s was taken over or cancelled while attempt %s ran; this run stops", turn_id, turn.attempt)
    except Exception as exc:  # the turn fails visibly, never silently
        log.exception("turn %s failed", turn_id)
        lifecycle.fail_turn(turn.id, failure_reason(exc), f"The turn failed: {exc}", detail=str(exc),
                           attempt=turn.attempt)  # fmt: skip


def failure_reason(exc: Exception) -> str:
    if isinstance(exc, ModelTimeout):
        return FailureReason.MODEL_TIMEOUT
    if isinstance(exc, ModelUnavailable):
        return FailureReason.MODEL_UNAVAILABLE
    if isinstance(exc, memory.BudgetExceeded):
        return FailureReason.CONTEXT_LENGTH_EXCEEDED
    return FailureReason.INTERNAL


@dataclasses.dataclass(frozen=True)
class Reply:
    """How a turn's model loop ended: the answer, or the client tool calls it hands to the API client. The
    assistant message with client calls is stored by the loop; an answer is stored with the turn's end (`run`)."""

    content: str
    client_calls: tuple[dict[str, Any], ...] = ()  # OpenAI tool_calls, only the client's tools


class WorkflowHints(TypedDict, total=False):
    """TurnHints' fields that come from the bundle and the active workflow (TurnRun.workflow_hints)."""

    read_only_tools: frozenset[str]
    step_tools: tuple[str, ...]
    known_values: dict[str, str]


class TurnRun:
    """The state of one running turn; each method is one step of the path."""

    def __init__(self, turn: Turn, *, shown: Sequence[str] = ()):
        self.turn = turn
        self.shown = list(shown)  # events a dead run of this turn stored: not stored again
        # The number of the last event stored for the turn, as far as this run knows (None: read it). A first
        # attempt starts from none: a queued turn has no events (a wrong guess only costs emit a retry).
        self.sequence: int | None = 0 if turn.attempt == 1 and not self.shown else None
        self.conversation = turn.conversation
        self.options = settings.TOOLHUB_STEWARD_OPTIONS
        self.client = ClientTools.of_turn(turn)

    def emit(self, type: str, *, phase: str = "", **payload: object) -> None:
        """Store the event as this run's (refused once the watchdog took the turn over); an event a dead run of
        the turn already stored, the same and in the same order, is not stored twice."""
        if self.shown:
            key = event_key({"type": type, "phase": phase, "payload": payload})
            if key == self.shown[0]:
                self.shown.pop(0)
                return
            self.shown = []  # the run went another way: from here on every event is new
        self.sequence = emit(self.turn.id, type, phase=phase, attempt=self.turn.attempt, after=self.sequence,
                             **payload).sequence  # fmt: skip

    def status(self, phase: str, message: str, **data: object) -> None:
        if self.options["enable_status_messages"]:
            self.emit(EventType.STATUS, phase=phase, message=message, **data)

    def run(self, *, resuming: bool = False) -> None:
        messages = [as_message(m) for m in self.conversation.messages.order_by("id")]
        # A client's own system messages become part of our system prompt.
        self.instructions = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        history = [m for m in messages if m["role"] != "system"]
        user_index = max(i for i, m in enumerate(history) if m["role"] == "user")
        user_text = history[user_index]["content"]
        profile = model_profile(self.conversation)
        self.upstream = upstream_of(profile)
        self.turn_model = get_provider(self.upstream)  # each profile calls its own upstream model (the steward too)
        Turn.objects.filter(pk=self.turn.id).update(model=self.turn_model.label)
        # One view of the catalog for the whole turn: the steward ranks and the bundle decides on the same.
        self.context = StewardContext.current(owner_id=self.conversation.owner_id)
        self.entries = self.context.entries
        self.entry_of = {entry.name: entry for entry in self.entries}
        self.workflow = staged_flows.active_workflow(self.conversation)
        if resuming:
            self.routing = RoutingLog.objects.get(turn=self.turn)
            self.analysis = self.recorded_analysis(user_text)
            bundle = self.build(self.routing.exposed)
            self.status("resumed", "▶ Resuming after the approval decision")
        else:
            # A short reply to the assistant's question is routed with the request it answers.
            self.analysis = self.consult_steward("\n".join(followups.continued_requests(history)))
            self.start_flow_if_asked()
            bundle = self.build(self.analysis.recommended_tools)
        analysis = self.analysis
        knowledge = select_snippets(analysis.decision, text=user_text,
                                    budget_tokens=profile.reserved_result_tokens // 2)  # fmt: skip
        if not resuming:  # the routing log and its events (routing, knowledge), stored together
            used = [{"key": k["key"], "version": k["version"], "stale": k["stale"]} for k in knowledge]
            with transaction.atomic():
                self.routing = record_analysis(self.analysis, query=user_text, turn=self.turn, bundle=bundle,
                                               two_stage=self.two_stage, knowledge=used)  # fmt: skip
                self.announce(bundle)
                if knowledge:
                    stale = [k["title"] for k in knowledge if k["stale"]]
                    self.emit(EventType.ROUTING, phase="knowledge", snippets=used, stale=stale)
        self.called = list(self.routing.called)
        history[user_index] = {**history[user_index], "content": prompt.enrich(
            user_text, recommended=analysis.recommended_tools, context=analysis.context)}  # fmt: skip
        hints = TurnHints(user_text, analysis.recommended_tools, tuple(knowledge), analysis.context,
                          client_tools=self.client.names, **self.workflow_hints(bundle))  # fmt: skip
        self.profile = profile
        if resuming:
            self.settle_decided_calls(history, bundle)
        reply = self.model_loop(history, bundle, knowledge, hints, first_step=1 if resuming else 0)
        if reply is None:
            return  # paused on an approval; a new task resumes the turn
        started = self.turn.started_at
        assert started is not None  # claim set it
        duration = int((timezone.now() - started).total_seconds() * 1000)
        ending = {"finish_reason": "tool_calls", "tool_calls": list(reply.client_calls)} if reply.client_calls else {
            "finish_reason": "stop"}  # fmt: skip
        # Done once, only while this run still holds the turn: the answer, the routing outcome and the done event
        # are stored together (the update holds the turn's row).
        answer = None if reply.client_calls else {"role": Message.Role.ASSISTANT, "content": reply.content or ""}
        spent = lifecycle.spent(unsaved_completion=memory.message_tokens(answer) if answer else 0)
        with transaction.atomic():
            finished = self.held().update(status=Turn.Status.DONE, finished_at=timezone.now(), **spent)
            if not finished:
                raise TurnTakenOver(f"turn {self.turn.id} was taken over before it finished")
            if answer is not None:
                self.store_message(Message.Role.ASSISTANT, reply.content)
            record_outcome(self.routing, called=self.called, turn_ms=duration)
            emit(self.turn.id, EventType.DONE, phase="done", status=Turn.Status.DONE, content=reply.content,
                 turn_ms=duration, after=self.sequence, **ending)  # fmt: skip
        learning.learn_from_turn(self.turn.id)  # a good turn teaches its request; never raises

    def build(self, recommended: Iterable[str]) -> CapabilityBundle:
        """The bundle for the decision at the workflow's current phase (and its staged choices)."""
        self.workflow_changed = False
        decision = self.analysis.decision
        phase = self.workflow.phase if self.workflow and self.workflow.status == Workflow.Status.ACTIVE else ""
        if decision.phase != phase:
            decision = dataclasses.replace(decision, phase=phase, side_query=decision.side_query and bool(phase))
            self.analysis = dataclasses.replace(self.analysis, decision=decision)
        choices = None
        if phase:
            assert self.workflow is not None  # phase is the active workflow's
            choices = self.workflow.state.get("choices", {})
        bundle = build_bundle(decision, self.entries, recommended=recommended, choices=choices)
        return with_client_tools(bundle, self.client.definitions)

    def workflow_hints(self, bundle: CapabilityBundle) -> WorkflowHints:
        """What a rule-based model may use beside the steward's advice: the workflow step's tools and the ids
        its earlier steps returned, and which loaded tools only read."""
        read_only = frozenset(name for name in bundle.loaded_names if (entry := self.entry_of.get(name)) and
                              entry.policy and entry.policy.operation in READ_ONLY_OPERATIONS)  # fmt: skip
        if self.workflow is None:
            return {"read_only_tools": read_only}
        steps = tuple(
            name for name in bundle.loaded_names if staged_flows.step_of(self.entry_of.get(name), self.workflow)
        )
        return {"read_only_tools": read_only, "step_tools": steps, "known_values": dict(self.workflow.state.get(
            "ids", {}))}  # fmt: skip

    def start_flow_if_asked(self) -> None:
        """A confident create whose recommended tools a staged flow stands in for starts that flow."""
        if self.workflow is not None:
            return
        flow = flow_to_start(self.analysis.decision, self.analysis.recommended_tools)
        if flow is None:
            return
        self.workflow = staged_flows.start_flow(self.conversation, flow)
        self.status("workflow", f"📝 Started {flow.kind} at step {self.workflow.phase}", workflow_id=self.workflow.pk,
                    kind=flow.kind, workflow_phase=self.workflow.phase, version=self.workflow.version)  # fmt: skip

    def announce(self, bundle: CapabilityBundle) -> None:
        self.emit(
            EventType.ROUTING,
            phase="routing",
            loaded=list(bundle.loaded_names),
            deferred=len(bundle.deferred_names),
            denied=len(bundle.denied),
            loaded_schema_tokens=bundle.loaded_schema_tokens,
            catalog_schema_tokens=bundle.catalog_schema_tokens,
            client_tools=list(bundle.client_names),
            client_schema_tokens=sum(tool.schema_tokens for tool in bundle.client),
        )

    def recorded_analysis(self, user_text: str) -> StewardResult:
        """The steward's result as recorded when the turn started (a resumed turn does not re-route)."""
        decision = self.routing.decision
        silent = self.routing.intent == Intent.TIME
        return StewardResult(
            intent=self.routing.intent,
            decision=RoutingDecision(
                decision["action"],
                frozenset(decision["domains"]),
                decision["confidence"],
                decision["phase"],
                decision["side_query"],
            ),  # fmt: skip
            recommended_tools=tuple(self.routing.recommended),
            reasoning="recorded",
            requires_assistance=bool(self.routing.recommended),
            mode=self.routing.steward_mode,
            latency_ms=0,
            silent=silent,
            context=current_time_context() if silent else "",
        )

    @property
    def two_stage(self) -> bool:
        return self.options["two_stage_enabled"] and self.turn.two_stage

    def consult_steward(self, user_text: str) -> StewardResult:
        context = self.context
        if not self.two_stage:
            return analyze(user_text, context=context, max_tools=0, mode="rules")
        self.status("analysis", status_text("analysis"))
        result = analyze(user_text, self.state, context=context, upstream=self.upstream)
        if result.fallback:
            self.status("fallback", status_text("fallback"))
        elif result.recommended_tools and not result.silent:
            self.status("analysis_complete", status_text("analysis_complete"),
                        recommended_tools=list(result.recommended_tools))  # fmt: skip
        elif result.silent:
            self.status("analysis_complete", status_text("analysis_complete"))
        else:
            self.status("analysis_complete", status_text("analysis_complete_none"), recommended_tools=[])
        return result

    @property
    def state(self) -> ConversationState:
        return conversation_state(self.workflow)

    def fit(
        self, system: str, tokens: tuple[int, int], history: list[ChatMessage], profile: ModelProfile
    ) -> list[ChatMessage]:
        """`tokens`: the system prompt's and the tool schemas' (prompt.prompt_tokens)."""
        system_tokens, tool_tokens = tokens
        available = memory.budget(profile, system_tokens=system_tokens, tool_tokens=tool_tokens)
        fitted = memory.evict_whole_turns(history, budget=available)
        if fitted.evicted_turns:
            self.status("memory", f"Older messages left out to fit {profile.name}: {fitted.evicted_turns} turn(s)")
        return [{"role": "system", "content": system}, *fitted.messages]

    def record_budget(
        self, tokens: tuple[int, int], knowledge: list[dict[str, Any]], messages: list[ChatMessage]
    ) -> None:
        """The step's token budget as a routing event (phase budget), only when it differs from the last one."""
        system_tokens, tool_tokens = tokens
        figures = token_budget(self.profile, system_tokens=system_tokens, tool_tokens=tool_tokens,
                               knowledge=knowledge, memory_tokens=memory.conversation_tokens(messages))  # fmt: skip
        if figures != getattr(self, "budget", None):
            self.budget = figures
            self.emit(EventType.ROUTING, phase="budget", **figures)

    def model_loop(
        self,
        history: list[ChatMessage],
        bundle: CapabilityBundle,
        knowledge: list[dict[str, Any]],
        hints: TurnHints,
        *,
        first_step: int = 0,
    ) -> Reply | None:
        """Steps until the model answers, calls a client tool (the Reply), pauses on an approval (None) or hits
        the limit. In a step that calls client tools, toolhub's own calls of that step still run first.
        `first_step` 1 for a resumed turn: its request's first step (where tool_choice applies) is behind it."""
        provider = self.turn_model
        transcript = list(history)
        for step in range(first_step, first_step + settings.TOOLHUB_MAX_STEPS):
            system = prompt.system_prompt(bundle, knowledge, self.instructions)
            tools = prompt.tool_definitions(bundle)
            tokens = prompt.prompt_tokens(system, tools)  # counted once for the fit and the budget
            messages = self.fit(system, tokens, transcript, self.profile)
            self.record_budget(tokens, knowledge, messages)
            calls: tuple[ToolCall, ...]
            content, calls = "", ()
            for chunk in provider.stream(messages, tools, hints=hints, **self.client.step_options(step)):
                if chunk.content:
                    content += chunk.content
                    self.emit(EventType.DELTA, phase="content", content=chunk.content)
                if chunk.tool_calls:
                    calls = chunk.tool_calls
            if not calls:
                return Reply(content)  # stored with the turn's end
            tool_calls = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
            ]
            transcript.append({"role": "assistant", "content": content or None, "tool_calls": tool_calls})
            self.save_message(Message.Role.ASSISTANT, content, tool_calls=tool_calls)
            client_calls = tuple(
                raw for call, raw in zip(calls, tool_calls, strict=True) if bundle.is_client(call.name)
            )
            found: list[str]
            found, waiting = [], False
            for call in calls:
                if bundle.is_client(call.name):
                    self.emit(EventType.TOOL_CALL, phase="tool", tool_name=call.name, arguments=_arguments(call),
                              client=True)  # fmt: skip
                    continue
                if client_calls and self.requires_approval(call, bundle):
                    outcome = CallOutcome(content=json.dumps({"error": (
                        f"{call.name} needs an operator's approval, which cannot wait in a step that hands tools "
                        "to the client; call it again in a later step.")}), is_error=True, refused=True)  # fmt: skip
                    self.save_message(Message.Role.TOOL, outcome.content, tool_call_id=call.id)
                elif self.needs_approval(call, bundle):
                    waiting = True
                    continue
                else:
                    outcome = self.call_tool(call, bundle)  # stores its tool message
                found += outcome.found
                transcript.append({"role": "tool", "tool_call_id": call.id, "content": outcome.content})
            if client_calls:
                return Reply(content, client_calls)
            if found or self.workflow_changed:
                bundle = self.build([*bundle.loaded_names, *found])
                RoutingLog.objects.filter(pk=self.routing.pk).update(exposed=list(bundle.loaded_names))
            if waiting:
                self.pause()
                return None
        message = f"I stopped after {settings.TOOLHUB_MAX_STEPS} steps without a final answer."
        self.emit(EventType.DELTA, phase="content", content=message)
        return Reply(message)  # stored with the turn's end

    @staticmethod
    def requires_approval(call: ToolCall, bundle: CapabilityBundle) -> bool:
        tool = next((t for t in bundle.loaded if t.name == call.name), None)
        return tool is not None and tool.requires_confirmation

    def needs_approval(self, call: ToolCall, bundle: CapabilityBundle) -> bool:
        """A held tool whose policy requires confirmation: ask, and let the turn wait."""
        if not self.requires_approval(call, bundle):
            return False
        tool = next(t for t in bundle.loaded if t.name == call.name)
        arguments = _arguments(call)
        approval = approvals.request_approval(
            turn_id=self.turn.id,
            tool_call_id=call.id,
            tool_name=call.name,
            arguments=arguments if isinstance(arguments, dict) else {},
            risk=tool.risk,
        )
        self.sequence = None  # request_approval stored an event of its own
        self.status("approval_required", f"⏸ {call.name} needs approval before it runs", tool_name=call.name,
                    arguments=arguments, approval_id=approval.pk, risk=tool.risk)  # fmt: skip
        return True

    def held(self) -> QuerySet[Turn]:
        """The turn's row while this run holds it."""
        return held_turn(self.turn.id, self.turn.attempt)

    def pause(self) -> None:
        RoutingLog.objects.filter(pk=self.routing.pk).update(called=self.called)
        if not self.held().update(status=Turn.Status.WAITING):
            raise TurnTakenOver(f"turn {self.turn.id} was taken over before it paused")

    def settle_decided_calls(self, history: list[ChatMessage], bundle: CapabilityBundle) -> None:
        """After a decision: run the approved calls, tell the model about the denied ones."""
        # Only the answers after the paused step count: some servers reuse call ids ("call_0") every step.
        at = max(i for i, m in enumerate(history) if m["role"] == "assistant" and m.get("tool_calls"))
        last = history[at]
        answered = {m.get("tool_call_id") for m in history[at + 1 :] if m["role"] == "tool"}
        decisions = {a.tool_call_id: a for a in ToolApproval.objects.filter(turn=self.turn)}
        for raw in last["tool_calls"]:
            if raw["id"] in answered:
                continue
            call = ToolCall(raw["id"], raw["function"]["name"], raw["function"]["arguments"])
            approval = decisions.get(call.id)
            if approval is not None and approval.status == ToolApproval.Status.APPROVED:
                outcome = self.call_tool(call, bundle, approved=True)  # stores its tool message
            else:
                outcome = CallOutcome(content=json.dumps({"error": approvals.refusal(call.name, approval)}))
                self.save_message(Message.Role.TOOL, outcome.content, tool_call_id=call.id)
            history.append({"role": "tool", "tool_call_id": call.id, "content": outcome.content})

    def announces(self, tool_name: str) -> bool:
        """Whether running this tool shows as a status (phase tool_execution): only TOOLHUB_STATUS_TOOLS do.

        TOOLHUB_SHOW_WEB_SEARCH_STATUS=0 silences web_search's own status.
        """
        if tool_name not in settings.TOOLHUB_STATUS_TOOLS:
            return False
        return tool_name != settings.TOOLHUB_WEB_SEARCH_TOOL or self.options["show_web_search_status"]

    def call_tool(self, call: ToolCall, bundle: CapabilityBundle, *, approved: bool = False) -> CallOutcome:
        """Run the call and store its result: the event, and the tool message the model reads."""
        announced = self.announces(call.name)

        def tool_emit(phase: str, message: str, **data: object) -> None:
            if phase == TOOL_EXECUTION_PHASE and not announced:
                return  # the tool's own announcement (web_search's query); its other statuses (errors) still show
            self.status(phase, message, **data)

        # web_search announces itself, with its query; a silent turn (time/date injected) names no tool.
        if announced and not self.analysis.silent and call.name != settings.TOOLHUB_WEB_SEARCH_TOOL:
            self.status(TOOL_EXECUTION_PHASE, f"🔧 Using {call.name}", tool_name=call.name, arguments=_arguments(call))
        self.emit(EventType.TOOL_CALL, phase="tool", tool_name=call.name, arguments=_arguments(call))

        def run_call() -> CallOutcome:
            return execute(
                call,
                bundle,
                emit=tool_emit,
                max_result_tokens=self.profile.reserved_result_tokens,
                approved=approved,
                owner_id=self.conversation.owner_id,
                mcp_caller=self.mcp_caller,
            )

        step = staged_flows.step_of(self.entry_of.get(call.name), self.workflow) if bundle.holds(call.name) else None
        outcome = self.run_step(step, call, run_call) if step else run_call()
        if not outcome.refused:
            self.called.append(call.name)
        # Images, audio and resources go to the console whole; the model read a line about each.
        blocks = {"blocks": non_text(outcome.result["content"])} if outcome.result else {}
        # The result's event and its message in one transaction: the event's check holds the turn for both.
        with transaction.atomic():
            self.emit(EventType.TOOL_RESULT, phase="tool", tool_name=call.name, arguments=_arguments(call),
                      is_error=outcome.is_error, refused=outcome.refused, content=outcome.content[:2000],
                      **blocks)  # fmt: skip
            self.store_message(Message.Role.TOOL, outcome.content, tool_call_id=call.id, result=outcome.result)
        return outcome

    def mcp_caller(self) -> Caller:
        """Who the turn's MCP tool calls are made for (agents.turns.sampling): the conversation's owner and the
        conversation as the session, which choose per-user and per-session connections; a server's sampling
        request is answered by the turn's model, its elicitation by an operator (agents.turns.questions)."""
        if getattr(self, "_mcp_caller", None) is None:
            self._mcp_caller = sampling.turn_caller(owner=self.conversation.owner, conversation_id=self.conversation.pk,
                                                    model=self.turn_model, turn_id=self.turn.id,
                                                    attempt=self.turn.attempt)  # fmt: skip
        return self._mcp_caller

    def run_step(self, step: staged_flows.Step, call: ToolCall, run_call: Callable[[], CallOutcome]) -> CallOutcome:
        """The current phase's step tool: record a type choice, or run it and move the workflow on."""
        workflow = self.workflow
        assert workflow is not None  # step is a step of this workflow (staged_flows.step_of)
        arguments = _arguments(call)
        try:
            choices = staged_flows.type_choices(self.entry_of[call.name], arguments, workflow) if isinstance(
                arguments, dict) else {}  # fmt: skip
            if choices:
                self.workflow = staged_flows.record_choices(workflow, choices)
                self.workflow_changed = True
                chosen = ", ".join(f"{name}: {kind}" for name, kind in choices.items())
                self.status("workflow", f"📝 Chose {chosen}", workflow_id=workflow.pk, choices=choices,
                            version=self.workflow.version)  # fmt: skip
                return CallOutcome(content=json.dumps({"chosen": choices, "next": (
                    f"Call {call.name} again with the fields of the chosen type; ask the user for any you do "
                    "not have, never invent them.")}))  # fmt: skip
            if step.submits:
                try:
                    result = staged_flows.submit(step, workflow, run_call)
                except staged_flows.StepFailed as failed:
                    return failed.outcome
                self.workflow = None
                self.workflow_changed = True
                self.status("workflow", f"✅ {workflow.kind} submitted", workflow_id=workflow.pk)
                return CallOutcome(content=result["content"])
            outcome = run_call()
            if outcome.is_error:
                return outcome
            self.workflow = staged_flows.advance_after(step, workflow, outcome.content)
            self.workflow_changed = True
            self.status("workflow", f"📝 {workflow.kind}: next step {self.workflow.phase}", workflow_id=workflow.pk,
                        workflow_phase=self.workflow.phase, version=self.workflow.version)  # fmt: skip
            return outcome
        except WorkflowError as exc:
            # Another request changed (or closed) the workflow first: nothing is overwritten; the user retries.
            self.workflow = staged_flows.active_workflow(self.conversation)
            self.workflow_changed = True
            self.status("workflow_conflict", f"⚠️ {exc} Please send your last message again.",
                        workflow_id=workflow.pk)  # fmt: skip
            return CallOutcome(content=json.dumps({"error": f"{exc} Ask the user to retry."}), is_error=True)

    def save_message(self, role: str, content: str, **fields: object) -> Message:
        """Stored only while this run holds the turn (as its events are): a failed or cancelled turn's run adds no
        message after lifecycle.end_turn answered its open tool calls, so the conversation's transcript stays valid."""
        with transaction.atomic():
            if not self.held().select_for_update().exists():
                raise TurnTakenOver(f"turn {self.turn.id} is no longer run by attempt {self.turn.attempt}")
            return self.store_message(role, content, **fields)

    def store_message(self, role: str, content: str, **fields: object) -> Message:
        """The message, stored without a check: for a caller whose transaction already holds the turn."""
        data = {"role": role, "content": content or "", **fields}
        tokens = memory.message_tokens({**data, "content": content})
        return Message.objects.create(conversation=self.conversation, turn=self.turn, tokens=tokens, **data)


def _arguments(call: ToolCall) -> object:
    """The call's arguments as JSON values, or their text when it is not JSON."""
    try:
        return json.loads(call.arguments or "{}")
    except ValueError:
        return call.arguments
