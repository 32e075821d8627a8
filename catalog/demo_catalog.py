"""Install the demo catalog: domains, builtin and Loyalty tools with policies, knowledge, model profiles.

Idempotent: running it again creates nothing twice and never overwrites an
operator's policy edits (policies are created only where none exists).
"""

import datetime
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from .demo.builtin import BUILTIN_TOOLS
from .demo.knowledge import DOMAINS, KNOWLEDGE_SNIPPETS
from .demo.loyalty import loyalty_tools
from .importers import import_tools
from .models import Domain, KnowledgeSnippet, Tool


@dataclass
class DemoSummary:
    tools: int
    tools_created: int
    policies_created: int
    snippets_created: int


@transaction.atomic
def load_demo_catalog() -> DemoSummary:
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
    )
