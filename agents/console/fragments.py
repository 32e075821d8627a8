"""What the live console shows: conversation rows, a conversation's thread, and the HTML fragment of each turn event.

Reads and rendering only, shared by the console views and consumers (which
stay thin). A conversation's thread is built from stored events, so a
reload or a late joiner sees exactly what a live viewer saw. It never
writes to the database and never sends on the channel layer.
"""

import datetime
import json
import re

from django.db.models import Max
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import escape

from agents.models import Conversation, Message, RoutingLog, ServerQuestion, ToolApproval, Turn, TurnEvent
from agents.turns.events import stored_events
from agents.turns.questions import ASKED_PHASE as QUESTION_ASKED
from agents.turns.questions import CLOSED_PHASE as QUESTION_CLOSED
from agents.turns.questions import answer_text
from catalog.mcp_client.content import summary
from catalog.policies.four_eyes import covers as four_eyes_covers

from .question_form import QuestionForm
from .timeline import turn_timeline

EventType = TurnEvent.Type
LIST_LIMIT = 50
BUDGET_PHASE = "budget"
# Events that change what a conversation's row shows (deltas only extend its preview).
ROW_EVENT_TYPES = frozenset({EventType.STATUS, EventType.ROUTING, EventType.APPROVAL_REQUIRED, EventType.ERROR,
                             EventType.DONE})  # fmt: skip
CONVERSATION_TEMPLATE = "agents/conversation.html"
LIST_TEMPLATE = "agents/console.html"
# A conversation's page shows its newest turns whole; ended turns before them fold to their summary line.
TURNS_SHOWN_WHOLE = 3


# --- the list of conversations -------------------------------------------------------------------------------


def conversation_rows(*, ids: list[int] | None = None, limit: int = LIST_LIMIT) -> list[dict]:
    """Conversations with a turn, latest activity first: title, owner, latest turn's status, message and answer."""
    conversations = Conversation.objects.select_related("owner").annotate(latest=Max("turns__created_at"))
    conversations = conversations.filter(latest__isnull=False)
    if ids is not None:
        conversations = conversations.filter(pk__in=ids)
    conversations = list(conversations.order_by("-latest", "-pk")[:limit])
    turns = {}
    for turn in Turn.objects.filter(conversation__in=conversations).order_by("conversation_id", "-id"):
        turns.setdefault(turn.conversation_id, turn)
    latest_ids = [turn.id for turn in turns.values()]
    status_messages = {}
    statuses = TurnEvent.objects.filter(turn_id__in=latest_ids, type=EventType.STATUS)
    for event in statuses.order_by("turn_id", "-sequence"):
        status_messages.setdefault(event.turn_id, event.payload.get("message", ""))
    answers = {}
    replies = Message.objects.filter(turn_id__in=latest_ids, role=Message.Role.ASSISTANT).exclude(content="")
    for message in replies.order_by("turn_id", "-id"):
        answers.setdefault(message.turn_id, message.content)
    rows = []
    for conversation in conversations:
        turn = turns[conversation.pk]
        rows.append(
            {
                "id": conversation.pk,
                "title": conversation.title or f"conversation {conversation.pk}",
                "owner": conversation.owner.get_username(),
                "turn_id": turn.id,
                "status": turn.status,
                "message": status_messages.get(turn.id, ""),
                "preview": answers.get(turn.id, ""),
                "updated": conversation.latest,
            }
        )
    return rows


def conversation_of(turn_id: int) -> int | None:
    return Turn.objects.filter(pk=turn_id).values_list("conversation_id", flat=True).first()


def render_list(rows: list[dict]) -> str:
    return render_to_string(f"{LIST_TEMPLATE}#conversation-list", {"rows": rows})


def render_row_update(row: dict, *, listed: bool) -> str:
    """Replace the row in place when the page lists it, else insert it at the top."""
    return render_to_string(f"{LIST_TEMPLATE}#row-update", {"row": row, "listed": listed})


def render_preview_delta(conversation_id: int, content: str) -> str:
    return render_to_string(f"{LIST_TEMPLATE}#preview-delta", {"conversation_id": conversation_id, "content": content})


