"""The router: text + conversation state -> RoutingDecision (action, domains, confidence, phase, side_query).

Every word it knows comes from data: ActionWord rows (verbs in any language),
Domain names and aliases, and the aliases of active tool policies. An operator
adds a word in the admin and the router knows it; there is no word list in
this module. It never looks at tool names and never decides what is exposed
(catalog.bundle does).
"""

import re
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from catalog.decision import RoutingDecision
from catalog.models import Action, Domain, Operation, ToolPolicy
from catalog.search import catalog_state

from .models import ActionWord

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

# Confidence from the evidence found; the bundle compares it with TOOLHUB_MIN_CONFIDENCE.
CONFIDENCE_NOTHING = 0.0
CONFIDENCE_ACTION_ONLY = 0.4
CONFIDENCE_DOMAIN_ONLY = 0.5
CONFIDENCE_CONFLICT = 0.5
CONFIDENCE_ACTION_AND_DOMAIN = 0.9
CONFIDENCE_IN_WORKFLOW = 0.9


@dataclass(frozen=True)
class ConversationState:
    """What the router needs to know about the conversation: its active workflow, if any."""

    workflow_kind: str = ""
    workflow_phase: str = ""
    workflow_action: str = ""  # the action the workflow carries out, e.g. create


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


class Vocabulary:
    """The router's words, compiled once per vocabulary version."""

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


def load_vocabulary() -> Vocabulary:
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
    return Vocabulary(action_words, domain_words, tool_words)


_current: tuple[tuple, Vocabulary] | None = None


def vocabulary() -> Vocabulary:
    """The process's vocabulary, rebuilt when the catalog state moves (ActionWord changes move it too)."""
    global _current
    state = catalog_state()
    cached = _current
    if cached is None or cached[0] != state:
        cached = (state, load_vocabulary())
        _current = cached
    return cached[1]


def decide(hits: Hits, state: ConversationState) -> RoutingDecision:
    """The decision the hits support; pure, so it is tested without a database."""
    domains = frozenset(hits.domains)
    if hits.actions:
        best = max(hits.actions.values())
        leaders = [a for a, weight in hits.actions.items() if weight == best]
        # Ties go to the action said first ("show ... then delete" is a show).
        action = min(leaders, key=lambda a: hits.first_action_at[a])
        conflict = len({a for a in hits.actions if a not in READ_ACTIONS}) > 1
    else:
        action, conflict = Action.ANSWER, False
    if hits.actions and domains:
        confidence = CONFIDENCE_CONFLICT if conflict else CONFIDENCE_ACTION_AND_DOMAIN
    elif domains:
        confidence = CONFIDENCE_DOMAIN_ONLY
    elif hits.actions:
        confidence = CONFIDENCE_ACTION_ONLY
    else:
        confidence = CONFIDENCE_NOTHING

    if not state.workflow_phase:
        return RoutingDecision(action=action, domains=domains, confidence=confidence)
    asked_to_read = bool(hits.actions) and action in READ_ACTIONS
    if asked_to_read:
        # A read question inside a workflow: answer it beside the workflow.
        return RoutingDecision(action, domains, confidence, phase=state.workflow_phase, side_query=True)
    return RoutingDecision(
        action=state.workflow_action or action,
        domains=domains,
        confidence=max(confidence, CONFIDENCE_IN_WORKFLOW),
        phase=state.workflow_phase,
    )


def classify(text: str, conversation_state: ConversationState | None = None) -> RoutingDecision:
    return decide(vocabulary().match(text), conversation_state or ConversationState())
