"""The knowledge registry: select snippets for a decision, keep versions, track reviews.

Snippets are versioned rows sharing a `key`; only the newest version of each
is ever selected. Editing adds a version (the old one stays, diffable);
marking reviewed stamps the current version. A stale snippet (past its review
interval) is still used, but flagged so the routing log and console show it.
"""

import datetime
import difflib

from django.db import transaction
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from .decision import RoutingDecision
from .models import Action, KnowledgeSnippet
from .tokens import count_tokens

REVISABLE = ("title", "text", "source", "owner", "action", "review_interval_days")


def current_snippets() -> QuerySet[KnowledgeSnippet]:
    """The newest version of every snippet."""
    newest = KnowledgeSnippet.objects.filter(key=OuterRef("key")).order_by("-version").values("version")[:1]
    return KnowledgeSnippet.objects.filter(version=Subquery(newest))


def select_snippets(decision: RoutingDecision, *, budget_tokens: int, today=None) -> list[dict]:
    """Snippets of the decision's domains, action-specific ones first, within the token budget."""
    if not decision.domains or budget_tokens <= 0:
        return []
    today = today or timezone.localdate()
    snippets = current_snippets().filter(domain__name__in=decision.domains).select_related("domain")
    ranked = sorted(snippets, key=lambda s: (s.action != decision.action, s.action != Action.ANSWER, s.title))
    chosen, used = [], 0
    for snippet in ranked:
        entry = {
            "key": snippet.key,
            "version": snippet.version,
            "title": snippet.title,
            "text": snippet.text,
            "source": snippet.source,
            "domain": snippet.domain.name,
            "stale": snippet.is_stale(today),
        }
        cost = count_tokens(knowledge_text(entry))
        if used + cost > budget_tokens:
            continue
        chosen.append(entry)
        used += cost
    return chosen


def knowledge_text(snippet: dict) -> str:
    return f"- {snippet['title']}: {snippet['text']} (source: {snippet['source']})"


def knowledge_section(snippets: list[dict]) -> str:
    if not snippets:
        return ""
    return "## Domain knowledge\n" + "\n".join(knowledge_text(s) for s in snippets)


@transaction.atomic
def revise_snippet(snippet: KnowledgeSnippet, *, author, **changes) -> KnowledgeSnippet:
    """A new version with `changes`; the previous version is kept unchanged."""
    unknown = set(changes) - set(REVISABLE)
    if unknown:
        raise ValueError(f"Cannot revise {', '.join(sorted(unknown))} of a snippet.")
    latest = KnowledgeSnippet.objects.select_for_update().filter(key=snippet.key).order_by("-version").first()
    fields = {name: getattr(latest, name) for name in REVISABLE} | changes
    revision = KnowledgeSnippet(
        key=latest.key,
        domain=latest.domain,
        version=latest.version + 1,
        last_reviewed=timezone.localdate(),
        reviewed_by=author,
        author=author,
        **fields,
    )
    revision.full_clean()
    revision.save()
    return revision


def mark_reviewed(snippet: KnowledgeSnippet, *, user, today: datetime.date | None = None) -> None:
    KnowledgeSnippet.objects.filter(pk=snippet.pk).update(
        last_reviewed=today or timezone.localdate(), reviewed_by=user, updated_at=timezone.now()
    )


def snippet_diff(old: KnowledgeSnippet, new: KnowledgeSnippet) -> str:
    """A unified diff of two versions, for review pages."""

    def lines(s):
        return [f"title: {s.title}", f"source: {s.source}", f"owner: {s.owner}", "", *s.text.splitlines()]

    return "\n".join(difflib.unified_diff(lines(old), lines(new), f"v{old.version}", f"v{new.version}", lineterm=""))
