"""Capability bundles fail closed: table tests of each rule and hypothesis properties over random catalogs."""

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from catalog.models.tokens import count_tokens
from catalog.policies.bundle import allowed_names, build_bundle, denial_reason
from catalog.policies.decision import CatalogEntry, PolicyView, RoutingDecision

SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}}
OPERATIONS = ["read", "list", "search", "create", "update", "delete", "execute"]
WRITES = {"create", "update", "delete", "execute"}
ACTIONS = ["answer", "list", "get", "search", "create", "update", "delete", "execute"]


def policy(operation="read", *, status="active", risk="low", domains=("loyalty",), phases=(), confirm=False):
    return PolicyView(
        status=status,
        operation=operation,
        risk=risk,
        domains=frozenset(domains),
        workflow_phases=tuple(phases),
        aliases=(),
        requires_confirmation=confirm,
    )


def entry(name, policy_view=None, *, deferred=False, always_load=False, enabled=True, tokens=100):
    return CatalogEntry(
        name=name,
        description=f"{name} does its job.",
        input_schema=SCHEMA,
        schema_tokens=tokens,
        enabled=enabled,
        always_load=always_load,
        deferred=deferred,
        policy=policy_view,
    )


def decide(action="answer", domains=("loyalty",), confidence=1.0, phase="", side_query=False):
    return RoutingDecision(
        action=action, domains=frozenset(domains), confidence=confidence, phase=phase, side_query=side_query
    )


def placement(bundle, name):
    if name in bundle.loaded_names:
        return "loaded"
    if name in bundle.deferred_names:
        return "deferred"
    assert name in {d.name for d in bundle.denied}
    return "denied"


# --- table tests: one rule per row -------------------------------------------------------------

RULES = [
    # (case, entry, decision, expected placement)
    ("no policy is denied", entry("t"), decide(), "denied"),
    ("draft policy is denied", entry("t", policy(status="draft")), decide(), "denied"),
    ("rejected policy is denied", entry("t", policy(status="rejected")), decide(), "denied"),
    ("disabled tool is denied", entry("t", policy(), enabled=False), decide(), "denied"),
    ("read tool loads for any intent", entry("t", policy("read")), decide(confidence=0.0), "loaded"),
    ("deferred read tool is deferred", entry("t", policy("list"), deferred=True), decide(), "deferred"),
    ("low confidence gets no create", entry("t", policy("create")), decide("create", confidence=0.3), "denied"),
    ("create needs the create action", entry("t", policy("create")), decide("update"), "denied"),
    ("create with action and confidence", entry("t", policy("create")), decide("create"), "loaded"),
    ("write outside the domains", entry("t", policy("delete", domains=("web",))), decide("delete"), "denied"),
    ("execute needs the execute action", entry("t", policy("execute")), decide("answer"), "denied"),
    ("unphased write not in a workflow", entry("t", policy("update")), decide("update", phase="rf"), "denied"),
    ("phase tool outside its phase", entry("t", policy("update", phases=("rf",))), decide("update"), "denied"),
    ("phase tool in its phase", entry("t", policy("update", phases=("rf",))), decide(phase="rf"), "loaded"),
    ("unsure phase write", entry("t", policy("update", phases=("p",))), decide(phase="p", confidence=.2), "denied"),
    ("unsure phase read", entry("t", policy("read", phases=("p",))), decide(phase="p", confidence=.2), "loaded"),
    ("read tool not in a workflow phase", entry("t", policy("read")), decide(phase="rf"), "denied"),
    ("read tool in a side query", entry("t", policy("read")), decide(phase="p", side_query=True), "loaded"),
    ("high risk without confirmation", entry("t", policy("read", risk="high")), decide(), "denied"),
    ("critical risk without confirmation", entry("t", policy("read", risk="critical")), decide(), "denied"),
    ("high risk with confirmation", entry("t", policy("read", risk="high", confirm=True)), decide(), "loaded"),
]  # fmt: skip


@pytest.mark.parametrize("case,tool,decision,expected", RULES, ids=[row[0] for row in RULES])
def test_bundle_rule(case, tool, decision, expected):
    bundle = build_bundle(decision, [tool])
    assert placement(bundle, tool.name) == expected


def test_denials_carry_a_reason():
    assert denial_reason(entry("t"), decide(), min_confidence=0.6) == "no policy (fail closed)"
    reason = denial_reason(entry("t", policy("create")), decide("create", confidence=0.3), min_confidence=0.6)
    assert reason == "intent unclear (confidence 0.30 < 0.60)"
    # A write tool on a request for something else says so, whatever the confidence ("What is 15 + 27?").
    reason = denial_reason(entry("t", policy("create")), decide("answer", confidence=0.0), min_confidence=0.6)
    assert reason == "create tool, but the request is answer"


