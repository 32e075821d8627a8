"""The router: one request -> its RoutingDecision and 0-5 recommended tools (agents.router.analyze).

One package, one entry point. Its parts, in the order a request meets them:

- lexicon.py      the phrase lists (ActionWord rows, domain and tool aliases): a weak vote;
- examples.py     labelled example requests (IntentExample, ToolExample) ranked by meaning;
- fusion.py       the signals and the hybrid tool ranking fused into action, domains and a raw
                  confidence; a request with several clauses is read clause by clause;
- calibration.py  the raw confidence mapped to how often such decisions were right on data;
- steward.py      the modes (rules, llm, hybrid), the recommendations among what policy permits,
                  staged flows, the silent time injection;
- llm.py          the LLM steward over the permitted candidates.

It reads the catalog through catalog.bundle, catalog.search and catalog.decision
only, and never decides what is exposed (catalog.bundle does).
"""

from .fusion import ConversationState
from .steward import (
    Intent,
    StewardContext,
    StewardMode,
    StewardResult,
    analyze,
    current_time_context,
)

__all__ = [
    "ConversationState",
    "Intent",
    "StewardContext",
    "StewardMode",
    "StewardResult",
    "analyze",
    "current_time_context",
]
