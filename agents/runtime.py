"""One turn: memory -> steward -> bundle -> knowledge -> prompt -> model loop -> record.

Each step is a call into its own module; data flows forward only. Every step
emits an event through events.emit. A finished turn is never run again. A turn
whose worker died (agents.liveness) is taken over from its last stored step:
nothing already shown is shown again, a call that may have run a write is not
run twice, and every run stops at the turn's deadline.
"""

import contextlib
import dataclasses
import json
import logging
import time

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog.bundle import build_bundle
from catalog.decision import RoutingDecision
from catalog.knowledge import select_snippets
from catalog.mcp_content import non_text
from catalog.models import READ_ONLY_OPERATIONS

from . import approvals, flows, learning, liveness, memory, prompt
from .budget import token_budget
from .events import TOOL_EXECUTION_PHASE, emit
from .models import Message, ModelProfile, RoutingLog, ToolApproval, Turn, TurnEvent, Workflow
from .providers import ModelUnavailable, ToolCall, TurnHints, get_provider
from .router import ConversationState, Intent, StewardContext, StewardResult, analyze, current_time_context
from .routing_log import record_analysis, record_outcome
from .tool_calls import CallOutcome, execute
from .workflows import WorkflowError

log = logging.getLogger(__name__)
EventType = TurnEvent.Type
TAKEN_OVER_TEXT = "⟳ The worker running this turn stopped; another one goes on from the last stored step"
REPLAY_DIVERGED_TEXT = (
    "The worker running this turn stopped while it streamed the answer, and the answer cannot be continued "
    "exactly; please ask again."
)
NOT_RERUN_TEXT = (
    "The worker running this turn stopped while {tool} ran: it may have run, and toolhub does not run a write "
    "twice. Check whether it took effect, then ask again."
)


def status_text(phase: str) -> str:
    return settings.TOOLHUB_STATUS_TEXTS[phase]


def model_profile(conversation) -> ModelProfile:
    if conversation.model_profile_id:
        return conversation.model_profile
    profile = ModelProfile.objects.filter(name=settings.TOOLHUB_MODEL_PROFILE).first()
    return profile or ModelProfile(
        name="default", context_window=8192, max_output_tokens=1024, reserved_result_tokens=1024
    )


def conversation_state(workflow) -> ConversationState:
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


class TurnLost(Exception):
    """This run no longer owns its turn (another worker took it over, or it was failed at its deadline)."""


class TurnOverdue(Exception):
    """The turn's deadline passed while it ran."""


class NotRerunnable(Exception):
    """A taken-over turn cannot go on without running a write again; the message is safe to show."""


@dataclasses.dataclass(frozen=True)
class Claim:
    turn: Turn
    resuming: bool = False  # after an approval decision
    takeover: bool = False  # after the worker that ran it died


def claim(turn_id: int, *, takeover: int | None = None) -> Claim | None:
    """Move a queued turn to running, resume a waiting one whose approvals are decided, or take over a dead run.

    Returns None when there is nothing to run: a finished turn, a waiting one
    still waiting, or a running one another live worker owns (its heartbeat is
    fresh: this is a duplicate delivery). A running turn whose heartbeat stopped,
    or that the watchdog sent with `takeover` equal to its attempt, is taken over:
    its attempt moves on, so the dead run's heartbeat can never claim it back.
    """
    now = timezone.now()
    with transaction.atomic():
        turn = Turn.objects.select_for_update().select_related("conversation").get(pk=turn_id)
        if turn.status in (Turn.Status.DONE, Turn.Status.FAILED):
            return None
        resuming = turn.status == Turn.Status.WAITING
        if resuming and turn.approvals.filter(status=ToolApproval.Status.PENDING).exists():
            return None
        taking_over = turn.status == Turn.Status.RUNNING
        if taking_over:
            stalled = turn.heartbeat_at is None or turn.heartbeat_at < now - liveness.stall()
            if takeover != turn.attempt and not stalled:
                return None
        if turn.deadline_at is not None and turn.deadline_at <= now and not resuming:
            overdue = True
        else:
            overdue = False
            turn.status = Turn.Status.RUNNING
            turn.started_at = turn.started_at if (resuming or taking_over) and turn.started_at else now
            turn.attempt += 1
            turn.heartbeat_at = now
            if resuming:
                turn.deadline_at = liveness.turn_deadline()
            turn.save(update_fields=["status", "started_at", "attempt", "heartbeat_at", "deadline_at"])
    if overdue:
        liveness.fail_turn(turn_id, liveness.overdue_message(), code=liveness.TIMEOUT_CODE)
        return None
    return Claim(turn, resuming=resuming, takeover=taking_over)