def test_loaded_risky_tool_is_marked_for_confirmation():
    bundle = build_bundle(decide("execute", ("infra",)), [entry("restart", policy("execute", risk="critical",
                          domains=("infra",), confirm=True))])  # fmt: skip
    (tool,) = bundle.loaded
    assert tool.requires_confirmation and tool.risk == "critical"


def test_no_rule_reads_substrings_of_names():
    # Names that look read-only or write-ish decide nothing; the policy does.
    catalog = [entry("list_things", policy("delete")), entry("delete_things", policy("list"))]
    bundle = build_bundle(decide(confidence=0.1), catalog)
    assert placement(bundle, "list_things") == "denied"
    assert placement(bundle, "delete_things") == "loaded"


def test_recommended_deferred_tools_are_loaded_and_the_rest_listed_by_domain():
    catalog = [
        entry("tool_search", policy("search", domains=("general",)), always_load=True),
        entry("list_campaigns", policy("list", domains=("loyalty", "campaigns")), deferred=True),
        entry("get_member", policy("read", domains=("members",)), deferred=True),
        entry("list_containers", policy("list", domains=("infrastructure",)), deferred=True),
    ]
    bundle = build_bundle(decide("list", ("campaigns",)), catalog, recommended=["list_campaigns"])
    assert bundle.loaded_names == ("tool_search", "list_campaigns")
    assert bundle.deferred == {"infrastructure": ("list_containers",), "members": ("get_member",)}
    assert "- members: get_member" in bundle.archive and "tool_search" in bundle.archive
    assert bundle.archive_tokens == count_tokens(bundle.archive)
    assert bundle.loaded_schema_tokens == 200
    assert bundle.catalog_schema_tokens == 400
    assert bundle.searchable_names() == {"tool_search", "list_campaigns", "get_member", "list_containers"}


def test_recommending_a_denied_tool_does_not_load_it():
    bundle = build_bundle(decide(confidence=0.1), [entry("drop", policy("delete"))], recommended=["drop"])
    assert placement(bundle, "drop") == "denied"


def test_side_query_adds_at_most_the_bound_of_read_only_tools(settings):
    settings.TOOLHUB_SIDE_QUERY_MAX_TOOLS = 2
    catalog = [entry(f"read_{i}", policy("read"), deferred=True) for i in range(5)]
    catalog.append(entry("set_formula", policy("update", phases=("rf",))))
    bundle = build_bundle(decide(phase="rf", side_query=True), catalog, recommended=["read_3"])
    assert bundle.loaded_names == ("read_3", "read_0", "set_formula")
    assert not bundle.deferred_names
    bounded = [d for d in bundle.denied if "bound of 2" in d.reason]
    assert len(bounded) == 3


def test_bundle_token_cap_defers_what_does_not_fit(settings):
    settings.TOOLHUB_MAX_BUNDLE_SCHEMA_TOKENS = 250
    catalog = [
        entry("tool_search", policy("search"), always_load=True, tokens=200),
        entry("a_small", policy("read"), tokens=50),
        entry("b_big", policy("read"), tokens=100),
    ]
    bundle = build_bundle(decide(), catalog)
    assert bundle.loaded_names == ("tool_search", "a_small")
    assert bundle.deferred_names == ("b_big",)
    assert bundle.loaded_schema_tokens == 250
    assert any("exceed 250" in note for note in bundle.notes)


def test_all_tools_mode_is_staff_and_debug_only_and_still_fails_closed(settings, caplog):
    catalog = [entry("ok", policy("delete")), entry("rogue")]
    staff = User(username="root", is_staff=True)
    settings.DEBUG = False
    with pytest.raises(PermissionDenied):
        build_bundle(decide(), catalog, all_tools_for=staff)
    settings.DEBUG = True
    with pytest.raises(PermissionDenied):
        build_bundle(decide(), catalog, all_tools_for=AnonymousUser())
    with caplog.at_level("WARNING", logger="toolhub.audit"):
        bundle = build_bundle(decide(), catalog, all_tools_for=staff)
    assert bundle.all_tools and bundle.loaded_names == ("ok",)
    assert placement(bundle, "rogue") == "denied"
    assert "all-tools bundle built by root" in caplog.text
    assert build_bundle(decide(), catalog).all_tools is False


# --- properties over random catalogs and decisions ---------------------------------------------