# --- one conversation's thread -------------------------------------------------------------------------------


def arguments_text(arguments) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


ENDED = Turn.ENDED


def status_after(event: dict) -> str | None:
    """The turn's status once this event happened, when the event changes it."""
    payload = event.get("payload", {})
    if event["type"] == EventType.DONE:
        return payload.get("status", Turn.Status.DONE)
    if event["type"] == EventType.APPROVAL_REQUIRED:
        return Turn.Status.WAITING
    if event["sequence"] == 1 or event.get("phase") in ("resumed", "approval_decided"):
        return Turn.Status.RUNNING
    return None


def deadline(expires_at) -> datetime.datetime | None:
    """An approval's deadline as stored in its event (ISO text) or on its row."""
    if isinstance(expires_at, str) and expires_at:
        try:
            return datetime.datetime.fromisoformat(expires_at)
        except ValueError:
            return None
    return expires_at if isinstance(expires_at, datetime.datetime) else None


def approval_card(approval: ToolApproval, *, note: str = "") -> dict:
    """What an approval's card shows (agents/conversation.html#approval), from its row."""
    return {"id": approval.pk, "tool_name": approval.tool_name, "risk": approval.risk,
            "arguments": arguments_text(approval.arguments), "status": approval.status, "note": note,
            "four_eyes": four_eyes_covers(approval.risk), "expires_at": approval.expires_at,
            "reason": approval.reason}  # fmt: skip


def question_card(*, question_id: int, message: str, schema: dict, status: str, expires_at: object = None,
                  answer: dict | None = None, answered_by: str = "", form: QuestionForm | None = None,
                  note: str = "") -> dict:  # fmt: skip
    """What a server's question shows (agents/conversation.html#question): its message, its deadline while it
    waits, and the form built from its schema (`form`: a bound one, to show its errors again)."""
    pending = status == ServerQuestion.Status.PENDING
    if pending and form is None:
        form = QuestionForm(schema if isinstance(schema, dict) else {}, auto_id=f"question-{question_id}-%s")
    return {"id": question_id, "message": message, "status": status, "expires_at": deadline(expires_at),
            "answer": answer_text(answer) if status == ServerQuestion.Status.ANSWERED else "",
            "answered_by": answered_by, "form": form if pending else None, "note": note}  # fmt: skip


def question_card_of(question: ServerQuestion, *, form: QuestionForm | None = None, note: str = "") -> dict:
    """A question's card from its row (answered_by selected)."""
    return question_card(question_id=question.pk, message=question.message, schema=question.requested_schema,
                         status=question.status, expires_at=question.expires_at, answer=question.answer,
                         answered_by=question.answered_by.get_username() if question.answered_by else "", form=form,
                         note=note)  # fmt: skip


def tool_link(name: str) -> dict:
    """A catalog tool's name with the links to its policy and its activity (none for a name no URL takes)."""
    try:
        return {"name": name, "policy": reverse("policy-detail", args=[name]),
                "activity": reverse("tool-activity", args=[name])}  # fmt: skip
    except NoReverseMatch:
        return {"name": name, "policy": "", "activity": ""}


