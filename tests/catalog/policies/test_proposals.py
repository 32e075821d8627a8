"""The proposer: operation, risk, domains and confirmation of a tool awaiting review, each with its evidence."""

from hypothesis import given
from hypothesis import strategies as st

from catalog.models import Operation, Risk
from catalog.policies.proposals import Proposal, ReviewedIndex, ReviewedTool, ToolFacts, propose_policy

PAGED = {"type": "object", "properties": {"page": {"type": "integer"}, "member_id": {"type": "string"}}}
QUERY = {"type": "object", "properties": {"query": {"type": "string"}}}
EMPTY = ReviewedIndex([])


def propose(name: str, annotations=None, *, schema=None, index=EMPTY, **facts) -> Proposal:
    return propose_policy(ToolFacts(name=name, input_schema=schema or {}, annotations=annotations, **facts), index)


def loyalty_index() -> ReviewedIndex:
    return ReviewedIndex([
        ReviewedTool("get_member", frozenset({"loyalty", "members"}), "A loyalty member's profile.", PAGED, "loyalty"),
        ReviewedTool("update_member", frozenset({"loyalty", "members"}), "Change a member's profile.", {}, "loyalty"),
        ReviewedTool("get_reward", frozenset({"loyalty", "rewards"}), "One reward of the catalogue.", {}, "loyalty"),
        ReviewedTool("restart_service", frozenset({"infrastructure"}), "Restart a system service.", {}, ""),
    ])  # fmt: skip


def test_verbs_propose_the_operation_and_its_risk():
    cases = {
        "list_orders": ("list", "low"),
        "search_orders": ("search", "low"),
        "get_order": ("read", "low"),
        "create_order": ("create", "medium"),
        "update_order": ("update", "medium"),
        "delete_order": ("delete", "high"),
        "send_invoice": ("execute", "medium"),
        "getOrderStatus": ("read", "low"),
        "web_search": ("search", "low"),
    }
    for name, expected in cases.items():
        proposal = propose(name)
        assert (proposal.operation, proposal.risk) == expected, name
    assert "name starts with delete_ (delete)" in propose("delete_order").evidence
    assert "name ends with _search (search)" in propose("web_search").evidence


def test_the_schema_chooses_among_read_only_kinds():
    assert propose("get_member_history", schema=PAGED).operation == Operation.LIST
    assert "schema has paging fields (page): list" in propose("get_member_history", schema=PAGED).evidence
    assert propose("members", {"readOnlyHint": True}, schema=QUERY).operation == Operation.SEARCH
    # A schema alone never makes a tool read-only: read-only tools are offered for any request.
    assert propose("members", schema=PAGED).operation == Operation.EXECUTE


def test_annotations_take_precedence_over_the_verb():
    read_only = propose("delete_order", {"readOnlyHint": True})
    assert (read_only.operation, read_only.risk) == ("read", "medium")
    assert "readOnlyHint: true" in read_only.evidence
    assert "the name's verb delete writes though readOnlyHint says not: risk medium" in read_only.evidence
    destructive = propose("get_order", {"destructiveHint": True})
    assert (destructive.operation, destructive.risk, destructive.requires_confirmation) == ("delete", "high", True)
    assert "destructiveHint: true" in destructive.evidence
    writes = propose("get_order", {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True})
    assert (writes.operation, writes.risk) == ("update", "medium")
    assert propose("frobnicate", {"readOnlyHint": False, "destructiveHint": False}).operation == Operation.EXECUTE


def test_destructive_keeps_the_names_write_verb_at_high_risk():
    proposal = propose("update_ledger", {"readOnlyHint": False, "destructiveHint": True})
    assert (proposal.operation, proposal.risk, proposal.requires_confirmation) == ("update", "high", True)


def test_an_unknown_tool_is_proposed_conservatively():
    for proposal in (propose("frobnicate_widgets"), propose("x"), propose("_")):
        assert (proposal.operation, proposal.risk, proposal.requires_confirmation) == ("execute", "high", True)
        assert proposal.domains == ()
        assert any("taken as a write that may destroy (the MCP default)" in line for line in proposal.evidence)
        assert "no reviewed tool is near: no domain proposed" in proposal.evidence