policies = st.one_of(
    st.none(),
    st.builds(
        policy,
        st.sampled_from(OPERATIONS),
        status=st.sampled_from(["active", "draft", "rejected"]),
        risk=st.sampled_from(["low", "medium", "high", "critical"]),
        domains=st.sets(st.sampled_from(["loyalty", "web", "general"]), max_size=2),
        phases=st.lists(st.sampled_from(["p1", "p2"]), max_size=2, unique=True),
        confirm=st.booleans(),
    ),
)
entries = st.builds(
    entry,
    st.text("abcdefghij_", min_size=1, max_size=12),
    policies,
    deferred=st.booleans(),
    always_load=st.booleans(),
    enabled=st.booleans(),
    tokens=st.integers(1, 900),
)
catalogs = st.lists(entries, max_size=25, unique_by=lambda e: e.name)
decisions = st.builds(
    decide,
    st.sampled_from(ACTIONS),
    st.sets(st.sampled_from(["loyalty", "web", "general", "infra"]), max_size=3),
    st.floats(0, 1),
    st.sampled_from(["", "p1", "p2"]),
    st.booleans(),
)


@hypothesis_settings(max_examples=300, deadline=None)
@given(catalogs, decisions, st.lists(st.text("abcdefghij_", min_size=1, max_size=12), max_size=5))
def test_every_tool_is_placed_once_and_unpolicied_tools_are_never_exposed(catalog, decision, recommended):
    bundle = build_bundle(decision, catalog, recommended=recommended)
    loaded, deferred = set(bundle.loaded_names), set(bundle.deferred_names)
    denied = {d.name for d in bundle.denied}
    assert loaded | deferred | denied == {e.name for e in catalog}
    assert not (loaded & deferred or loaded & denied or deferred & denied)
    for tool in catalog:
        if tool.policy is None or tool.policy.status != "active" or not tool.enabled:
            assert tool.name in denied
        if tool.name in loaded | deferred and tool.policy.risk in {"high", "critical"}:
            assert tool.policy.requires_confirmation


write_requests = st.builds(
    decide,
    st.sampled_from(sorted(WRITES)),
    st.just(("loyalty", "web", "general")),
    st.floats(0, 0.59),
    st.sampled_from(["", "p1", "p2"]),
    st.booleans(),
)


@hypothesis_settings(max_examples=300, deadline=None)
@given(catalogs, st.one_of(decisions, write_requests))
def test_low_confidence_never_exposes_a_write_tool(catalog, decision):
    decision = RoutingDecision(decision.action, decision.domains, min(decision.confidence, 0.59), decision.phase)
    bundle = build_bundle(decision, catalog)
    exposed = bundle.searchable_names()
    for tool in catalog:
        if tool.name in exposed:
            assert tool.policy.operation not in WRITES


@hypothesis_settings(max_examples=200, deadline=None)
@given(catalogs, decisions)
def test_loaded_schemas_stay_within_the_cap_except_always_load(catalog, decision):
    bundle = build_bundle(decision, catalog)
    optional = sum(
        t.schema_tokens for t in bundle.loaded if not next(e for e in catalog if e.name == t.name).always_load
    )
    assert optional <= 4000


def test_the_archive_lists_a_bounded_number_of_names_per_domain(settings):
    settings.TOOLHUB_ARCHIVE_MAX_NAMES_PER_DOMAIN = 3
    catalog = [entry(f"read_{i}", policy("read"), deferred=True) for i in range(5)]
    bundle = build_bundle(decide(), catalog)
    assert "- loyalty: read_0, read_1, read_2 and 2 more (find them with tool_search)" in bundle.archive
    assert len(bundle.deferred_names) == 5  # still all searchable


def test_the_names_a_decision_allows_are_kept_per_catalog_and_follow_the_gate_and_the_catalog(settings):
    settings.TOOLHUB_MIN_CONFIDENCE = 0.9
    catalog = (
        entry("read_thing", policy()),
        entry("make_thing", policy("create")),
        entry("other_domain", policy("create", domains=("x",))),
    )
    confident, unsure = decide("create", confidence=0.95), decide("create", confidence=0.5)

    assert allowed_names(confident, catalog) == {"read_thing", "make_thing"}
    assert allowed_names(decide("create", confidence=0.99), catalog) is allowed_names(confident, catalog)  # kept
    assert allowed_names(unsure, catalog) == {"read_thing"}
    assert allowed_names(decide("create", domains=("x",), confidence=0.95), catalog) == {"read_thing", "other_domain"}
    settings.TOOLHUB_MIN_CONFIDENCE = 0.97
    assert allowed_names(confident, catalog) == {"read_thing"}
    another = (*catalog[:1], entry("make_thing", policy("create", status="draft")))
    assert allowed_names(decide("create", confidence=0.99), another) == {"read_thing"}  # a new catalog, read anew
