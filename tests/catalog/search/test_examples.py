"""Tool examples: validation, merging, bounds, the fusion (helps near, never hurts far) and policy safety."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.router import StewardContext, analyze
from agents.turns.tool_calls import run_tool_search
from catalog.models import CatalogState, ToolExample, ToolPolicy
from catalog.policies.bundle import build_bundle
from catalog.search import service as catalog_search
from catalog.search.index import ExampleDocument, ToolSearchIndex
from catalog.search.tool_examples import ExampleRefused, add_example, edit_example, set_approved
from tests.catalog.search.test_search import CATALOG, NAMES, bag_of_words_embedder, queries
from tests.support.builders import make_policy, make_tool, make_user

# --- the fusion, on plain values ----------------------------------------------


def ranked(index, query, **kwargs):
    return index.search(query, allowed=None, limit=3, **kwargs).names


def test_a_close_example_lifts_its_tool_above_the_description_match():
    plain = ToolSearchIndex(CATALOG, embedder=bag_of_words_embedder)
    query = "what does the sky look like over lisbon"
    examples = [ExampleDocument("get_weather", "what does the sky look like over madrid")]
    warm = ToolSearchIndex(CATALOG, embedder=bag_of_words_embedder, examples=examples)
    assert ranked(plain, query)[:1] != ["get_weather"]
    assert ranked(warm, query)[0] == "get_weather"


def test_examples_far_from_the_query_change_no_score():
    examples = [ExampleDocument("send_email", "book a table for two tonight")]
    warm = ToolSearchIndex(CATALOG, embedder=bag_of_words_embedder, examples=examples)
    plain = ToolSearchIndex(CATALOG, embedder=bag_of_words_embedder)
    for query in ("latest price of a stock", "restart the docker container", "translate this text"):
        assert np.array_equal(warm.scores(query)[0], plain.scores(query)[0])


def test_more_matching_examples_boost_more():
    one = [ExampleDocument("send_email", "ping my landlord about the rent")]
    three = one + [
        ExampleDocument("send_email", "ping my landlord about rent today"),
        ExampleDocument("send_email", "ping the landlord about the rent"),
    ]
    query = "ping my landlord about the rent please"
    position = [d.name for d in CATALOG].index("send_email")
    score_one = ToolSearchIndex(CATALOG, embedder=bag_of_words_embedder, examples=one).scores(query)[0][position]
    score_three = ToolSearchIndex(CATALOG, embedder=bag_of_words_embedder, examples=three).scores(query)[0][position]
    assert score_three > score_one


def test_examples_never_bring_back_a_name_outside_allowed():
    examples = [ExampleDocument("send_email", "ping my landlord about the rent")] * 5
    warm = ToolSearchIndex(CATALOG, embedder=bag_of_words_embedder, examples=examples)
    names = warm.search("ping my landlord about the rent", allowed={"web_search", "get_weather"}, limit=5).names
    assert "send_email" not in names


WARM = ToolSearchIndex(
    CATALOG,
    embedder=bag_of_words_embedder,
    examples=[
        ExampleDocument(name, text)
        for name, text in [
            ("send_email", "ping my landlord about the rent"),
            ("restart_container", "weather in hanoi is down again, bounce it"),
            ("create_invoice", "stock price of the invoice"),
            ("getStockPrice", "send mail to the stock desk"),
        ]
    ],
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(allowed=st.sets(st.sampled_from(NAMES)), query=queries, limit=st.integers(min_value=1, max_value=12))
def test_examples_never_bring_back_a_name_outside_allowed_for_any_query(allowed, query, limit):
    result = WARM.search(query, allowed=allowed, limit=limit)
    assert set(result.names) <= allowed
    assert len(result.names) == len(result.scores) <= limit


def test_an_owned_example_helps_only_its_owner():
    examples = [ExampleDocument("get_weather", "what does the sky look like over madrid", owner_id=7)]
    warm = ToolSearchIndex(CATALOG, embedder=bag_of_words_embedder, examples=examples)
    query = "what does the sky look like over lisbon"
    assert ranked(warm, query, owner_id=7)[0] == "get_weather"
    assert ranked(warm, query, owner_id=8)[:1] != ["get_weather"]
    assert ranked(warm, query)[:1] != ["get_weather"]


def test_excluded_examples_and_cold_searches_ignore_examples():
    examples = [ExampleDocument("get_weather", "what does the sky look like over madrid", key="q1")]
    warm = ToolSearchIndex(CATALOG, embedder=bag_of_words_embedder, examples=examples)
    query = "what does the sky look like over lisbon"
    assert ranked(warm, query, exclude_examples={"q1"})[:1] != ["get_weather"]
    assert ranked(warm, query, use_examples=False)[:1] != ["get_weather"]


def test_examples_of_tools_outside_the_index_are_dropped():
    warm = ToolSearchIndex(CATALOG, embedder=bag_of_words_embedder, examples=[ExampleDocument("nope", "hello")])
    assert warm.examples == []


def test_bm25_only_index_keeps_examples_without_effect():
    examples = [ExampleDocument("send_email", "ping my landlord about the rent")]
    warm = ToolSearchIndex(CATALOG, examples=examples)
    plain = ToolSearchIndex(CATALOG)
    assert np.array_equal(warm.scores("landlord rent email")[0], plain.scores("landlord rent email")[0])


# --- storing examples ---------------------------------------------------------


@pytest.mark.django_db
def test_an_example_for_a_missing_or_disabled_tool_is_refused_with_the_reason(counted_embedder):
    with pytest.raises(ExampleRefused, match="no tool named 'ghost'") as missing:
        add_example(tool="ghost", text="do a thing")
    assert missing.value.field == "tool"
    make_tool("old_tool", enabled=False)
    with pytest.raises(ExampleRefused, match="old_tool is disabled"):
        add_example(tool="old_tool", text="do a thing")
    assert ToolExample.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "text, reason",
    [("", "needs text"), ("   \n ", "needs text"), ("?!...", "needs words"), ("x" * 1001, "at most 1,000")],
)
def test_empty_or_giant_text_is_refused(counted_embedder, text, reason):
    make_tool()
    with pytest.raises(ExampleRefused, match=reason):
        add_example(tool="lookup_thing", text=text)
    assert ToolExample.objects.count() == 0


@pytest.mark.django_db
def test_the_same_text_for_the_same_tool_is_merged(counted_embedder):
    make_tool()
    first = add_example(tool="lookup_thing", text="Find my parcel, please")
    again = add_example(tool="lookup_thing", text="  find MY parcel please ")
    assert first.created and not again.created
    assert ToolExample.objects.count() == 1
    assert ToolExample.objects.get().seen_count == 2


@pytest.mark.django_db
def test_a_near_identical_text_is_merged_but_a_different_one_is_kept(counted_embedder):
    make_tool()
    text = "where is my parcel with the tracking code 123 that was sent from the shop in berlin last week"
    add_example(tool="lookup_thing", text=text)
    near = add_example(tool="lookup_thing", text=text + " please")
    other = add_example(tool="lookup_thing", text="convert ten euros to dollars")
    assert not near.created and other.created
    assert ToolExample.objects.count() == 2


@pytest.mark.django_db
def test_merging_an_approved_copy_approves_the_pending_example(counted_embedder):
    make_tool()
    add_example(tool="lookup_thing", text="find my parcel", source="learned")
    merged = add_example(tool="lookup_thing", text="Find my parcel", approved=True)
    assert merged.example.approved and ToolExample.objects.get().approved


@pytest.mark.django_db
def test_each_tool_keeps_a_bounded_number_and_evicts_pending_learned_first(counted_embedder, settings):
    settings.TOOLHUB_MAX_EXAMPLES_PER_TOOL = 3
    make_tool()
    add_example(tool="lookup_thing", text="operator wrote this", approved=True)
    add_example(tool="lookup_thing", text="learned and approved", source="learned", approved=True)
    add_example(tool="lookup_thing", text="learned but pending", source="learned")
    add_example(tool="lookup_thing", text="a fourth request arrives", source="learned", approved=True)
    texts = set(ToolExample.objects.values_list("text", flat=True))
    assert texts == {"operator wrote this", "learned and approved", "a fourth request arrives"}


@pytest.mark.django_db
def test_a_tool_full_of_operator_examples_refuses_another(counted_embedder, settings):
    settings.TOOLHUB_MAX_EXAMPLES_PER_TOOL = 2
    make_tool()
    add_example(tool="lookup_thing", text="first operator example")
    add_example(tool="lookup_thing", text="second operator example")
    with pytest.raises(ExampleRefused, match="already has 2 operator examples"):
        add_example(tool="lookup_thing", text="third operator example")
    assert ToolExample.objects.count() == 2


@pytest.mark.django_db
def test_a_flood_of_learned_examples_from_one_conversation_is_capped(counted_embedder, settings):
    settings.TOOLHUB_LEARN_MAX_PER_CONVERSATION = 2
    make_tool()
    for text in ("first request", "second request"):
        add_example(tool="lookup_thing", text=text, source="learned", conversation_id=5)
    with pytest.raises(ExampleRefused, match="already taught 2 examples"):
        add_example(tool="lookup_thing", text="third request", source="learned", conversation_id=5)
    add_example(tool="lookup_thing", text="third request", source="learned", conversation_id=6)
    assert ToolExample.objects.filter(conversation_id=5).count() == 2
    assert ToolExample.objects.count() == 3


@pytest.mark.django_db
def test_editing_to_another_examples_text_is_refused(counted_embedder):
    make_tool()
    add_example(tool="lookup_thing", text="find my parcel")
    second = add_example(tool="lookup_thing", text="convert euros").example
    with pytest.raises(ExampleRefused, match="already has that example"):
        edit_example(second, text="Find my parcel", approved=True)


# --- the index follows the examples ---------------------------------------------


def version():
    return CatalogState.objects.get().version


@pytest.mark.django_db
def test_the_index_rebuilds_when_examples_change(counted_embedder):
    make_policy(make_tool("get_weather", description="Weather forecast for a city."))
    make_policy(make_tool("send_email", description="Send an email message."))
    allowed = {"get_weather", "send_email"}
    query = "ping my landlord about the rent"
    before = catalog_search.catalog_index()
    start = version()

    pending = add_example(tool="send_email", text="ping my landlord about the rent today", source="learned").example
    assert version() == start, "a pending example is not in the index: no rebuild"
    assert catalog_search.catalog_index() is before

    set_approved(pending, True)
    assert version() == start + 1
    warm = catalog_search.catalog_index()
    assert warm is not before and [e.tool for e in warm.examples] == ["send_email"]
    assert catalog_search.search_catalog(query, allowed=allowed).names[0] == "send_email"
    assert ToolExample.objects.get().dim > 0, "the vector is stored with the example"

    edit_example(pending, text="book a table for two", approved=True)
    assert version() == start + 2
    assert [e.text for e in catalog_search.catalog_index().examples] == ["book a table for two"]

    pending.delete()
    assert version() == start + 3
    assert catalog_search.catalog_index().examples == []


@pytest.mark.django_db
def test_a_restart_reuses_stored_example_vectors(counted_embedder):
    make_policy(make_tool("send_email", description="Send an email message."))
    add_example(tool="send_email", text="ping my landlord about the rent", approved=True)
    catalog_search.reset_catalog_index()
    counted_embedder.clear()
    catalog_search.catalog_index()
    assert [text for call in counted_embedder for text in call if "landlord" in text] == []


@pytest.mark.django_db
def test_with_per_owner_learning_an_owners_examples_help_only_their_searches(counted_embedder, settings):
    settings.TOOLHUB_LEARN_PER_OWNER = True
    alice, bob = make_user("alice"), make_user("bob")
    make_policy(make_tool("get_weather", description="Weather forecast for a city."))
    make_policy(make_tool("send_email", description="Send an email message."))
    allowed = {"get_weather", "send_email"}
    add_example(tool="send_email", text="what is up with the landlord", source="learned", approved=True, owner=alice)
    query = "what is up with the landlord today"
    assert catalog_search.search_catalog(query, allowed=allowed, owner_id=alice.pk).names[0] == "send_email"
    assert "send_email" not in catalog_search.search_catalog(query, allowed=allowed, owner_id=bob.pk).names
    settings.TOOLHUB_LEARN_PER_OWNER = False
    assert catalog_search.search_catalog(query, allowed=allowed, owner_id=bob.pk).names[0] == "send_email"


@pytest.mark.django_db
def test_the_models_tool_search_ranks_with_the_conversation_owners_examples(counted_embedder, settings):
    settings.TOOLHUB_LEARN_PER_OWNER = True
    alice, bob = make_user("alice"), make_user("bob")
    make_policy(make_tool("get_weather", description="Weather forecast for a city."))
    make_policy(make_tool("send_email", description="Send an email message."))
    add_example(tool="send_email", text="what is up with the landlord", source="learned", approved=True, owner=alice)
    context = StewardContext.current()
    query = "what is up with the landlord today"
    bundle = build_bundle(analyze(query, context=context, mode="rules").decision, context.entries)

    def found(owner) -> list[str]:
        outcome = run_tool_search({"query": query}, bundle, emit=lambda *a, **k: None, owner_id=owner.pk)
        return json.loads(outcome.content)["found"]

    assert found(alice)[0] == "send_email"
    assert "send_email" not in found(bob)


# --- safety: examples rank, policy decides ------------------------------------------


@pytest.mark.django_db
def test_a_denied_tool_stays_denied_however_many_learned_examples_it_has(counted_embedder):
    make_policy(make_tool("get_invoice", description="Show one invoice by its number."), domains=("billing",))
    make_policy(
        make_tool("purge_invoices", description="Remove invoices for good."), domains=("billing",), operation="delete"
    )
    unpolicied = make_tool("dump_invoices", description="Export every invoice.")
    for number in range(30):
        for name in ("purge_invoices", unpolicied.name):
            add_example(tool=name, text=f"show me invoice number {number} of march", approved=True, source="learned")
    query = "show me invoice number 7 of march"
    everything = {"get_invoice", "purge_invoices", "dump_invoices"}
    # The examples do pull the delete tool up when nothing restricts the ranking...
    assert catalog_search.search_catalog(query, allowed=everything).names[0] == "purge_invoices"

    # ...but traffic cannot make the request a delete (learned examples never vote for a write):
    # policy denies the delete tool, and the unpolicied one is never indexed.
    context = StewardContext.current()
    result = analyze(query, context=context, mode="rules", max_tools=5, min_tools=5)
    assert "purge_invoices" not in result.recommended_tools and "dump_invoices" not in result.recommended_tools
    bundle = build_bundle(result.decision, context.entries, recommended=["purge_invoices", "dump_invoices"])
    denied = {tool.name: tool.reason for tool in bundle.denied}
    assert set(denied) >= {"purge_invoices", "dump_invoices"}
    assert not {"purge_invoices", "dump_invoices"} & ({*bundle.loaded_names} | {*bundle.deferred_names})
    assert ToolPolicy.objects.get(tool__name="purge_invoices").operation == "delete"


@pytest.mark.django_db
def test_import_examples_adds_merges_and_reports_refusals(counted_embedder, tmp_path):
    from io import StringIO

    from django.core.management import call_command

    make_tool("get_weather")
    rows = [
        {"query": "rain in oslo?", "expected_tools": ["get_weather"]},
        {"query": "Rain in Oslo", "expected_tools": ["get_weather"]},
        {"query": "hello", "expected_tools": ["ghost_tool"]},
        {"query": "", "expected_tools": ["get_weather"]},
    ]
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = StringIO()
    call_command("import_examples", str(path), "--approve", stdout=out)
    assert out.getvalue().splitlines()[0] == "1 added, 1 merged, 2 refused"
    example = ToolExample.objects.get()
    assert (example.source, example.approved, example.seen_count) == ("imported", True, 2)
