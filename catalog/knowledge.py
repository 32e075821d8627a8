"""Knowledge for a request: snippets of the decision's domains and action, within a token budget.

Selection only reads; it never edits a snippet. Each injected snippet names
its source so the model (and the user) can see where a rule comes from.
"""

from .decision import RoutingDecision
from .models import Action, KnowledgeSnippet
from .tokens import count_tokens


def select_snippets(decision: RoutingDecision, *, budget_tokens: int) -> list[dict]:
    """Snippets of the decision's domains, action-specific ones first, newest version first."""
    if not decision.domains or budget_tokens <= 0:
        return []
    snippets = KnowledgeSnippet.objects.filter(domain__name__in=decision.domains).select_related("domain")
    ranked = sorted(
        snippets,
        key=lambda s: (s.action != decision.action, s.action != Action.ANSWER, -s.version, s.title),
    )
    chosen, used = [], 0
    for snippet in ranked:
        entry = {"title": snippet.title, "text": snippet.text, "source": snippet.source, "domain": snippet.domain.name}
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
