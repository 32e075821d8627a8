"""A turn's timeline: each step of the request path as a waterfall, read from the turn's stored events alone.

Every event is stored with its time (TurnEvent.created_at), so a step lasts from the event that starts it to
the event that ends it: the steward from its first status to its decision, the bundle to the routing event,
knowledge to its event, a model call from the event before its first streamed piece to its last piece (or to
the tool call it asks for), a tool call to its result, an approval from its request to its decision (or to the
turn's cancel, which is a step of its own), the record step to `done`. A tool call right after another's result
(or an approval's decision) counts in the same model call: the events do not say whether the model was asked again
in between. The same events give the same
timeline, live or afterwards. Pure: reads no database.
"""

import datetime

from agents.models import TurnEvent
from agents.turns.cancellation import CANCELLED_PHASE
from catalog.models.tokens import count_tokens

EventType = TurnEvent.Type
BUDGET_PARTS = ("system", "tools", "knowledge", "memory")  # what a model call is sent (the budget event's figures)


def _time(event: dict) -> datetime.datetime:
    created = event["created_at"]
    return created if isinstance(created, datetime.datetime) else datetime.datetime.fromisoformat(created)


def _ms(start: datetime.datetime, end: datetime.datetime) -> int:
    return max(round((end - start).total_seconds() * 1000), 0)


def turn_timeline(events: list[dict]) -> dict | None:
    """{"total_ms", "steps": [{"kind", "label", "start_ms", "ms", "tokens", "offset", "width"}]} (offset and width
    in percent of the whole turn, for the bars), or None before the first event."""
    if not events:
        return None
    first = _time(events[0])
    steps: list[dict] = []
    previous = first  # when the last step ended: where the next one starts
    model: dict | None = None  # the model call streaming now
    tool: dict | None = None
    approval: dict | None = None
    prompt_tokens = 0
    model_calls = 0

    def add(kind: str, label: str, start: datetime.datetime, end: datetime.datetime, tokens: str = "") -> None:
        steps.append({"kind": kind, "label": label, "start": start, "end": end, "tokens": tokens})

    def close_model(end: datetime.datetime) -> None:
        nonlocal model
        if model is not None:
            tokens = f"{prompt_tokens} in · {count_tokens(model['content'])} out"
            add("model", f"Model call {model['number']}", model["start"], end, tokens)
            model = None

    after_tool_or_decision = False  # the last event ended a tool call or an approval: a call now is no new model step
    for event in events:
        at, kind, phase = _time(event), event["type"], event.get("phase", "")
        payload = event.get("payload", {})
        calls_tool = kind == EventType.TOOL_CALL or (kind == EventType.STATUS and phase == "tool_execution")
        asks = calls_tool or kind == EventType.APPROVAL_REQUIRED  # the model asked for a call
        if model is None and tool is None and (kind == EventType.DELTA or (asks and not after_tool_or_decision)):
            model_calls += 1
            model = {"number": model_calls, "start": previous, "content": "", "end": at}
        if kind == EventType.DELTA:
            model["content"] += payload.get("content", "")
            model["end"] = at
            continue
        if kind == EventType.ROUTING and phase == "budget":
            prompt_tokens = sum(payload.get(part, 0) for part in BUDGET_PARTS)
            previous = at  # the model call is prepared: it starts here
            continue
        after_tool_or_decision = False
        if calls_tool:
            close_model(at)
            tool = tool or {"start": at}
        elif kind == EventType.STATUS and phase in ("analysis_complete", "fallback"):
            # Wall time from the steward's first status to its decision, event writes included; the routing log's
            # steward_ms (the decision's "routing computed in") is the steward's own computation within it.
            add("steward", "Steward, wall clock" + (" (fallback)" if phase == "fallback" else ""), previous, at)
        elif kind == EventType.ROUTING and phase == "routing":
            add("bundle", "Bundle", previous, at, f"{payload.get('loaded_schema_tokens', 0)} schema")
        elif kind == EventType.ROUTING and phase == "knowledge":
            add("knowledge", "Knowledge", previous, at, f"{len(payload.get('snippets', []))} snippets")
        elif kind == EventType.STATUS and phase == "memory":
            add("eviction", payload.get("message", "Eviction"), previous, at)
        elif kind == EventType.TOOL_RESULT:
            add("tool", f"Tool {payload.get('tool_name', '?')}", tool["start"] if tool else previous, at,
                f"{count_tokens(payload.get('content', ''))} result")  # fmt: skip
            tool, after_tool_or_decision = None, True
        elif kind == EventType.APPROVAL_REQUIRED:
            close_model(at)
            approval = {"start": at, "name": payload.get("tool_name", "?")}
        elif kind == EventType.STATUS and phase in ("approval_decided", "resumed"):
            if approval is not None:
                decision = payload.get("decision", "")
                outcome = f" ({decision})" if decision and decision != "approved" else ""
                add("approval", f"Approval of {approval['name']}{outcome}", approval["start"], at)
                approval = None
            after_tool_or_decision = True
        elif kind == EventType.ERROR and phase == CANCELLED_PHASE:
            close_model(model["end"] if model else at)
            if approval is not None:  # a cancel that closed no approval event still ends the wait
                add("approval", f"Approval of {approval['name']} (cancelled)", approval["start"], at)
                approval = None
            add("cancel", payload.get("message", "Cancelled"), at, at)
        elif kind in (EventType.ERROR, EventType.DONE):
            close_model(model["end"] if model else at)
            if kind == EventType.DONE:
                add("record", "Record", max([previous] + [step["end"] for step in steps]), at)
        previous = at
    if model is not None:  # still streaming: the call so far
        close_model(model["end"])
    end = max([_time(events[-1])] + [step["end"] for step in steps])
    total = _ms(first, end)
    for step in steps:
        step["start_ms"], step["ms"] = _ms(first, step["start"]), _ms(step["start"], step["end"])
        step["offset"] = round(100 * step["start_ms"] / total, 2) if total else 0.0
        step["width"] = max(round(100 * step["ms"] / total, 2), 0.5) if total else 0.5
        del step["start"], step["end"]
    return {"total_ms": total, "steps": steps}
