"""Install the demo catalog: the router's seed vocabulary, domains, builtin and Loyalty tools with policies,
knowledge, model profiles.

Idempotent: running it again creates nothing twice and never overwrites an
operator's policy edits (policies are created only where none exists).
"""

import datetime
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from agents.router.vocabulary import load_vocabulary
from catalog.models import Domain, KnowledgeSnippet, Tool, ToolExample
from catalog.policies.importers import import_tools
from catalog.search import embeddings
from catalog.search.signals import bump_catalog_version
from catalog.search.tool_examples import clean_text, text_key

from .data.builtin import BUILTIN_TOOLS
from .data.examples import TOOL_EXAMPLES
from .data.knowledge import DOMAINS, KNOWLEDGE_SNIPPETS
from .data.loyalty import loyalty_tools


@dataclass
class DemoSummary:
    tools: int
    tools_created: int
    policies_created: int
    snippets_created: int
    examples_created: int = 0


@transaction.atomic
def load_demo_catalog() -> DemoSummary:
    load_vocabulary()  # what the demo's requests are routed with (agents/router/data/vocabulary.json)
    for data in DOMAINS:
        Domain.objects.update_or_create(
            name=data["name"],
            defaults={"title": data["title"], "description": data["description"], "aliases": data["aliases"]},
        )
    builtin = import_tools(BUILTIN_TOOLS, source=Tool.Source.BUILTIN)
    loyalty = import_tools(loyalty_tools(), source=Tool.Source.MCP)
    snippets_created = 0
    today = timezone.localdate()
    domains = {domain.name: domain for domain in Domain.objects.all()}
    for data in KNOWLEDGE_SNIPPETS:
        _, created = KnowledgeSnippet.objects.get_or_create(
            key=slugify(data["title"])[:120],
            version=1,
            defaults={
                "domain": domains[data["domain"]],
                "title": data["title"],
                "action": data["action"],
                "text": data["text"],
                "source": data["source"],
                "owner": data["owner"],
                "last_reviewed": today - datetime.timedelta(days=data["last_reviewed_days_ago"]),
                "review_interval_days": data["review_interval_days"],
            },
        )
        snippets_created += created
    return DemoSummary(
        tools=Tool.objects.count(),
        tools_created=len(builtin.created) + len(loyalty.created),
        policies_created=len(builtin.policies_created) + len(loyalty.policies_created),
        snippets_created=snippets_created,
        examples_created=seed_examples(),
    )


def seed_examples() -> int:
    """The demo tools' approved operator examples; existing ones (and deleted tools) are left alone."""
    tools = {tool.name: tool for tool in Tool.objects.filter(name__in=TOOL_EXAMPLES)}
    wanted = [
        (tools[name], clean_text(text)) for name, texts in TOOL_EXAMPLES.items() if name in tools for text in texts
    ]
    existing = set(ToolExample.objects.filter(tool__in=tools.values()).values_list("tool_id", "text_key"))
    fresh = [(tool, text) for tool, text in wanted if (tool.pk, text_key(text)) not in existing]
    if not fresh:
        return 0
    rows = [
        ToolExample(tool=tool, text=text, text_key=text_key(text), source=ToolExample.Source.OPERATOR, approved=True)
        for tool, text in fresh
    ]
    if embeddings.dense_enabled():
        # One batch for all of them (the index would otherwise embed them one build at a time).
        vectors = embeddings.embed_texts([row.text for row in rows])
        for row, vector in zip(rows, vectors, strict=True):
            row.model_name, row.vector, row.dim = embeddings.model_name(), vector.astype("<f4").tobytes(), len(vector)
    ToolExample.objects.bulk_create(rows, ignore_conflicts=True)
    bump_catalog_version()  # bulk_create sends no signal: the index must learn the examples
    return len(rows)
