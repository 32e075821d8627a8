"""Reads of the knowledge snippets used by the review queue and the overview; never writes."""

import datetime

from django.utils import timezone

from catalog.models import KnowledgeSnippet

from .registry import current_snippets


def stale_snippets(today=None) -> list:
    """Knowledge past its review interval, oldest due first (the review queue)."""
    snippets = current_snippets().select_related("domain")
    return sorted((s for s in snippets if s.is_stale(today)), key=lambda s: s.review_due)


def snippets_for_review(
    *, stale_only: bool = True, owner: str = "", domain: str = "", today: datetime.date | None = None
) -> list[KnowledgeSnippet]:
    """Current snippets, most days overdue first; each carries `days_overdue` (negative: not due yet)."""
    today = today or timezone.localdate()
    snippets = current_snippets().select_related("domain", "reviewed_by")
    if owner:
        snippets = snippets.filter(owner=owner)
    if domain:
        snippets = snippets.filter(domain__name=domain)
    rows = []
    for snippet in snippets:
        snippet.days_overdue = (today - snippet.review_due).days
        if snippet.is_stale(today) or not stale_only:
            rows.append(snippet)
    return sorted(rows, key=lambda s: (-s.days_overdue, s.domain.name, s.title))


def snippet_owners() -> list[str]:
    return sorted(set(current_snippets().values_list("owner", flat=True)))
