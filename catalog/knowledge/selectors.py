"""Reads of the knowledge snippets used by the review queue and the overview; never writes."""

import datetime

from django.contrib.auth import get_user_model
from django.utils import timezone

from catalog.models import KnowledgeSnippet

from .registry import current_snippets


def stale_snippets(today=None) -> list:
    """Knowledge past its review interval, oldest due first (the review queue)."""
    snippets = current_snippets().select_related("domain")
    return sorted((s for s in snippets if s.is_stale(today)), key=lambda s: s.review_due)


DUE_SOON_DAYS = 14  # the "due soon" view: not stale yet, due within this many days


def snippets_for_review(
    *, show: str = "stale", owner: str = "", domain: str = "", today: datetime.date | None = None
) -> list[KnowledgeSnippet]:
    """Current snippets, most days overdue first; each carries `days_overdue` (negative: not due yet).

    show: "stale" (the review queue: past their interval, or asked of a new owner), "soon" (neither, but due within
    DUE_SOON_DAYS), "all"."""
    today = today or timezone.localdate()
    snippets = current_snippets().select_related("domain", "reviewed_by")
    if owner:
        snippets = snippets.filter(owner=owner)
    if domain:
        snippets = snippets.filter(domain__name=domain)
    rows = []
    for snippet in snippets:
        snippet.days_overdue = (today - snippet.review_due).days
        queued = snippet.is_stale(today) or snippet.review_requested
        if (
            show == "all"
            or (show == "stale" and queued)
            or (show == "soon" and not queued and snippet.days_overdue >= -DUE_SOON_DAYS)
        ):
            rows.append(snippet)
    return sorted(rows, key=lambda s: (-s.days_overdue, s.domain.name, s.title))


def snippet_owners() -> list[str]:
    return sorted(set(current_snippets().values_list("owner", flat=True)))


def owner_choices() -> list[str]:
    """What an owner field offers: every active user's name and every owner a snippet has (teams too)."""
    users = get_user_model().objects.filter(is_active=True).values_list(get_user_model().USERNAME_FIELD, flat=True)
    return sorted(set(users) | set(snippet_owners()), key=str.casefold)