def event_item(event: dict, *, approval_status: str | None = None, approval_reason: str = "",
               call_arguments: object = None, question: dict | None = None) -> dict | None:  # fmt: skip
    """One line of a turn's timeline, or None for events shown elsewhere (content, budget). `call_arguments`: the
    arguments of the call a tool result answers, for results stored before their event carried them. `question`:
    how a server's question asked by this event ended (status, answer, answered_by), as its row says; pending
    without it."""
    kind, payload, phase = event["type"], event.get("payload", {}), event.get("phase", "")
    item = {"sequence": event["sequence"], "kind": kind, "phase": phase, "turn_id": event["turn"]}
    if kind == EventType.DELTA or (kind == EventType.ROUTING and phase == BUDGET_PHASE):
        return None
    if kind == EventType.STATUS and phase == QUESTION_ASKED and payload.get("question_id"):
        item["question"] = question_card(question_id=payload["question_id"], message=payload.get("question", ""),
                                         schema=payload.get("schema") or {}, expires_at=payload.get("expires_at"),
                                         **(question or {"status": ServerQuestion.Status.PENDING}))  # fmt: skip
    elif kind == EventType.STATUS:
        item["text"] = payload.get("message", phase)
        item["tools"] = [tool_link(name) for name in payload.get("recommended_tools") or []]
    elif kind == EventType.ROUTING and phase == "knowledge":
        keys = [f"{s['key']} v{s['version']}" for s in payload.get("snippets", [])]
        item["text"] = "Knowledge: " + (", ".join(keys) or "none")
        item["stale"] = payload.get("stale", [])
    elif kind == EventType.ROUTING:
        item["text"] = (
            f"Bundle: {len(payload.get('loaded', []))} loaded, {payload.get('deferred', 0)} deferred, "
            f"{payload.get('denied', 0)} denied · {payload.get('loaded_schema_tokens', 0)} of "
            f"{payload.get('catalog_schema_tokens', 0)} schema tokens"
        )
        if payload.get("client_tools"):
            item["text"] += (f" · {len(payload['client_tools'])} client tools ({payload.get('client_schema_tokens', 0)}"
                             " schema tokens), run by the API client")  # fmt: skip
        item["tools"] = [tool_link(name) for name in payload.get("loaded", [])]
        item["client_tools"] = payload.get("client_tools", [])
    elif kind == EventType.TOOL_CALL:
        name, arguments = payload.get("tool_name", "?"), arguments_text(payload.get("arguments", {}))
        item["text"] = f"→ {name}({arguments})"
        item["call"] = {"arrow": "→", "tool": {"name": name} if payload.get("client") else tool_link(name),
                        "arguments": arguments}  # fmt: skip
        if payload.get("client"):
            item["text"] += " · client tool: handed to the API client, not run by toolhub"
            item["call"]["note"] = "client tool: handed to the API client, not run by toolhub"
    elif kind == EventType.TOOL_RESULT:
        name = payload.get("tool_name", "?")
        arguments = payload.get("arguments", call_arguments)
        item["text"] = f"← {name}"
        # The result beside the call it answers: the tool, its arguments and what it returned on one line.
        item["call"] = {"arrow": "←", "tool": tool_link(name),
                        "arguments": arguments_text(arguments) if arguments is not None else None}  # fmt: skip
        item["result"] = payload.get("content", "")[:600]
        item["is_error"] = payload.get("is_error") or payload.get("refused")
        item["blocks"] = [shown for block in payload.get("blocks", []) if (shown := shown_block(block))]
    elif kind == EventType.APPROVAL_REQUIRED:
        item["approval"] = {
            "id": payload.get("approval_id"),
            "tool_name": payload.get("tool_name", "?"),
            "arguments": arguments_text(payload.get("arguments", {})),
            "risk": payload.get("risk", ""),
            "status": approval_status or ToolApproval.Status.PENDING,
            # whoever started the turn may only deny it (agents.turns.approvals.needs_another_approver)
            "four_eyes": four_eyes_covers(payload.get("risk", "")),
            "expires_at": deadline(payload.get("expires_at")),
            "reason": approval_reason,
        }
    elif kind == EventType.ERROR:
        item["text"] = payload.get("message", "The turn failed.")
    elif kind == EventType.DONE:
        took = payload.get("turn_ms")
        item["text"] = f"Finished: {payload.get('status', 'done')}" + (f" in {took} ms" if took is not None else "")
    return item


def announcement(event: dict) -> str:
    """What the page's live region tells a screen reader of this event: an approval asked for, a failure, the end of
    an answer ("" for the rest, which a reader finds on the page)."""
    kind, payload = event["type"], event.get("payload", {})
    if kind == EventType.APPROVAL_REQUIRED:
        return f"Approval needed: {payload.get('tool_name', '?')}, {payload.get('risk', '')} risk."
    if kind == EventType.STATUS and event.get("phase") == QUESTION_ASKED:
        return "An MCP server asks the operator a question."
    if kind == EventType.ERROR:
        return f"The turn failed: {payload.get('message', 'no reason given')}"
    if kind == EventType.DONE:
        status = payload.get("status", Turn.Status.DONE)
        if status == Turn.Status.DONE:
            return "The answer is complete."
        if status == Turn.Status.CANCELLED:
            return "The turn was cancelled."
    return ""


