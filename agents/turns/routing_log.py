"""Writes of RoutingLog: one per steward analysis, completed when the turn knows what was called; and the logged
requests as the policy simulation replays them (registered with catalog.policies.versions by AgentsConfig), and
the tools' latest results, from which it reads what each tool returns (catalog.policies.sidestep)."""

import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.db.models.fields.json import KT
from django.db.models.functions import Left
from django.utils import timezone

from agents.models import RoutingLog, ToolApproval, Turn, TurnEvent
from catalog.policies.bundle import CapabilityBundle
from catalog.policies.decision import RoutingDecision
from catalog.policies.versions import Replay

if TYPE_CHECKING:  # the router is imported by the turns that use it, never when the app starts
    from agents.router import StewardResult


def record_analysis(result: "StewardResult", *, query: str, turn: Turn | None = None,
                    bundle: CapabilityBundle | None = None, two_stage: bool = True,
                    knowledge: list[dict[str, object]] | None = None) -> RoutingLog:  # fmt: skip
    """Store what the steward decided and, when given, what the bundle exposed and the knowledge the turn uses."""
    log = RoutingLog(
        turn=turn,
        query=query,
        intent=result.intent,
        decision=result.decision.as_dict(),
        recommended=list(result.recommended_tools),
        steward_mode=result.mode,
        steward_ms=round(result.latency_ms),
        fallback=result.fallback,
        two_stage=two_stage,
        knowledge=knowledge or [],
    )
    if bundle is not None:
        log.exposed = list(bundle.loaded_names)
        log.deferred = list(bundle.deferred_names)
        log.denied = [{"name": d.name, "reason": d.reason} for d in bundle.denied]
        log.loaded_schema_tokens = bundle.loaded_schema_tokens
        log.deferred_listing_tokens = bundle.archive_tokens
        log.catalog_schema_tokens = bundle.catalog_schema_tokens
    log.save()
    return log


def record_outcome(log: RoutingLog, *, called: list[str], turn_ms: int) -> None:
    """What the model actually called, once the turn is over, and how much of its time it waited for people."""
    RoutingLog.objects.filter(pk=log.pk).update(
        called=list(dict.fromkeys(called)), turn_ms=turn_ms, wait_ms=min(approval_wait_ms(log.turn_id), turn_ms)
    )


def approval_wait_ms(turn_id: int | None) -> int:
    """Milliseconds the turn waited for its approvals' decisions, each moment counted once (approvals asked in one
    step wait together); one still undecided counts up to now."""
    if turn_id is None:
        return 0
    now = timezone.now()
    spans = sorted((asked, decided or now) for asked, decided in
                   ToolApproval.objects.filter(turn_id=turn_id).values_list("requested_at", "decided_at"))  # fmt: skip
    waited, end = datetime.timedelta(), None
    for start, stop in spans:
        if end is not None and start < end:
            start = end  # the overlap was counted with the span before
        if stop > start:
            waited += stop - start
            end = stop if end is None else max(end, stop)
    return round(waited.total_seconds() * 1000)


def recent_replays(count: int) -> list[Replay]:
    """The last `count` routing logs as requests to replay under a draft policy, newest first."""
    logs = RoutingLog.objects.only("query", "decision", "recommended", "called", "created_at")[:count]
    return [
        Replay(
            RoutingDecision.from_dict(log.decision),
            tuple(log.recommended),
            tuple(log.called),
            log.query,
            log.created_at,
        )  # fmt: skip
        for log in logs
    ]


RESULTS_SCANNED = 1000  # the latest tool results the policy simulation reads for what tools return
RESULT_CHARS = 1500  # of each, the start: the keys of a JSON object come early


def recent_tool_results(names: Sequence[str], per_tool: int) -> dict[str, list[str]]:
    """{tool: the contents of its latest successful results, newest first, at most `per_tool`} among the last
    RESULTS_SCANNED results of `names` (registered with catalog.policies.sidestep: what tools return)."""
    rows = (
        TurnEvent.objects.filter(type=TurnEvent.Type.TOOL_RESULT, payload__tool_name__in=list(names))
        .order_by("-created_at")
        .values_list(KT("payload__tool_name"), Left(KT("payload__content"), RESULT_CHARS),
                     KT("payload__is_error"), KT("payload__refused"))[:RESULTS_SCANNED]
    )  # fmt: skip
    found: dict[str, list[str]] = {}
    for name, content, is_error, refused in rows:
        contents = found.setdefault(str(name), [])
        if len(contents) < per_tool and content and "true" not in (is_error, refused):  # what it returned, not why not
            contents.append(content)
    return found