def run_turn(turn_id: int, *, takeover: int | None = None) -> None:
    claimed = claim(turn_id, takeover=takeover)
    if claimed is None:
        return
    turn = claimed.turn
    beating = contextlib.nullcontext(None) if current_app.conf.task_always_eager else liveness.Heartbeat(
        turn.id, turn.attempt)  # fmt: skip
    with beating as heartbeat:
        try:
            TurnRun(turn, heartbeat=heartbeat).run(resuming=claimed.resuming, takeover=claimed.takeover)
        except TurnLost:
            log.warning("turn %s attempt %s: another run owns the turn now; this one stops", turn.id, turn.attempt)
        except TurnOverdue:
            liveness.fail_turn(turn.id, liveness.overdue_message(), code=liveness.TIMEOUT_CODE, attempt=turn.attempt)
        except ModelUnavailable as exc:
            liveness.fail_turn(turn.id, f"The turn failed: {exc}", code=liveness.MODEL_CODE, attempt=turn.attempt)
        except NotRerunnable as exc:
            liveness.fail_turn(turn.id, str(exc), attempt=turn.attempt)
        except Exception as exc:  # the turn fails visibly, never silently
            log.exception("turn %s failed", turn_id)
            liveness.fail_turn(turn.id, f"The turn failed: {exc}", attempt=turn.attempt)


