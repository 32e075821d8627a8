"""Learning from traffic: a turn that ended well teaches its request as an example of the tool that served it.

Called once when a turn finishes. It reads what the turn recorded (RoutingLog,
tool results, approvals) and writes only through catalog.search.tool_examples; it never
changes a policy, never fails a turn (errors are logged) and learns nothing
from a turn that failed, errored or was rejected.

A turn ended well for tool T when: the turn is done; T was recommended by the
steward or found by tool_search in this turn; T was called and every call of T
succeeded (no error, not refused); and nobody rejected the answer: toolhub has
no answer feedback yet, so a rejection is an approval of the turn that was
denied or expired.
"""

import json
import logging

from django.conf import settings

from agents.models import RoutingLog, ToolApproval, Turn, TurnEvent
from catalog.models import ToolExample
from catalog.search.tool_examples import ExampleRefused, add_example

log = logging.getLogger(__name__)

# At most this many tools learn from one turn (a turn calling ten tools is not ten good examples).
MAX_EXAMPLES_PER_TURN = 3
REJECTED_APPROVALS = (ToolApproval.Status.DENIED, ToolApproval.Status.EXPIRED)


def learn_from_turn(turn_id: int) -> list[ToolExample]:
    """The examples this turn added or merged into (none when learning is off or the turn was not good)."""
    if not settings.TOOLHUB_LEARN_FROM_TURNS:
        return []
    try:
        return _learn(turn_id)
    except Exception:  # learning is a side effect: it never breaks the turn
        log.exception("learning from turn %s failed", turn_id)
        return []


def tools_that_served(turn_id: int) -> list[str]:
    """The tools this turn ended well with (the module docstring's rule), in the order they were called."""
    routing = _routing(turn_id)
    return _served(routing) if routing is not None else []


def _routing(turn_id: int) -> RoutingLog | None:
    """The turn's routing log with its turn and conversation, read once for all the checks."""
    return RoutingLog.objects.select_related("turn__conversation").filter(turn_id=turn_id).first()


def _served(routing: RoutingLog) -> list[str]:
    turn = routing.turn
    if turn is None or turn.status != Turn.Status.DONE or not routing.called:
        return []  # not done, or nothing called: nothing served (no need to read approvals and results)
    if ToolApproval.objects.filter(turn_id=turn.pk, status__in=REJECTED_APPROVALS).exists():
        return []
    search_tool = settings.TOOLHUB_SEARCH_TOOL
    succeeded: dict[str, bool] = {}
    searched: set[str] = set()
    results = TurnEvent.objects.filter(turn_id=turn.pk, type=TurnEvent.Type.TOOL_RESULT).order_by("sequence")
    for payload in results.values_list("payload", flat=True):
        name = payload.get("tool_name", "")
        ok = not payload.get("is_error") and not payload.get("refused")
        succeeded[name] = succeeded.get(name, True) and ok
        if name == search_tool and ok:
            searched.update(_found(payload.get("content", "")))
    served = set(routing.recommended) | searched
    return [
        name
        for name in dict.fromkeys(routing.called)
        if name != search_tool and name in served and succeeded.get(name, False)
    ][:MAX_EXAMPLES_PER_TURN]


def _learn(turn_id: int) -> list[ToolExample]:
    routing = _routing(turn_id)
    tools = _served(routing) if routing is not None else []
    if not tools:
        return []
    assert routing is not None and routing.turn is not None  # it served tools
    conversation = routing.turn.conversation
    learned = []
    for name in tools:
        try:
            added = add_example(
                tool=name,
                text=routing.query,
                source=ToolExample.Source.LEARNED,
                approved=settings.TOOLHUB_LEARN_AUTO_APPROVE,
                owner=conversation.owner_id,
                turn_id=turn_id,
                conversation_id=conversation.pk,
            )
        except ExampleRefused as refused:
            log.info("turn %s taught nothing about %s: %s", turn_id, name, refused)
            continue
        learned.append(added.example)
    return learned


def _found(content: str) -> list[str]:
    try:
        payload = json.loads(content)
    except ValueError:
        return []
    found = payload.get("found") if isinstance(payload, dict) else None
    return [name for name in found if isinstance(name, str)] if isinstance(found, list) else []
