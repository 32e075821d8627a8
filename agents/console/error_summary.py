"""What went wrong recently, for the overview: failed turns and their reasons, turns that ended "done" after a tool
failed, and the tools whose calls failed, each linking to where it can be read in full. Reads only."""

import datetime
from dataclasses import dataclass

from django.db.models import Count, Q
from django.urls import reverse
from django.utils import timezone

from agents.models import Turn, TurnEvent

from .metrics import FAILED_RESULT, tool_outcomes
from .turn_search import turn_link

WINDOW = datetime.timedelta(hours=1)
FAILED_TURNS_SHOWN = 10
FAILING_TOOLS_SHOWN = 10
ERROR_CHARS = 160


@dataclass(frozen=True)
class FailingTool:
    name: str
    errors: int
    calls: int

    @property
    def link(self) -> str:
        return reverse("tool-activity", args=[self.name]) + "?window=1h"


def tool_failed(turns):
    """The failed or refused tool results of `turns` (a queryset)."""
    return TurnEvent.objects.filter(turn__in=turns, type=TurnEvent.Type.TOOL_RESULT).filter(FAILED_RESULT)


def recent_errors(*, now: datetime.datetime | None = None) -> dict:
    """Over the last hour: ended turns, failed ones (rate and the latest with their reasons), "done" turns in which a
    tool failed, and the tools with failed calls (most errors first). A handful of queries whatever the traffic."""
    now = now or timezone.now()
    since = now - WINDOW
    ended = Turn.objects.filter(status__in=Turn.ENDED, finished_at__gte=since, finished_at__lte=now)
    counts = ended.aggregate(
        ended=Count("id"), failed=Count("id", filter=Q(status=Turn.Status.FAILED))
    )  # fmt: skip
    done_after_tool_error = (
        tool_failed(ended.filter(status=Turn.Status.DONE)).values("turn_id").distinct().count()
    )  # fmt: skip
    failed = list(
        ended.filter(status=Turn.Status.FAILED)
        .order_by("-finished_at", "-id")
        .values("id", "conversation_id", "error", "finished_at")[:FAILED_TURNS_SHOWN]
    )
    failing = sorted(
        (
            FailingTool(tool, errors, calls)
            for tool, (calls, errors) in tool_outcomes(since=since, until=now).items()
            if errors
        ),
        key=lambda tool: (-tool.errors, tool.name),
    )
    return {
        "ended": counts["ended"],
        "failed": counts["failed"],
        "failure_rate": counts["failed"] / counts["ended"] if counts["ended"] else None,
        "done_after_tool_error": done_after_tool_error,
        "failed_turns": [
            {
                "id": row["id"],
                "error": (row["error"] or "no reason recorded")[:ERROR_CHARS],
                "finished_at": row["finished_at"],
                "link": turn_link(conversation_id=row["conversation_id"], turn_id=row["id"]),
            }
            for row in failed
        ],
        "failing_tools": failing[:FAILING_TOOLS_SHOWN],
    }
