"""Tool search: query modes, the allowed-set guarantee, the database-backed index and its stored embeddings."""

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.models import CatalogState, ToolEmbedding, ToolPolicy
from catalog.search import embeddings
from catalog.search import service as catalog_search
from catalog.search.index import (
    DENSE_OFF_NOTE,
    MAX_REGEX_LENGTH,
    MODE_BM25,
    MODE_HYBRID,
    MODE_REGEX,
    MODE_SELECT,
    ToolDocument,
    ToolSearchIndex,
    name_words,
    words,
)
from tests.support.builders import make_policy, make_tool

DIM = 256


def bag_of_words_embedder(texts, *, model=None):
    """A stand-in for the dense model: hashed word counts, unit length (fast, deterministic)."""
    rows = np.zeros((len(texts), DIM), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in words(text):
            rows[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1.0, norms)


CATALOG = [
    ToolDocument("get_weather", "Current weather and forecast for a city.", ("forecast",), ("web",), ("city",)),
    ToolDocument("web_search", "Search the public web for pages.", (), ("web",), ("query", "max_results")),
    ToolDocument("send_email", "Send an email message to a recipient.", ("mail",), ("mail",), ("to", "body")),
    ToolDocument("list_containers", "List Docker containers with their status.", (), ("infra",), ("all",)),
    ToolDocument("restart_container", "Restart a Docker container.", (), ("infra",), ("container",)),
    ToolDocument("getStockPrice", "Latest price of a stock ticker.", (), ("finance",), ("ticker",)),
    ToolDocument("get_stock_price__v2", "Price of a share on the exchange.", (), ("finance",), ("symbol",)),
    ToolDocument("calculate", "Evaluate an arithmetic expression.", ("math",), ("general",), ("expression",)),
    ToolDocument("translate_text", "Translate text between languages.", (), ("general",), ("text", "target")),
    ToolDocument("create_invoice", "Create a customer invoice.", (), ("billing",), ("customer_id", "amount")),
]
NAMES = [d.name for d in CATALOG]
INDEX = ToolSearchIndex(CATALOG, embedder=bag_of_words_embedder)


def test_name_words_split_snake_camel_and_version_suffix():
    assert name_words("get_stock_price__v2") == "get stock price"
    assert name_words("getStockPrice") == "get stock price"
    assert name_words("HTTPServerStatus") == "http server status"


def test_select_returns_exact_names_in_order_and_notes_unknown_or_denied():
    result = INDEX.search("select:send_email, calculate,nope,web_search", allowed=set(NAMES) - {"web_search"})
    assert result.mode == MODE_SELECT
    assert result.names == ["send_email", "calculate"]
    assert "nope" in result.note and "web_search" in result.note
    assert result.error == ""


def test_regex_ranks_name_matches_before_description_matches():
    result = INDEX.search("regex:container", allowed=None, limit=5)
    assert result.mode == MODE_REGEX
    assert set(result.names) == {"list_containers", "restart_container"}
    result = INDEX.search("regex:docker", allowed=None)
    assert set(result.names) == {"list_containers", "restart_container"}
    assert all(score < 1.0 for score in result.scores)  # description-only matches


@pytest.mark.parametrize(
    "pattern, message",
    [("(unclosed", "invalid regex"), ("x" * (MAX_REGEX_LENGTH + 1), "limit"), ("(a+)+$", "simplify"), ("", "needs")],
)
def test_bad_regex_is_an_error_result_not_an_exception(pattern, message):
    result = INDEX.search(f"regex:{pattern}", allowed=None)
    assert result.names == [] and message in result.error


def test_natural_query_ranks_the_matching_tool_first():
    result = INDEX.search("restart the docker container", allowed=None, limit=3)
    assert result.mode == MODE_HYBRID
    assert result.names[0] == "restart_container"
    assert result.scores == sorted(result.scores, reverse=True)


def test_no_hit_returns_empty_names_and_a_note():
    result = INDEX.search("zebra xylophone", allowed=None)
    assert result.names == [] and result.scores == []
    assert "no tool matches" in result.note


def test_limit_is_filled_from_allowed_tools_only():
    allowed = {"get_weather", "calculate", "translate_text"}
    result = INDEX.search("get weather forecast city price", allowed=allowed, limit=2)
    assert set(result.names) <= allowed and result.names[0] == "get_weather"


def test_allowed_ranking_is_the_global_ranking_filtered():
    query = "price of a stock or a container status"
    everything = INDEX.search(query, allowed=None, limit=len(NAMES)).names
    allowed = {"getStockPrice", "list_containers", "send_email"}
    assert INDEX.search(query, allowed=allowed, limit=3).names == [n for n in everything if n in allowed]


def test_empty_allowed_set_returns_nothing():
    assert INDEX.search("weather", allowed=set()).names == []
    assert INDEX.search("select:get_weather", allowed=set()).names == []


queries = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["weather in Hanoi", "stock price", "send mail", "docker", "math 2+2"]),
    st.lists(st.sampled_from([*NAMES, "nope"]), max_size=4).map(lambda names: "select:" + ",".join(names)),
    st.text(max_size=20).map(lambda pattern: "regex:" + pattern),
    st.sampled_from(["regex:.*", "regex:get_", "regex:^c"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(allowed=st.sets(st.sampled_from(NAMES)), query=queries, limit=st.integers(min_value=1, max_value=12))
def test_results_never_include_a_name_outside_allowed(allowed, query, limit):
    result = INDEX.search(query, allowed=allowed, limit=limit)
    assert set(result.names) <= allowed
    assert len(result.names) == len(result.scores) <= limit


def test_bm25_only_index_says_the_dense_model_is_off():
    result = ToolSearchIndex(CATALOG).search("send an email", allowed=None)
    assert result.mode == MODE_BM25 and result.note == DENSE_OFF_NOTE
    assert result.names[0] == "send_email"


# --- the database catalog ---------------------------------------------------


def tool_texts_embedded(calls):
    # Queries are embedded one at a time; the index embeds tools in one batch per build.
    return [text for call in calls for text in call if ":" in text]


@pytest.mark.django_db
def test_search_catalog_never_returns_unpolicied_or_draft_or_disabled_tools(counted_embedder):
    make_policy(make_tool("get_weather", description="Weather forecast for a city."))
    make_tool("weather_alerts", description="Severe weather alerts.")  # no policy
    make_policy(make_tool("weather_radar", description="Weather radar images."), status=ToolPolicy.Status.DRAFT)
    make_policy(make_tool("weather_history", description="Past weather.", enabled=False))
    everything = {"get_weather", "weather_alerts", "weather_radar", "weather_history"}
    assert catalog_search.search_catalog("weather", allowed=everything).names == ["get_weather"]
    assert catalog_search.search_catalog("regex:weather", allowed=everything).names == ["get_weather"]
    assert catalog_search.search_catalog("select:weather_alerts", allowed=everything).names == []


@pytest.mark.django_db
def test_search_catalog_with_no_allowed_set_fails_closed(counted_embedder):
    make_policy(make_tool("get_weather", description="Weather forecast for a city."))
    assert catalog_search.search_catalog("weather", allowed=None).names == []


@pytest.mark.django_db
def test_index_is_rebuilt_when_a_tool_changes(counted_embedder):
    tool = make_tool("lookup_thing", description="Look up a parcel by its tracking code.")
    make_policy(tool)
    assert catalog_search.search_catalog("parcel tracking", allowed={"lookup_thing"}).names == ["lookup_thing"]
    version = CatalogState.objects.get().version
    first = catalog_search.catalog_index()
    assert catalog_search.catalog_index() is first  # nothing changed: same object, no rebuild

    tool.description = "Convert a temperature between units."
    tool.save()
    assert CatalogState.objects.get().version == version + 1
    assert catalog_search.catalog_index() is not first
    assert catalog_search.search_catalog("temperature units", allowed={"lookup_thing"}).names == ["lookup_thing"]


@pytest.mark.django_db
def test_policy_domain_changes_move_the_catalog_version():
    policy = make_policy(make_tool())
    version = CatalogState.objects.get().version
    policy.domains.clear()
    assert CatalogState.objects.get().version == version + 1


@pytest.mark.django_db
def test_embeddings_are_stored_and_reused_across_rebuilds(counted_embedder):
    for name in ("get_weather", "send_email", "list_containers"):
        make_policy(make_tool(name, description=f"Tool {name.replace('_', ' ')}."))
    catalog_search.catalog_index()
    assert len(tool_texts_embedded(counted_embedder)) == 3
    assert ToolEmbedding.objects.count() == 3
    stored = ToolEmbedding.objects.get(tool__name="send_email")
    assert stored.dim == DIM and len(bytes(stored.vector)) == 4 * DIM

    counted_embedder.clear()
    catalog_search.reset_catalog_index()  # as after a restart
    catalog_search.catalog_index()
    assert tool_texts_embedded(counted_embedder) == []

    tool = ToolEmbedding.objects.get(tool__name="send_email").tool
    tool.description = "Send a message by email."
    tool.save()
    catalog_search.catalog_index()
    assert tool_texts_embedded(counted_embedder) == ["send email: Send a message by email. Parameters: q."]


@pytest.mark.django_db
def test_each_model_keeps_its_own_stored_vectors(counted_embedder):
    for name in ("get_weather", "send_email"):
        make_policy(make_tool(name, description=f"Tool {name.replace('_', ' ')}."))
    catalog_search.catalog_index()  # the search model
    catalog_search.catalog_index(model=embeddings.E5_SMALL)  # the router's
    names = set(ToolEmbedding.objects.values_list("model_name", flat=True))
    assert names == {embeddings.model_name(embeddings.MINILM), embeddings.model_name(embeddings.E5_SMALL)}
    assert ToolEmbedding.objects.count() == 4

    counted_embedder.clear()
    catalog_search.reset_catalog_index()  # as after a restart: both come back from the database
    catalog_search.catalog_index()
    catalog_search.catalog_index(model=embeddings.E5_SMALL)
    assert tool_texts_embedded(counted_embedder) == []


@pytest.mark.django_db
def test_embeddings_off_falls_back_to_bm25_with_a_note(counted_embedder, settings):
    settings.TOOLHUB_SEARCH_EMBEDDINGS = False
    make_policy(make_tool("send_email", description="Send an email message."))
    result = catalog_search.search_catalog("email someone", allowed={"send_email"})
    assert result.mode == MODE_BM25 and "dense model is off" in result.note
    assert result.names == ["send_email"]
    assert counted_embedder == [] and ToolEmbedding.objects.count() == 0


def test_real_dense_model_matches_meaning_without_shared_words():
    index = ToolSearchIndex(CATALOG, embedder=embeddings.embed_texts)
    result = index.search("will it rain tomorrow in Paris?", allowed=None, limit=3)
    assert result.mode == MODE_HYBRID
    assert result.names[0] == "get_weather"


@pytest.mark.django_db
def test_the_database_index_documents_carry_each_active_tools_domains_and_aliases_only(django_assert_max_num_queries):
    make_policy(make_tool("ship_parcel"), domains=("shipping", "billing"), aliases=["send package"])
    make_policy(make_tool("track_parcel"), domains=())
    make_policy(make_tool("draft_parcel"), domains=("shipping",), status=ToolPolicy.Status.DRAFT)
    make_policy(make_tool("off_parcel", enabled=False), domains=("shipping",))

    index = catalog_search.build_catalog_index(dense=False)

    documents = {d.name: d for d in index.documents if d.name.endswith("_parcel")}
    assert set(documents) == {"ship_parcel", "track_parcel"}
    assert documents["ship_parcel"].domains == ("billing", "shipping")
    assert documents["ship_parcel"].aliases == ("send package",)
    assert documents["track_parcel"].domains == ()
    assert documents["ship_parcel"].parameter_names == ("q",)
    assert index.search("billing", allowed={"ship_parcel", "track_parcel"}).names == ["ship_parcel"]
    with django_assert_max_num_queries(3):  # tools, their domains, the examples: none per tool
        catalog_search.build_catalog_index(dense=False)


def test_the_stop_words_are_bm25s_english_ones_and_importing_the_index_leaves_bm25s_unloaded():
    from bm25s.stopwords import STOPWORDS_EN as BM25S_ENGLISH

    from catalog.search import index

    assert tuple(index.STOPWORDS_EN) == BM25S_ENGLISH
    code = "import sys, catalog.search.index; print('bm25s' in sys.modules, 'scipy' in sys.modules)"
    root = Path(__file__).resolve().parents[3]
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert loaded.stdout.split() == ["False", "False"]