_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")
_MIME = re.compile(r"^[\w.+-]+/[\w.+-]+$")


def shown_block(block: dict) -> dict | None:
    """A non-text content block of a tool result as the console shows it, whole: an image or audio it plays
    (only from base64 data of an image/ or audio/ type), a resource link or an embedded resource."""
    kind = block.get("type")
    if kind in ("image", "audio"):
        mime, data = str(block.get("mimeType", "")), str(block.get("data", ""))
        if mime.startswith(f"{kind}/") and _MIME.match(mime) and _BASE64.match(data):
            return {"kind": kind, "src": f"data:{mime};base64,{data}", "mime": mime, "size": summary(block)}
        return {"kind": "unshown", "text": summary(block)}
    if kind == "resource_link":
        return {"kind": kind, "uri": block.get("uri", ""), "name": block.get("name", ""),
                "mime": block.get("mimeType", ""), "description": block.get("description", "")}  # fmt: skip
    if kind == "resource":
        resource = block.get("resource") or {}
        shown = {"kind": kind, "uri": resource.get("uri", ""), "mime": resource.get("mimeType", "")}
        if isinstance(resource.get("text"), str):
            return shown | {"text": resource["text"]}
        blob = str(resource.get("blob", ""))
        if _BASE64.match(blob):  # offered as a download, never opened in the page
            return shown | {"download": f"data:application/octet-stream;base64,{blob}", "size": summary(block)}
    return {"kind": "unshown", "text": summary(block)}


def budget_bar(figures: dict | None) -> dict | None:
    """The budget event's figures with each part's share of the window and start on the bar, in percent."""
    if not figures:
        return None
    window = max(figures["window"], 1)
    parts, offset = [], 0.0
    for name in ("system", "tools", "knowledge", "memory", "reserve"):
        percent = round(100 * max(figures[name], 0) / window, 2)
        # offset: where the part starts on the bar (an SVG rect's x: the Content-Security-Policy allows no style="")
        parts.append({"name": name, "tokens": figures[name], "percent": percent, "offset": round(offset, 2)})
        offset += percent
    return {**figures, "parts": parts, "over": figures["free"] < 0}


def turn_view(turn: Turn, events: list[dict], *, user_text: str, routing: RoutingLog | None,
              approvals: dict[int, tuple[str, str]], number: int = 0,
              questions: dict[int, dict] | None = None) -> dict:  # fmt: skip
    """Everything the turn's article shows, from its stored events; `number`: its place in its conversation.

    The status is the one the events reached, as live viewers saw it: the
    runtime stores an event (approval_required) before it updates the turn
    row, and a page built in between must not show the older status. An
    ended row wins (a crash can end a turn without a done event).
    """
    items, content, budget = [], [], None
    status = turn.status
    calls: dict[str, list] = {}  # each tool's calls not yet answered, oldest first
    for event in events:
        if turn.status not in ENDED:
            status = status_after(event) or status
        payload = event.get("payload", {})
        if event["type"] == EventType.DELTA:
            content.append(payload.get("content", ""))
        elif event["type"] == EventType.ROUTING and event.get("phase") == BUDGET_PHASE:
            budget = payload
        elif event["type"] == EventType.TOOL_CALL:
            calls.setdefault(payload.get("tool_name", "?"), []).append(payload.get("arguments", {}))
        waiting = calls.get(payload.get("tool_name", "?")) if event["type"] == EventType.TOOL_RESULT else None
        status_and_reason = approvals.get(payload.get("approval_id"))
        item = event_item(event, approval_status=status_and_reason[0] if status_and_reason else None,
                          approval_reason=status_and_reason[1] if status_and_reason else "",
                          call_arguments=waiting.pop(0) if waiting else None,
                          question=(questions or {}).get(payload.get("question_id")))  # fmt: skip
        if item is not None:
            items.append(item)
    return {
        "id": turn.id,
        "number": number,
        "folded": False,
        "called": [item["call"]["tool"]["name"] for item in items if item["kind"] == EventType.TOOL_CALL],
        "status": status,
        "model": turn.model,
        "created_at": turn.created_at,
        "user_text": user_text,
        "routing": routing,
        "budget": budget_bar(budget),
        "timeline": turn_timeline(events),
        "items": items,
        "content": "".join(content),
        "last": events[-1]["sequence"] if events else 0,
    }