def test_hints_that_are_not_booleans_are_ignored_and_said_so():
    proposal = propose("frobnicate", {"readOnlyHint": "yes", "destructiveHint": None, "idempotentHint": [1]})
    assert (proposal.operation, proposal.risk) == ("execute", "high")
    assert "readOnlyHint is not a boolean ('yes'): ignored" in proposal.evidence
    assert propose("get_order", "not a mapping").operation == Operation.READ


def test_bulk_and_hard_to_undo_verbs_raise_the_risk():
    bulk = propose("bulk_issue_vouchers")
    assert (bulk.operation, bulk.risk) == ("execute", "high")
    assert bulk.evidence[:2] == ("name starts with bulk_: acts on many records at once",
                                 "name continues with issue_ (execute)")  # fmt: skip
    assert propose("transfer_points").risk == Risk.HIGH
    assert propose("award_points").risk == Risk.MEDIUM


def test_domains_come_from_the_nearest_reviewed_tools_and_the_server():
    proposal = propose("get_member_badges", {"readOnlyHint": True}, schema=PAGED, index=loyalty_index(),
                       description="Badges a loyalty member earned.", server="loyalty")  # fmt: skip
    assert proposal.domains == ("loyalty", "members")
    assert proposal.evidence[-2].startswith("nearest reviewed tools: get_member (loyalty, members), update_member")
    assert proposal.evidence[-1] == "server loyalty: most of its 3 reviewed tools have loyalty, members"
    # A tool of a new server with no near neighbour gets no domain, and says so.
    stranger = propose("get_weather", index=loyalty_index(), description="Weather at a place.", server="weather")
    assert stranger.domains == ()
    assert "server weather: none of its tools reviewed, no common domain" in stranger.evidence


def test_the_upstream_name_is_read_not_the_prefixed_catalog_name():
    proposal = propose("crm__delete_contact", upstream_name="delete_contact")
    assert (proposal.operation, proposal.risk) == ("delete", "high")


def test_a_draft_policy_keeps_its_operation_and_domains_and_never_lowers_the_risk():
    draft = {"operation": "update", "risk": "high", "domains": ["members"], "requires_confirmation": True,
             "workflow_phases": [], "aliases": [], "status": "draft"}  # fmt: skip
    proposal = propose("get_member_notes", {"readOnlyHint": True}, draft=draft, index=loyalty_index())
    assert (proposal.operation, proposal.risk, proposal.domains, proposal.requires_confirmation) == (
        "update", "high", ("members",), True)  # fmt: skip
    assert "its draft policy: update, risk high, domains members" in proposal.evidence
    assert "kept the draft's operation update over read" in proposal.evidence


def test_a_huge_description_and_a_malformed_schema_are_read_safely():
    index = loyalty_index()
    proposal = propose("get_member_card", schema={"properties": ["not", "a", "mapping"]}, index=index,
                       description="member " * 100_000)  # fmt: skip
    assert proposal.operation == Operation.READ and "members" in proposal.domains


ANNOTATION = st.one_of(st.booleans(), st.none(), st.text(max_size=5), st.integers())


@given(
    name=st.from_regex(r"[A-Za-z0-9_-]{1,30}", fullmatch=True),
    hints=st.dictionaries(
        st.sampled_from(["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]), ANNOTATION
    ),  # fmt: skip
)
def test_every_proposal_is_a_policy_the_bundle_can_offer(name, hints):
    """Valid choices, high risk always with confirmation (the bundle denies it otherwise), a destructive hint never
    below high, evidence always given."""
    proposal = propose(name, hints)
    assert proposal.operation in Operation.values and proposal.risk in Risk.values
    assert proposal.requires_confirmation or proposal.risk not in ("high", "critical")
    if hints.get("destructiveHint") is True and hints.get("readOnlyHint") is not True:
        assert proposal.risk == Risk.HIGH
    assert proposal.evidence
