"""Labelled example requests, ranked by meaning: the router's nearest-neighbour evidence.

Two kinds of rows teach it, both operator-editable: IntentExamples (a request and
its action and domains; "answer" with no domains marks general knowledge) and the
approved ToolExamples of indexed tools (labelled with their tool, and through the
tool's policy with its action and domains). A query's nearest examples vote with
weights that fall off with their distance from the nearest one (Neighbours).

Reads the catalog's tables and writes none of them but the stored text vectors
(catalog.search.vectors). With the dense model off it holds nothing and votes nothing.
"""

import functools
import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from agents.models import IntentExample
from catalog.models import Action, ToolExample, ToolPolicy
from catalog.search import embeddings
from catalog.search.service import catalog_state
from catalog.search.vectors import stored_embed

from .lexicon import ACTION_OF_OPERATION, READ_ACTIONS, is_plain, without_diacritics

# With at least this many examples their mean vector is taken out of every vector before
# comparing: e5's vectors share a large common part ("a short question") that otherwise
# makes every short question look alike (nearest-example accuracy on routing_dev 0.76/0.71
# en/vi raw, 0.80/0.76 centred).
CENTRE_FROM = 50
# The nearest NEIGHBOURS examples vote, each with weight exp((s - s_best) / TEMPERATURE),
# and only while s >= s_best - REACH. e5's cosines crowd into 0.75-0.95, so small gaps matter.
NEIGHBOURS = 8
TEMPERATURE = 0.05
REACH = 0.2


# Names and ids (a capitalised word or phrase after the first word, "M-300", "SUMMER24") say
# which thing a request is about, not what it wants. Examples and requests are compared as
# the blend of the text as written and its generic form (names and ids replaced by one
# placeholder), so "the capital of France" is not pulled towards an example that happens to
# name France. Blend against the text alone: routing_dev 0.95 -> 0.963, a blind held-out set
# 0.87 -> 0.88, and "capital of France", "weather in Tokyo", "... về Hà Nội" no longer take
# a clock tool; it costs one more embedding for a request that names something.
_NAME_OR_ID = re.compile(
    r"(?<=\w[ ,])(?:[A-ZĐ][\w'’.-]*)(?:\s+[A-ZĐ][\w'’.-]*)*|\b[A-Za-z]+-?\d[\w-]*\b|\b\d+[A-Za-z][\w-]*\b"
)
PLACEHOLDER = "X"


# Quoted text is what a request works on ("make this friendlier: '...'", "dịch giúp: \"...\""),
# not what it asks for: requests and examples alike are read with each quoted passage as one
# placeholder. An apostrophe inside a word ("M-15's", "don't") opens no quote.
QUOTED = re.compile(r"[\"“«][^\"“”«»]+[\"”»]|(?<!\w)['‘][^'‘’]+['’](?!\w)")
MIN_UNQUOTED_WORDS = 3
_LETTERS = re.compile(r"[^\W\d_]+")


def without_quotes(text: str) -> str:
    """The text with each quoted passage replaced by the placeholder (the text itself if that leaves too little)."""
    unquoted = QUOTED.sub(PLACEHOLDER, text)
    return unquoted if len(_LETTERS.findall(unquoted)) >= MIN_UNQUOTED_WORDS else text


def generic_form(text: str) -> str:
    """The text with names and ids replaced by a placeholder."""
    return _NAME_OR_ID.sub(PLACEHOLDER, text)