def turn_views(turns: list[Turn]) -> list[dict]:
    """Views of these turns in five queries whatever their number (events, user messages, logs, approvals, servers'
    questions)."""
    ids = [turn.id for turn in turns]
    events: dict[int, list[dict]] = {turn_id: [] for turn_id in ids}
    for event in TurnEvent.objects.filter(turn_id__in=ids).order_by("turn_id", "sequence"):
        events[event.turn_id].append(
            {
                "turn": event.turn_id,
                "sequence": event.sequence,
                "type": event.type,
                "phase": event.phase,
                "payload": event.payload,
                "created_at": event.created_at.isoformat(),
            }  # fmt: skip
        )
    texts = dict(
        Message.objects.filter(turn_id__in=ids, role=Message.Role.USER).order_by("id").values_list("turn_id", "content")
    )
    logs = {log.turn_id: log for log in RoutingLog.objects.filter(turn_id__in=ids)}
    approvals = {pk: (status, reason) for pk, status, reason in
                 ToolApproval.objects.filter(turn_id__in=ids).values_list("id", "status", "reason")}  # fmt: skip
    questions = {row["id"]: {"status": row["status"], "answer": row["answer"],
                             "answered_by": row["answered_by__username"] or ""}
                 for row in ServerQuestion.objects.filter(turn_id__in=ids).values(
                     "id", "status", "answer", "answered_by__username")}  # fmt: skip
    numbers = turn_numbers(turns)
    return [
        turn_view(
            turn,
            events[turn.id],
            user_text=texts.get(turn.id, ""),
            routing=logs.get(turn.id),
            approvals=approvals,
            number=numbers[turn.id],
            questions=questions,
        )  # fmt: skip
        for turn in turns
    ]


def turn_numbers(turns: list[Turn]) -> dict[int, int]:
    """Each turn's place in its conversation, counted from 1 (one query of the conversations' turn ids)."""
    wanted = {turn.id for turn in turns}
    counted: dict[int, int] = {}
    numbers = {}
    conversations = {turn.conversation_id for turn in turns}
    rows = Turn.objects.filter(conversation_id__in=conversations, id__lte=max(wanted, default=0))
    for turn_id, conversation_id in rows.order_by("id").values_list("id", "conversation_id"):
        counted[conversation_id] = counted.get(conversation_id, 0) + 1
        if turn_id in wanted:
            numbers[turn_id] = counted[conversation_id]
    return numbers


def has_running_turn(conversation: Conversation) -> bool:
    """A turn of the conversation has not ended: its chat's Send waits (static/js/console.js keeps it live)."""
    return conversation.turns.exclude(status__in=ENDED).exists()


def thread(conversation: Conversation) -> list[dict]:
    """The conversation's turns, oldest first; ended turns before the newest TURNS_SHOWN_WHOLE fold to a line."""
    turns = turn_views(list(conversation.turns.order_by("id")))
    for turn in turns[:-TURNS_SHOWN_WHOLE]:
        turn["folded"] = turn["status"] in ENDED
    return turns


def render_thread(conversation: Conversation, *, can_decide: bool, own: bool = False) -> tuple[str, dict[int, int]]:
    """The whole thread as one fragment (replaces #thread), and the last sequence shown per turn. `own`: the viewer
    started the conversation's turns (four eyes: they may only deny its risky calls)."""
    turns = thread(conversation)
    context = {"turns": turns, "can_decide": can_decide, "own_conversation": own, "ended": ENDED}
    html = render_to_string(f"{CONVERSATION_TEMPLATE}#thread", context) + _recent_end(conversation)
    return html, {turn["id"]: turn["last"] for turn in turns}


