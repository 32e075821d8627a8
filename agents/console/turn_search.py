"""Search across conversations' turns: by text, tool called, status, owner, channel and API key, and creation date;
a page of results.

Reads only. The filters are plain values (the view's form parses them); the results of a page are read in a
fixed number of queries whatever their number (the page, then its messages and its tool calls). A turn's owner
is its conversation's: the signed-in operator for the console, the key's user for the API.
"""

import datetime
from dataclasses import dataclass

from django.core.paginator import Page, Paginator
from django.db.models import Exists, OuterRef, Q, QuerySet, TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.urls import reverse
from django.utils import timezone

from agents.models import Message, Turn, TurnEvent

PAGE_SIZE = 25
EXCERPT_CHARS = 160


@dataclass(frozen=True)
class TurnFilters:
    text: str = ""  # in any message of the turn (the request, the answer, tool results) or its routing log's query
    tool: str = ""  # a tool the model called in the turn
    status: str = ""
    owner: str = ""  # the conversation owner's username
    channel: str = ""  # Conversation.Channel: console, api or mcp
    api_key: str = ""  # the name of the API key that started the conversation
    end_user: str = ""  # whom an API client said the request was for (its `user`)
    tag: tuple[str, str] | None = None  # (key, value): the conversation's metadata holds key with that value
    since: datetime.date | None = None  # created on or after this day
    until: datetime.date | None = None  # created on or before this day (the whole day)


def _start_of(day: datetime.date) -> datetime.datetime:
    return timezone.make_aware(datetime.datetime.combine(day, datetime.time.min))


def search_turns(filters: TurnFilters) -> QuerySet[Turn]:
    """The turns matching every filter given, newest first."""
    turns = Turn.objects.select_related("conversation__owner").order_by("-created_at", "-id")
    if filters.text:
        in_messages = Message.objects.filter(turn=OuterRef("pk"), content__icontains=filters.text)
        turns = turns.filter(Q(Exists(in_messages)) | Q(routing_log__query__icontains=filters.text))
    if filters.tool:
        calls = TurnEvent.tool_events(filters.tool).filter(turn=OuterRef("pk"), type=TurnEvent.Type.TOOL_CALL)
        turns = turns.filter(Exists(calls))
    if filters.status:
        turns = turns.filter(status=filters.status)
    if filters.owner:
        turns = turns.filter(conversation__owner__username__iexact=filters.owner)
    if filters.channel:
        turns = turns.filter(conversation__channel=filters.channel)
    if filters.api_key:
        turns = turns.filter(conversation__api_key_name__iexact=filters.api_key)
    if filters.end_user:
        turns = turns.filter(conversation__end_user__iexact=filters.end_user)
    if filters.tag:
        key, value = filters.tag
        # As text (a JSON key transform would compare the value as JSON); the key is a parameter, never a path.
        tagged = Cast(KeyTextTransform(key, "conversation__metadata"), output_field=TextField())
        turns = turns.alias(tagged=tagged).filter(tagged=value)
    if filters.since:
        turns = turns.filter(created_at__gte=_start_of(filters.since))
    if filters.until:
        turns = turns.filter(created_at__lt=_start_of(filters.until + datetime.timedelta(days=1)))
    return turns


def turn_link(*, conversation_id: int, turn_id: int) -> str:
    """The turn inside its conversation's page (its article's anchor)."""
    return reverse("console-conversation", args=[conversation_id]) + f"#turn-{turn_id}"


def excerpt(content: str, text: str) -> str:
    """Up to EXCERPT_CHARS of `content` around the first place it holds `text` (case-insensitive), or its start."""
    at = content.lower().find(text.lower()) if text else -1
    if at < 0:
        return content[:EXCERPT_CHARS] + ("…" if len(content) > EXCERPT_CHARS else "")
    start = max(at - EXCERPT_CHARS // 3, 0)
    end = start + EXCERPT_CHARS
    return ("…" if start else "") + content[start:end] + ("…" if end < len(content) else "")


def source(conversation) -> str:
    """Where a conversation came from, as a page says it: "console", "API, key ci-bot", "MCP, key claude"."""
    label = conversation.get_channel_display()
    return f"{label}, key {conversation.api_key_name}" if conversation.api_key_name else label


def result_rows(turns: list[Turn], *, text: str = "") -> list[dict]:
    """What each result shows: request, answer (an excerpt around `text`), owner, status, tools called (and which of
    them failed), link. Two queries for the page: its user and assistant messages, its tool calls and results."""
    ids = [turn.pk for turn in turns]
    requests: dict[int, str] = {}
    answers: dict[int, str] = {}
    messages = Message.objects.filter(turn_id__in=ids, role__in=[Message.Role.USER, Message.Role.ASSISTANT])
    for turn_id, role, content in messages.exclude(content="").order_by("id").values_list("turn_id", "role", "content"):
        if role == Message.Role.USER:
            requests.setdefault(turn_id, content)
        else:
            answers[turn_id] = content  # the last one: the turn's answer
    tools: dict[int, list[str]] = {}
    failed: dict[int, list[str]] = {}  # the tools whose result was an error or a refusal, per turn
    events = TurnEvent.objects.filter(turn_id__in=ids, type__in=TurnEvent.TOOL_TYPES).order_by("turn_id", "sequence")
    fields = ("turn_id", "type", "payload__tool_name", "payload__is_error", "payload__refused")
    for turn_id, kind, name, is_error, refused in events.values_list(*fields):
        if not name:
            continue
        if kind == TurnEvent.Type.TOOL_CALL and name not in tools.setdefault(turn_id, []):
            tools[turn_id].append(name)
        elif kind == TurnEvent.Type.TOOL_RESULT and (is_error or refused) and name not in failed.get(turn_id, []):
            failed.setdefault(turn_id, []).append(name)
    return [
        {
            "turn": turn,
            "conversation": turn.conversation,
            "owner": turn.conversation.owner.get_username(),
            "source": source(turn.conversation),
            "request": excerpt(requests.get(turn.pk, ""), text),
            "answer": excerpt(answers.get(turn.pk, ""), text),
            "tools": tools.get(turn.pk, []),
            "failed_tools": failed.get(turn.pk, []),
            "link": turn_link(conversation_id=turn.conversation_id, turn_id=turn.pk),
        }
        for turn in turns
    ]


def search_page(filters: TurnFilters, page_number) -> tuple[Page, list[dict]]:
    """One page of results (a missing or out-of-range page number reads as the nearest page) and its rows."""
    page = Paginator(search_turns(filters), PAGE_SIZE).get_page(page_number)
    return page, result_rows(list(page.object_list), text=filters.text)
