"""One tool's activity over a period: its calls, their errors and latency, and the most recent calls.

Read from the turns' stored events alone, as the timeline is (agents/console/timeline.py): the runtime stores a
tool_call event when it starts a call and a tool_result event when the call returns (agents/turns/runtime.py
call_tool), so a call lasts from the one to the other. A call is in the period when its tool_call event is.
A client tool's call is handed to the API client and has no result here; a call still running, or one whose
turn ended first (failed, cancelled), has none either. A call an operator denied never started and has no
tool_call event. Reads only, in two queries: the period's events of the tool (small columns, through the
tool index), then the arguments of the recent calls shown.
"""

import datetime
from dataclasses import dataclass

from django.db.models import F

from agents.models import TurnEvent

from .fragments import arguments_text
from .metrics import percentile
from .turn_search import turn_link

RECENT_CALLS = 25
ARGUMENTS_CHARS = 200


class Outcome:
    OK = "ok"
    ERROR = "error"  # the tool failed or refused (schema, policy, an unloaded tool), as the model was told
    CLIENT = "client"  # handed to the API client: run there, not by toolhub
    NO_RESULT = "no result"  # still running, or its turn ended before it returned


@dataclass
class ToolCallRow:
    event_id: int
    turn_id: int
    conversation_id: int
    sequence: int
    started_at: datetime.datetime
    outcome: str = Outcome.NO_RESULT
    ms: int | None = None
    arguments: str = ""

    @property
    def link(self) -> str:
        return turn_link(conversation_id=self.conversation_id, turn_id=self.turn_id)


def tool_event_rows(name: str, *, since: datetime.datetime):
    """The tool's calls and results stored since `since`, by turn and in order, as the small values pairing
    needs (never the arguments nor the result's content): read through the index turn_event_tool_calls."""
    columns = ("pk", "turn_id", "conversation_id", "sequence", "type", "created_at",
               "payload__is_error", "payload__refused", "payload__client")  # fmt: skip
    return (
        TurnEvent.tool_events(name)
        .filter(created_at__gte=since)
        .annotate(conversation_id=F("turn__conversation_id"))
        .order_by("turn_id", "sequence")
        .values_list(*columns)
    )


def _calls(name: str, *, since: datetime.datetime, until: datetime.datetime) -> list[ToolCallRow]:
    """The tool's calls started in [since, until), oldest first, each paired with its result (the turn's next
    result of that tool: a turn runs its calls one after the other)."""
    events = tool_event_rows(name, since=since)
    calls: list[ToolCallRow] = []
    open_calls: dict[int, list[ToolCallRow]] = {}
    for pk, turn_id, conversation_id, sequence, kind, at, is_error, refused, client in events:
        if kind == TurnEvent.Type.TOOL_CALL:
            if at >= until:
                continue
            call = ToolCallRow(event_id=pk, turn_id=turn_id, conversation_id=conversation_id, sequence=sequence,
                               started_at=at)  # fmt: skip
            calls.append(call)
            if client:
                call.outcome = Outcome.CLIENT
            else:
                open_calls.setdefault(turn_id, []).append(call)
        elif open_calls.get(turn_id):
            call = open_calls[turn_id].pop(0)
            call.outcome = Outcome.ERROR if (is_error or refused) else Outcome.OK
            call.ms = max(round((at - call.started_at).total_seconds() * 1000), 0)
    return sorted(calls, key=lambda call: (call.started_at, call.event_id))


def _arguments_text(arguments) -> str:
    text = arguments_text(arguments if arguments is not None else {})
    return text if len(text) <= ARGUMENTS_CHARS else text[:ARGUMENTS_CHARS] + "…"


def tool_activity(name: str, *, since: datetime.datetime, until: datetime.datetime, recent: int = RECENT_CALLS) -> dict:
    """{"calls", "errors", "error_rate", "no_result", "client", "p50_ms", "p95_ms", "recent": [ToolCallRow]}:
    the tool's calls started in [since, until); latencies over the calls that returned; `recent` newest first."""
    calls = _calls(name, since=since, until=until)
    latencies = [call.ms for call in calls if call.ms is not None]
    errors = sum(call.outcome == Outcome.ERROR for call in calls)
    returned = len(latencies)
    shown = calls[::-1][:recent]
    arguments = dict(
        TurnEvent.objects.filter(pk__in=[call.event_id for call in shown]).values_list("pk", "payload__arguments")
    )
    for call in shown:
        call.arguments = _arguments_text(arguments.get(call.event_id))
    return {
        "calls": len(calls),
        "returned": returned,
        "errors": errors,
        "error_rate": errors / returned if returned else None,
        "no_result": sum(call.outcome == Outcome.NO_RESULT for call in calls),
        "client": sum(call.outcome == Outcome.CLIENT for call in calls),
        "p50_ms": percentile(latencies, 0.50),
        "p95_ms": percentile(latencies, 0.95),
        "recent": shown,
    }