class TurnRun:
    """The state of one running turn; each method is one step of the path."""

    def __init__(self, turn: Turn, *, heartbeat: liveness.Heartbeat | None = None):
        self.turn = turn
        self.conversation = turn.conversation
        self.options = settings.TOOLHUB_STEWARD_OPTIONS
        self.heartbeat = heartbeat
        self.deadline = time.monotonic() + max(0.0, (turn.deadline_at - timezone.now()).total_seconds()) if (
            turn.deadline_at) else None  # fmt: skip
        self.shown: set[tuple[str, str]] = set()  # a taken-over turn's (type, phase) already stored: not again
        self.replay = ""  # a taken-over turn's answer text already streamed by the dead run

    def status(self, phase: str, message: str, **data) -> None:
        if self.options["enable_status_messages"] and (EventType.STATUS, phase) not in self.shown:
            emit(self.turn.id, EventType.STATUS, phase=phase, message=message, **data)

    def check_alive(self) -> None:
        """Before anything with an effect: this run still owns the turn, and the turn still has time."""
        if self.heartbeat is not None and self.heartbeat.lost.is_set():
            raise TurnLost(self.turn.id)
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise TurnOverdue(self.turn.id)

    def take_over(self) -> None:
        """What the dead run already showed is not shown again: the steward's statuses, routing, streamed text."""
        stored = TurnEvent.objects.filter(turn_id=self.turn.id)
        self.shown = set(stored.exclude(type=EventType.DELTA).values_list("type", "phase"))
        streamed = "".join(e.payload.get("content", "") for e in stored.filter(type=EventType.DELTA).only("payload"))
        saved = "".join(self.turn.messages.filter(role=Message.Role.ASSISTANT).values_list("content", flat=True))
        self.replay = streamed[len(saved) :] if streamed.startswith(saved) else ""
        budget = stored.filter(type=EventType.ROUTING, phase="budget").order_by("-sequence").first()
        if budget is not None:
            self.budget = budget.payload
        emit(self.turn.id, EventType.STATUS, phase="taken_over", message=TAKEN_OVER_TEXT, attempt=self.turn.attempt)

    def run(self, *, resuming: bool = False, takeover: bool = False) -> None:
        if takeover:
            self.take_over()
        messages = [as_message(m) for m in self.conversation.messages.order_by("id")]
        # A client's own system messages become part of our system prompt.
        self.instructions = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        history = [m for m in messages if m["role"] != "system"]
        user_index = max(i for i, m in enumerate(history) if m["role"] == "user")
        user_text = history[user_index]["content"]
        profile = model_profile(self.conversation)
        self.turn_model = get_provider()
        Turn.objects.filter(pk=self.turn.id).update(model=self.turn_model.label)
        # One view of the catalog for the whole turn: the steward ranks and the bundle decides on the same.
        self.context = StewardContext.current(owner_id=self.conversation.owner_id)
        self.entries = self.context.entries
        self.entry_of = {entry.name: entry for entry in self.entries}
        self.workflow = flows.active_workflow(self.conversation)
        recorded = RoutingLog.objects.filter(turn=self.turn).first() if takeover else None
        if resuming or recorded is not None:
            self.routing = recorded or RoutingLog.objects.get(turn=self.turn)
            self.analysis = self.recorded_analysis(user_text)
            bundle = self.build(self.routing.exposed)
            if resuming:
                self.status("resumed", "▶ Resuming after the approval decision")
        else:
            self.analysis = self.consult_steward(user_text)
            self.start_flow_if_asked()
            bundle = self.build(self.analysis.recommended_tools)
            self.routing = record_analysis(
                self.analysis, query=user_text, turn=self.turn, bundle=bundle, two_stage=self.two_stage
            )
            self.announce(bundle)
        analysis = self.analysis
        self.called = list(self.routing.called)
        knowledge = select_snippets(analysis.decision, text=user_text,
                                    budget_tokens=profile.reserved_result_tokens // 2)  # fmt: skip
        if knowledge and not resuming and (EventType.ROUTING, "knowledge") not in self.shown:
            used = [{"key": k["key"], "version": k["version"], "stale": k["stale"]} for k in knowledge]
            RoutingLog.objects.filter(pk=self.routing.pk).update(knowledge=used)
            stale = [k["title"] for k in knowledge if k["stale"]]
            emit(self.turn.id, EventType.ROUTING, phase="knowledge", snippets=used, stale=stale)
        history[user_index] = {**history[user_index], "content": prompt.enrich(
            user_text, recommended=analysis.recommended_tools, context=analysis.context)}  # fmt: skip
        hints = TurnHints(user_text, analysis.recommended_tools, tuple(knowledge), analysis.context)
        self.profile = profile
        if resuming:
            self.settle_decided_calls(history, bundle)
        elif takeover and self.settle_interrupted_calls(history, bundle):
            return  # an interrupted call waits for an approval now
        if takeover and history[-1]["role"] == "assistant" and not history[-1].get("tool_calls"):
            answer = history[-1]["content"]  # the dead run had the whole answer stored: only `done` was missing
        else:
            answer = self.model_loop(history, bundle, knowledge, hints)
        if answer is None:
            return  # paused on an approval; a new task resumes the turn
        started = Turn.objects.values_list("started_at", flat=True).get(pk=self.turn.id)
        duration = int((timezone.now() - started).total_seconds() * 1000)
        record_outcome(self.routing, called=self.called, turn_ms=duration)
        finished = Turn.objects.filter(pk=self.turn.id, attempt=self.turn.attempt, status=Turn.Status.RUNNING).update(
            status=Turn.Status.DONE, finished_at=timezone.now())  # fmt: skip
        if not finished:
            raise TurnLost(self.turn.id)  # failed at its deadline meanwhile, or taken over: that one says so
        emit(self.turn.id, EventType.DONE, phase="done", status=Turn.Status.DONE, content=answer, turn_ms=duration)
        learning.learn_from_turn(self.turn.id)  # a good turn teaches its request; never raises

    def build(self, recommended):
        """The bundle for the decision at the workflow's current phase (and its staged choices)."""
        self.workflow_changed = False
        decision = self.analysis.decision
        phase = self.workflow.phase if self.workflow and self.workflow.status == Workflow.Status.ACTIVE else ""
        if decision.phase != phase:
            decision = dataclasses.replace(decision, phase=phase, side_query=decision.side_query and bool(phase))
            self.analysis = dataclasses.replace(self.analysis, decision=decision)
        choices = self.workflow.state.get("choices", {}) if phase else None
        return build_bundle(decision, self.entries, recommended=recommended, choices=choices)

    def start_flow_if_asked(self) -> None:
        """A confident create whose recommended tools a staged flow stands in for starts that flow."""
        if self.workflow is not None:
            return
        flow = flows.flow_to_start(self.analysis.decision, self.analysis.recommended_tools)
        if flow is None:
            return
        self.workflow = flows.start_flow(self.conversation, flow)
        self.status("workflow", f"📝 Started {flow.kind} at step {self.workflow.phase}", workflow_id=self.workflow.pk,
                    kind=flow.kind, workflow_phase=self.workflow.phase, version=self.workflow.version)  # fmt: skip

    def announce(self, bundle) -> None:
        if (EventType.ROUTING, "routing") in self.shown:
            return
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
        return result

    @property
    def state(self) -> ConversationState:
        return conversation_state(self.workflow)

    def fit(self, system: str, tools: list[dict], history: list[dict], profile) -> list[dict]:
        system_tokens, tool_tokens = prompt.prompt_tokens(system, tools)
        available = memory.budget(profile, system_tokens=system_tokens, tool_tokens=tool_tokens)
        fitted = memory.evict_whole_turns(history, budget=available)
        if fitted.evicted_turns:
            self.status("memory", f"Older messages left out to fit {profile.name}: {fitted.evicted_turns} turn(s)")
        return [{"role": "system", "content": system}, *fitted.messages]

    def record_budget(self, system: str, tools: list[dict], knowledge: list[dict], messages: list[dict]) -> None:
        """The step's token budget as a routing event (phase budget), only when it differs from the last one."""
        system_tokens, tool_tokens = prompt.prompt_tokens(system, tools)
        figures = token_budget(self.profile, system_tokens=system_tokens, tool_tokens=tool_tokens,
                               knowledge=knowledge, memory_tokens=memory.conversation_tokens(messages))  # fmt: skip
        if figures != getattr(self, "budget", None):
            self.budget = figures
            emit(self.turn.id, EventType.ROUTING, phase="budget", **figures)

    def model_loop(self, history, bundle, knowledge, hints) -> str | None:
        """Steps until the model answers (the answer), pauses on an approval (None) or hits the limit."""
        provider = self.turn_model
        transcript = list(history)
        for _step in range(settings.TOOLHUB_MAX_STEPS):
            self.check_alive()
            system = prompt.system_prompt(bundle, knowledge, self.instructions)
            tools = prompt.tool_definitions(bundle)
            messages = self.fit(system, tools, transcript, self.profile)
            self.record_budget(system, tools, knowledge, messages)
            content, calls = "", ()
            for chunk in provider.stream(messages, tools, hints=hints, deadline=self.model_deadline()):
                if chunk.content:
                    content += chunk.content
                    self.stream(content, chunk.content)
                if chunk.tool_calls:
                    calls = chunk.tool_calls
            if len(content) < len(self.replay):
                raise NotRerunnable(REPLAY_DIVERGED_TEXT)
            self.replay = ""
            self.check_alive()
            if not calls:
                self.save_message(Message.Role.ASSISTANT, content)
                return content
            tool_calls = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
            ]
            transcript.append({"role": "assistant", "content": content or None, "tool_calls": tool_calls})
            asked = self.save_message(Message.Role.ASSISTANT, content, tool_calls=tool_calls)
            found, waiting = [], False
            for call in calls:
                if self.needs_approval(call, bundle):
                    waiting = True
                    continue
                outcome = self.call_tool(call, bundle, key=call_key(self.turn.id, asked.pk, call.id))
                found += outcome.found
                transcript.append({"role": "tool", "tool_call_id": call.id, "content": outcome.content})
                self.save_message(Message.Role.TOOL, outcome.content, tool_call_id=call.id, result=outcome.result)
            if found or self.workflow_changed:
                bundle = self.build([*bundle.loaded_names, *found])
                RoutingLog.objects.filter(pk=self.routing.pk).update(exposed=list(bundle.loaded_names))
            if waiting:
                self.pause()
                return None
        message = f"I stopped after {settings.TOOLHUB_MAX_STEPS} steps without a final answer."
        emit(self.turn.id, EventType.DELTA, phase="content", content=message)
        self.save_message(Message.Role.ASSISTANT, message)
        return message

    def model_deadline(self) -> float:
        """One model call's deadline (time.monotonic()): TOOLHUB_MODEL_TIMEOUT, never past the turn's own."""
        deadline = time.monotonic() + settings.TOOLHUB_MODEL_TIMEOUT
        return deadline if self.deadline is None else min(deadline, self.deadline)

    def stream(self, content: str, piece: str) -> None:
        """Emit a piece of the answer; after a takeover, only what goes beyond the text the dead run streamed."""
        if self.replay:
            if not (content.startswith(self.replay) or self.replay.startswith(content)):
                raise NotRerunnable(REPLAY_DIVERGED_TEXT)
            piece = content[max(len(content) - len(piece), len(self.replay)) :]
            if not piece:
                return
        emit(self.turn.id, EventType.DELTA, phase="content", content=piece)

    def settle_interrupted_calls(self, history: list[dict], bundle) -> bool:
        """A taken-over turn's calls that the dead run asked for and never answered; True when it now waits.

        A call that never started runs now. One that started (its tool_call event is stored) may have run:
        a read runs again, and so does a write whose tool takes toolhub's idempotency key (the same key); any
        other write stops the turn (NotRerunnable) rather than run twice.
        """
        asked = self.turn.messages.filter(role=Message.Role.ASSISTANT).exclude(tool_calls=[]).order_by("-id").first()
        if asked is None or not history or history[-1]["role"] == "assistant" and not history[-1].get("tool_calls"):
            return False
        at = max(i for i, m in enumerate(history) if m["role"] == "assistant" and m.get("tool_calls"))
        answered = {m.get("tool_call_id") for m in history[at + 1 :] if m["role"] == "tool"}
        started = set(TurnEvent.objects.filter(turn_id=self.turn.id, type=EventType.TOOL_CALL).values_list(
            "payload__call_key", flat=True))  # fmt: skip
        decisions = {a.tool_call_id: a for a in ToolApproval.objects.filter(turn=self.turn)}
        waiting = False
        for raw in history[at]["tool_calls"]:
            if raw["id"] in answered:
                continue
            call = ToolCall(raw["id"], raw["function"]["name"], raw["function"]["arguments"])
            key = call_key(self.turn.id, asked.pk, call.id)
            if key in started and not self.safe_to_rerun(call.name):
                raise NotRerunnable(NOT_RERUN_TEXT.format(tool=call.name))
            approval = decisions.get(call.id)
            if approval is None and self.needs_approval(call, bundle):
                waiting = True
                continue
            if approval is not None and approval.status != ToolApproval.Status.APPROVED:
                content = json.dumps({"error": f"{call.name} did not run: the call was not approved."})
            else:
                content = self.call_tool(call, bundle, approved=approval is not None, key=key).content
            history.append({"role": "tool", "tool_call_id": call.id, "content": content})
            self.save_message(Message.Role.TOOL, content, tool_call_id=call.id)
        if waiting:
            self.pause()
        return waiting

    def safe_to_rerun(self, tool_name: str) -> bool:
        """A read, or a write that takes an idempotency key: running it again cannot do anything twice."""
        entry = self.entry_of.get(tool_name)
        if entry is None or entry.policy is None:
            return False
        properties = (entry.input_schema or {}).get("properties", {})
        return entry.policy.operation in READ_ONLY_OPERATIONS or settings.TOOLHUB_IDEMPOTENCY_ARGUMENT in properties

    def needs_approval(self, call, bundle) -> bool:
        """A held tool whose policy requires confirmation: ask, and let the turn wait."""
        tool = next((t for t in bundle.loaded if t.name == call.name), None)
        if tool is None or not tool.requires_confirmation:
            return False
        arguments = _arguments(call)
        approval = approvals.request_approval(
            turn_id=self.turn.id,
            tool_call_id=call.id,
            tool_name=call.name,
            arguments=arguments if isinstance(arguments, dict) else {},
            risk=tool.risk,
        )
        self.status("approval_required", f"⏸ {call.name} needs approval before it runs", tool_name=call.name,
                    arguments=arguments, approval_id=approval.pk, risk=tool.risk)  # fmt: skip
        return True

    def pause(self) -> None:
        """Wait for the approval: the deadline becomes the approval's timeout plus a whole run after it."""
        RoutingLog.objects.filter(pk=self.routing.pk).update(called=self.called)
        Turn.objects.filter(pk=self.turn.id, attempt=self.turn.attempt).update(
            status=Turn.Status.WAITING,
            deadline_at=liveness.turn_deadline(extra_seconds=settings.TOOLHUB_APPROVAL_TIMEOUT),
        )

    def settle_decided_calls(self, history: list[dict], bundle) -> None:
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
                asked = self.turn.messages.filter(role=Message.Role.ASSISTANT).exclude(tool_calls=[]).order_by("-id")[0]
                outcome = self.call_tool(call, bundle, approved=True, key=call_key(self.turn.id, asked.pk, call.id))
            else:
                why = "was denied by an operator" if approval and approval.status == "denied" else (
                    "was not approved in time, so it was denied")  # fmt: skip
                outcome = CallOutcome(content=json.dumps({"error": f"{call.name} did not run: the call {why}."}))
            history.append({"role": "tool", "tool_call_id": call.id, "content": outcome.content})
            self.save_message(Message.Role.TOOL, outcome.content, tool_call_id=call.id, result=outcome.result)

    def announces(self, tool_name: str) -> bool:
        """Whether running this tool shows as a status (phase tool_execution): only TOOLHUB_STATUS_TOOLS do.

        TOOLHUB_SHOW_WEB_SEARCH_STATUS=0 silences web_search's own status.
        """
        if tool_name not in settings.TOOLHUB_STATUS_TOOLS:
            return False
        return tool_name != settings.TOOLHUB_WEB_SEARCH_TOOL or self.options["show_web_search_status"]

    def call_tool(self, call, bundle, *, approved: bool = False, key: str = ""):
        """Run one call. Its tool_call event (with `key`) is stored before it runs: a takeover knows it started."""
        self.check_alive()
        announced = self.announces(call.name)

        def tool_emit(phase: str, message: str, **data):
            if phase == TOOL_EXECUTION_PHASE and not announced:
                return  # the tool's own announcement (web_search's query); its other statuses (errors) still show
            self.status(phase, message, **data)

        # web_search announces itself, with its query; a silent turn (time/date injected) names no tool.
        if announced and not self.analysis.silent and call.name != settings.TOOLHUB_WEB_SEARCH_TOOL:
            self.status(TOOL_EXECUTION_PHASE, f"🔧 Using {call.name}", tool_name=call.name, arguments=_arguments(call))
        emit(self.turn.id, EventType.TOOL_CALL, phase="tool", tool_name=call.name, arguments=_arguments(call),
             call_key=key)  # fmt: skip

        def run_call() -> CallOutcome:
            return execute(
                call,
                bundle,
                emit=tool_emit,
                max_result_tokens=self.profile.reserved_result_tokens,
                approved=approved,
                owner_id=self.conversation.owner_id,
                idempotency_key=key,
            )

        step = flows.step_of(self.entry_of.get(call.name), self.workflow) if bundle.holds(call.name) else None
        outcome = self.run_step(step, call, run_call) if step else run_call()
        if not outcome.refused:
            self.called.append(call.name)
        # Images, audio and resources go to the console whole; the model read a line about each.
        blocks = {"blocks": non_text(outcome.result["content"])} if outcome.result else {}
        emit(self.turn.id, EventType.TOOL_RESULT, phase="tool", tool_name=call.name, is_error=outcome.is_error,
             refused=outcome.refused, content=outcome.content[:2000], **blocks)  # fmt: skip
        return outcome

    def run_step(self, step: flows.Step, call, run_call) -> CallOutcome:
        """The current phase's step tool: record a type choice, or run it and move the workflow on."""
        workflow = self.workflow
        arguments = _arguments(call)
        try:
            choices = flows.type_choices(self.entry_of[call.name], arguments, workflow) if isinstance(
                arguments, dict) else {}  # fmt: skip
            if choices:
                self.workflow = flows.record_choices(workflow, choices)
                self.workflow_changed = True
                chosen = ", ".join(f"{name}: {kind}" for name, kind in choices.items())
                self.status("workflow", f"📝 Chose {chosen}", workflow_id=workflow.pk, choices=choices,
                            version=self.workflow.version)  # fmt: skip
                return CallOutcome(content=json.dumps({"chosen": choices, "next": (
                    f"Call {call.name} again with the fields of the chosen type; ask the user for any you do "
                    "not have, never invent them.")}))  # fmt: skip
            if step.submits:
                try:
                    result = flows.submit(step, workflow, run_call)
                except flows.StepFailed as failed:
                    return failed.outcome
                self.workflow = None
                self.workflow_changed = True
                self.status("workflow", f"✅ {workflow.kind} submitted", workflow_id=workflow.pk)
                return CallOutcome(content=result["content"])
            outcome = run_call()
            if outcome.is_error:
                return outcome
            self.workflow = flows.advance_after(step, workflow, outcome.content)
            self.workflow_changed = True
            self.status("workflow", f"📝 {workflow.kind}: next step {self.workflow.phase}", workflow_id=workflow.pk,
                        workflow_phase=self.workflow.phase, version=self.workflow.version)  # fmt: skip
            return outcome
        except WorkflowError as exc:
            # Another request changed (or closed) the workflow first: nothing is overwritten; the user retries.
            self.workflow = flows.active_workflow(self.conversation)
            self.workflow_changed = True
            self.status("workflow_conflict", f"⚠️ {exc} Please send your last message again.",
                        workflow_id=workflow.pk)  # fmt: skip
            return CallOutcome(content=json.dumps({"error": f"{exc} Ask the user to retry."}), is_error=True)

    def save_message(self, role: str, content: str, **fields) -> Message:
        data = {"role": role, "content": content or "", **fields}
        tokens = memory.message_tokens({**data, "content": content})
        return Message.objects.create(conversation=self.conversation, turn=self.turn, tokens=tokens, **data)


def call_key(turn_id: int, message_id: int, call_id: str) -> str:
    """The idempotency key of one tool call: the same in every run of the turn (call ids repeat across steps)."""
    return f"toolhub-turn-{turn_id}-{message_id}-{call_id}"


def _arguments(call) -> dict | str:
    try:
        return json.loads(call.arguments or "{}")
    except ValueError:
        return call.arguments