def written_and_generic(texts: list[str], embed: Callable[[list[str]], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The vectors of the texts as written and of their generic forms, one engine call for both."""
    vectors = np.asarray(embed([*texts, *map(generic_form, texts)]), dtype=np.float32)
    return vectors[: len(texts)], vectors[len(texts) :]


def blend(written: np.ndarray, generic: np.ndarray) -> np.ndarray:
    """The vectors examples and requests are compared in: written + generic form, unit length."""
    return unit(unit(written) + unit(generic))


def comparable_vectors(texts: list[str], embed: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """The compared vectors (blend) of `texts`.

    Requests arrive here already without_quotes (steward.rules_analysis); examples are read the same way."""
    return blend(*written_and_generic(texts, embed))


@dataclass(frozen=True)
class Label:
    action: str
    domains: frozenset[str]
    tool: str = ""  # "" for an IntentExample
    taught_by_operator: bool = True  # False: a ToolExample learned from traffic


@dataclass
class Neighbours:
    """What the nearest examples say; all weights are shares of 1 (empty when there are no examples)."""

    best_similarity: float = 0.0
    answer: float = 0.0  # share of examples answered with no tool
    # Counters of float weights (typeshed types a Counter's counts as int).
    actions: Counter[str] = field(default_factory=Counter)
    domains: Counter[str] = field(default_factory=Counter)
    tools: Counter[str] = field(default_factory=Counter)

    @property
    def empty(self) -> bool:
        return not self.actions


class _Space:
    """One matrix of example vectors, centred when there are enough of them."""

    def __init__(self, matrix: np.ndarray):
        self.centre = matrix.mean(axis=0) if len(matrix) >= CENTRE_FROM else None
        self.matrix = unit(matrix - self.centre) if self.centre is not None else matrix

    def similarity(self, vector: np.ndarray) -> np.ndarray:
        if self.centre is not None:
            vector = unit(vector - self.centre)
        similarity: np.ndarray = self.matrix @ vector
        return similarity


class ExampleIndex:
    """Unit vectors of labelled examples; `nearest` is one matrix-vector product.

    `plain_matrix` holds the same examples written without diacritics (rows aligned
    with `matrix`): a request typed without them ("tam dung campaign") is compared
    with examples typed the same way, as e5 reads "tạm dừng" and "tam dung" apart.
    """

    def __init__(
        self,
        labels: list[Label],
        matrix: np.ndarray,
        owners: list[int | None] | None = None,
        plain_matrix: np.ndarray | None = None,
    ):
        self.labels = labels
        self.space = _Space(matrix)
        self.plain_space = _Space(plain_matrix) if plain_matrix is not None else self.space
        self.owners = np.array([owner or 0 for owner in (owners or [None] * len(labels))], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.labels)

    def nearest(self, vector: np.ndarray | None, *, owner_id: int | None = None, plain: bool = False) -> Neighbours:
        """The nearest examples' votes; `plain`: the request has no diacritics."""
        if vector is None or not len(self.labels):
            return Neighbours()
        similarity = (self.plain_space if plain else self.space).similarity(vector)
        hidden = self.owners != 0
        if hidden.any():  # a learned example of one owner helps only that owner
            similarity[hidden & (self.owners != (owner_id or -1))] = -1.0
        count = min(NEIGHBOURS, similarity.size)
        top = np.argpartition(-similarity, count - 1)[:count]
        best = float(similarity[top].max())
        top = top[similarity[top] >= best - REACH]
        weights = np.exp((similarity[top] - best) / TEMPERATURE)
        weights /= weights.sum()
        found = Neighbours(best_similarity=best)
        for position, weight in zip(top.tolist(), weights.tolist(), strict=True):
            label = self.labels[position]
            # An example learned from traffic never votes for a write: however many there are,
            # traffic cannot turn a read into a delete. Operators' examples may (they write policy too).
            if label.taught_by_operator or label.action in READ_ACTIONS:
                found.actions[label.action] += weight
            for domain in label.domains:
                found.domains[domain] += weight
            if label.tool:
                found.tools[label.tool] += weight
            elif label.action == Action.ANSWER and not label.domains:
                found.answer += weight
        return found


def unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    units: np.ndarray = (vectors / np.maximum(norms, 1e-9)).astype(np.float32, copy=False)
    return units


EMPTY = ExampleIndex([], np.zeros((0, 0), dtype=np.float32))


def load_examples() -> ExampleIndex:
    """Every IntentExample and every approved ToolExample of an indexed tool, with its vector."""
    if not embeddings.dense_enabled():
        return EMPTY
    intents = list(IntentExample.objects.order_by("id"))
    tool_rows = list(
        ToolExample.objects.filter(approved=True, tool__enabled=True, tool__policy__status=ToolPolicy.Status.ACTIVE)
        .select_related("tool__policy")
        .prefetch_related("tool__policy__domains")
        .only("id", "text", "source", "owner_id", "tool__name", "tool__policy__operation")
        .order_by("id")
    )
    labels: list[Label] = []
    texts: list[str] = []
    owners: list[int | None] = []
    for row in intents:
        labels.append(Label(row.action, frozenset(row.domains or ())))
        texts.append(without_quotes(row.text))
        owners.append(None)
    for tool_row in tool_rows:
        policy = tool_row.tool.policy
        domains = frozenset(domain.name for domain in policy.domains.all())
        learned = tool_row.source == ToolExample.Source.LEARNED
        labels.append(Label(ACTION_OF_OPERATION[policy.operation], domains, tool_row.tool.name, not learned))
        texts.append(without_quotes(tool_row.text))
        owners.append(tool_row.owner_id)
    if not labels:
        return EMPTY
    # Every form of every example is embedded once ever (catalog.search.vectors), not at each start.
    embed = functools.partial(stored_embed, model=embeddings.routing_model())
    matrix = comparable_vectors(texts, embed)
    marked = [i for i, text in enumerate(texts) if not is_plain(text)]
    plain = matrix.copy()
    if marked:
        plain[marked] = comparable_vectors([without_diacritics(texts[i]) for i in marked], embed)
    return ExampleIndex(labels, matrix, owners, plain_matrix=plain)


_lock = threading.Lock()
_current: tuple[tuple[tuple[int, str], bool, str], ExampleIndex] | None = None


def example_index() -> ExampleIndex:
    """The process's example index, rebuilt when the catalog state moves (examples move it)."""
    global _current
    key = (catalog_state(), embeddings.dense_enabled(), embeddings.routing_model())
    cached = _current
    if cached is not None and cached[0] == key:
        return cached[1]
    with _lock:
        cached = _current
        if cached is None or cached[0] != key:
            cached = (key, load_examples())
            _current = cached
        return cached[1]
