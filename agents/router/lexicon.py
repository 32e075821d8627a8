"""The phrase lists: one weak signal of the router among the others (fusion.py weighs it).

Every word comes from data: ActionWord rows (verbs in any language), Domain
names and aliases, and the aliases of active tool policies. An operator adds a
word in the admin and the lexicon knows it; there is no word list in this
module. Matching is whole words on normalised text, never substrings of tool
names. It decides nothing on its own: a phrase only votes.
"""

import re
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from catalog.models import Action, Domain, Operation, ToolPolicy
from catalog.search import catalog_state

from ..models import ActionWord

# What a tool's operation says about the action of a request that names it.
ACTION_OF_OPERATION = {
    Operation.READ: Action.GET,
    Operation.LIST: Action.LIST,
    Operation.SEARCH: Action.SEARCH,
    Operation.CREATE: Action.CREATE,
    Operation.UPDATE: Action.UPDATE,
    Operation.DELETE: Action.DELETE,
    Operation.EXECUTE: Action.EXECUTE,
}
READ_ACTIONS = frozenset({Action.ANSWER, Action.GET, Action.LIST, Action.SEARCH})


@dataclass(frozen=True)
class Hits:
    """What the text matched: phrases per action, per domain, and tool aliases."""

    actions: Counter = field(default_factory=Counter)
    domains: Counter = field(default_factory=Counter)
    tools: tuple[str, ...] = ()
    first_action_at: dict = field(default_factory=dict)


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFC", text).lower()
    text = re.sub(r"[^\w'%]+", " ", text)
    return " ".join(text.split())


def _pattern(phrases) -> re.Pattern | None:
    ordered = sorted({normalize(p) for p in phrases if normalize(p)}, key=lambda p: (-len(p), p))
    if not ordered:
        return None
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(p) for p in ordered) + r")(?!\w)")


class Lexicon:
    """The phrase lists, compiled once per catalog state."""

    def __init__(self, action_words: dict[str, str], domain_words: dict[str, set[str]], tool_words: dict):
        self.action_words = {normalize(k): v for k, v in action_words.items()}
        self.domain_words = {normalize(k): v for k, v in domain_words.items()}
        # phrase -> list of (tool name, action, domains)
        self.tool_words = {normalize(k): v for k, v in tool_words.items()}
        self.action_pattern = _pattern(self.action_words)
        self.domain_pattern = _pattern(self.domain_words)
        self.tool_pattern = _pattern(self.tool_words)

    def match(self, text: str) -> Hits:
        normalized = normalize(text)
        actions: Counter = Counter()
        domains: Counter = Counter()
        first_action_at: dict = {}
        tools: list[str] = []
        if self.action_pattern:
            for found in self.action_pattern.finditer(normalized):
                action = self.action_words[found.group(0)]
                actions[action] += len(found.group(0).split())
                first_action_at.setdefault(action, found.start())
        if self.domain_pattern:
            for found in self.domain_pattern.finditer(normalized):
                for domain in self.domain_words[found.group(0)]:
                    domains[domain] += 1
        if self.tool_pattern:
            for found in self.tool_pattern.finditer(normalized):
                for name, action, tool_domains in self.tool_words[found.group(0)]:
                    tools.append(name)
                    # A tool's alias says what it does: a weak vote for that action.
                    actions[action] += 1
                    first_action_at.setdefault(action, found.start())
                    for domain in tool_domains:
                        domains[domain] += 1
        return Hits(actions, domains, tuple(dict.fromkeys(tools)), first_action_at)


def load_lexicon() -> "Lexicon":
    action_words = dict(ActionWord.objects.values_list("phrase", "action"))
    domain_words: dict[str, set[str]] = defaultdict(set)
    for domain in Domain.objects.all():
        for phrase in [domain.name, domain.title, *domain.aliases]:
            domain_words[phrase].add(domain.name)
    tool_words: dict[str, list] = defaultdict(list)
    policies = (
        ToolPolicy.objects.filter(status=ToolPolicy.Status.ACTIVE, tool__enabled=True)
        .select_related("tool")
        .prefetch_related("domains")
    )
    for policy in policies:
        domains = tuple(sorted(domain.name for domain in policy.domains.all()))
        for alias in policy.aliases:
            tool_words[alias].append((policy.tool.name, ACTION_OF_OPERATION[policy.operation], domains))
    return Lexicon(action_words, domain_words, tool_words)


_current: tuple[tuple, "Lexicon"] | None = None


def lexicon() -> "Lexicon":
    """The process's lexicon, rebuilt when the catalog state moves (ActionWord changes move it too)."""
    global _current
    state = catalog_state()
    cached = _current
    if cached is None or cached[0] != state:
        cached = (state, load_lexicon())
        _current = cached
    return cached[1]