ANNOUNCE_ENDED_WITHIN = datetime.timedelta(seconds=10)


def _recent_end(conversation: Conversation) -> str:
    """The live region's word for the latest turn when it ended just now: a turn may end between the page's render
    and its socket's first frame, and a screen reader would otherwise never hear that the answer is complete."""
    latest = (Turn.objects.filter(conversation=conversation, status__in=ENDED,
                                  finished_at__gte=timezone.now() - ANNOUNCE_ENDED_WITHIN)
              .order_by("-id").values_list("status", "error").first())  # fmt: skip
    if latest is None:
        return ""
    status, error = latest
    event = ({"type": EventType.ERROR, "payload": {"message": error}} if status == Turn.Status.FAILED else
             {"type": EventType.DONE, "payload": {"status": status}})  # fmt: skip
    text = announcement(event)
    return f'<div id="turn-announcer" hx-swap-oob="innerHTML">{escape(text)}</div>' if text else ""


def render_new_turn(turn_id: int, *, can_decide: bool, own: bool = False) -> tuple[str, int]:
    """A turn that started after the page was built, with its events so far, appended to the thread."""
    (turn,) = turn_views([Turn.objects.get(pk=turn_id)])
    context = {"turn": turn, "can_decide": can_decide, "own_conversation": own, "ended": ENDED}
    html = render_to_string(f"{CONVERSATION_TEMPLATE}#new-turn", context)
    return html, turn["last"]


def turn_in_conversation(turn_id: int, conversation_id: int) -> bool:
    return Turn.objects.filter(pk=turn_id, conversation_id=conversation_id).exists()


def needs_routing_log(event: dict) -> bool:
    """The routing event shows the log; `done` shows it again with what the model called."""
    return event["type"] == EventType.DONE or (event["type"] == EventType.ROUTING and event.get("phase") == "routing")


def timeline_of(turn_id: int, up_to: int | None = None) -> dict | None:
    """The turn's timeline from its stored events up to sequence `up_to` (a live event redraws it whole, as it
    stood at that event: a gap filled event by event reads each prefix once, not the whole turn each time)."""
    return turn_timeline(stored_events(turn_id, up_to=up_to))


def routing_log(turn_id: int) -> RoutingLog | None:
    return RoutingLog.objects.filter(turn_id=turn_id).first()


def needs_timeline(event: dict) -> bool:
    """Every event but a streamed piece redraws the turn's timeline (the pieces show at the next one)."""
    return event["type"] != EventType.DELTA


def render_event(event: dict, *, can_decide: bool, own: bool = False, routing: RoutingLog | None = None,
                 timeline: dict | None = None) -> str:  # fmt: skip
    """The out-of-band fragments of one live event; pure rendering (the caller fetches the routing log and the
    timeline)."""
    payload = event.get("payload", {})
    context = {
        "turn_id": event["turn"],
        "item": event_item(event),
        "status": status_after(event),
        "content": payload.get("content", "") if event["type"] == EventType.DELTA else "",
        "budget": budget_bar(payload) if event.get("phase") == BUDGET_PHASE else None,
        "routing": routing,
        "timeline": timeline,
        "decided": payload if event.get("phase") == "approval_decided" else None,
        "question_closed": payload if event.get("phase") == QUESTION_CLOSED else None,
        "announce": announcement(event),
        "can_decide": can_decide,
        "own_conversation": own,
        "ended": ENDED,
        "sequence": event["sequence"],
        "created_at": event.get("created_at", ""),
    }
    return render_to_string(f"{CONVERSATION_TEMPLATE}#live-event", context)


def missing_events(turn_id: int, *, after: int) -> list[dict]:
    """Stored events past `after`: what fills a gap when a live event arrives out of order."""
    return stored_events(turn_id, after=after)
