"""The router: one request -> its RoutingDecision and 0-5 recommended tools (agents.router.analyze).

One package, one entry point. Its parts, in the order a request meets them:

- lexicon.py      the phrase lists (ActionWord rows, domain and tool aliases): a weak vote;
- nearest_examples.py  labelled example requests (IntentExample, ToolExample) ranked by meaning;
- fusion.py       the signals and the hybrid tool ranking fused into action, domains and a raw
                  confidence; a request with several clauses is read clause by clause;
- calibration.py  the raw confidence mapped to how often such decisions were right on data;
- rules.py        the rules steward: the recommendations among what policy permits, staged flows,
                  the silent time injection;
- llm.py          the LLM steward over the permitted candidates;
- modes.py        `analyze`, the entry point: rules, llm or hybrid (TOOLHUB_STEWARD), rules as fallback.

"The steward" is what pages and events call this component; the package is its code.

It reads the catalog through catalog.policies.bundle, catalog.search.service and catalog.policies.decision
only, and never decides what is exposed (catalog.policies.bundle does).
"""

from catalog.models import tokens
from catalog.search import embeddings
from catalog.search import service as search

from .fusion import ConversationState
from .lexicon import lexicon
from .modes import analyze
from .nearest_examples import example_index
from .rules import Intent, StewardContext, StewardMode, StewardResult, current_time_context


def prepare_routing() -> None:
    """Load the routing model and run it once; build its index of the catalog, the examples and the phrase lists."""
    if embeddings.dense_enabled():
        embeddings.warm(embeddings.routing_model())
        search.catalog_index(model=embeddings.routing_model())
    example_index()
    lexicon()


def prepare_vectors() -> None:
    """Embed and store what search and routing need (setup, tests), so servers and workers start on stored vectors."""
    search.prepare_search()
    prepare_routing()


# The token counter's encoding too: loading it takes about a second, which a console's first timeline paid.
WARM_UP = (prepare_routing, tokens.encoding)


def warm_up() -> None:
    """Search, routing and the token counter ready before the first request (a Celery worker calls this at start)."""
    search.warm_up(also=WARM_UP)


def warm_up_in_background() -> None:
    """As warm_up, on a thread (the ASGI application calls this at import)."""
    search.warm_up_in_background(also=WARM_UP)


__all__ = [
    "ConversationState",
    "Intent",
    "StewardContext",
    "StewardMode",
    "StewardResult",
    "analyze",
    "current_time_context",
    "prepare_vectors",
    "warm_up",
    "warm_up_in_background",
]
