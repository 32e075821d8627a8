"""The policy review queue (/policies/-/review/): proposals with evidence, bulk accept and reject with one note,
whole or nothing, four eyes kept, permissions on every method."""

import pytest
from django.urls import reverse

from catalog.models import Domain, McpServer, PolicyChangeRequest, PolicyVersion, Tool, ToolPolicy
from catalog.policies import review
from catalog.policies.review import Decision, accept_proposals, queue_fingerprint, review_queue
from catalog.policies.versions import PolicyConflict
from tests.support.builders import OBJECT_SCHEMA, make_policy, make_tool, make_user

pytestmark = pytest.mark.django_db

URL = "/policies/-/review/"
PAGED = {"type": "object", "properties": {"page": {"type": "integer"}, "member_id": {"type": "string"}}}


@pytest.fixture
def catalog():
    """Reviewed loyalty tools, and three new ones of the loyalty MCP server awaiting review."""
    for name, domains in (("get_member", ("loyalty", "members")), ("update_member", ("loyalty", "members")),
                          ("get_reward", ("loyalty", "rewards"))):  # fmt: skip
        make_policy(make_tool(name, description=f"{name.replace('_', ' ')} of the loyalty programme."),
                    domains=domains, operation="read")  # fmt: skip
    make_tool("get_member_badges", description="Badges a loyalty member earned.", input_schema=PAGED,
              annotations={"readOnlyHint": True})  # fmt: skip
    make_tool("update_member_email", description="Change a loyalty member's email.",
              annotations={"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True})  # fmt: skip
    make_tool("erase_member", description="Erase a loyalty member and their history.",
              annotations={"destructiveHint": True})  # fmt: skip
    served = ["get_member", "update_member", "get_reward", "get_member_badges", "update_member_email", "erase_member"]
    McpServer.objects.create(name="loyalty", command="true", tool_names=served)


def signed_in(client, role, username=None):
    client.force_login(make_user(username or role, role=role))
    return client


def tool_id(name: str) -> int:
    return Tool.objects.get(name=name).pk


def post(client, *names, decision="accept", note="first review of the badges", **fields):
    data = {"decision": decision, "note": note, "tools": [tool_id(name) for name in names]}
    return client.post(URL, data | fields)


def policy_of(name: str) -> ToolPolicy | None:
    return ToolPolicy.objects.filter(tool__name=name).first()


# --- permissions --------------------------------------------------------------------------


def test_anonymous_is_sent_to_login_and_a_viewer_reads_the_queue_but_cannot_decide(client, catalog):
    for response in (client.get(URL), client.post(URL, {"decision": "accept"})):
        assert response.status_code == 302 and response.url.startswith("/login/")
    signed_in(client, "viewer")
    page = client.get(URL).content.decode()
    assert "get_member_badges" in page and "readOnlyHint: true" in page
    assert 'name="tools"' not in page and 'name="note"' not in page and "needs the operator role" in page
    assert post(client, "get_member_badges").status_code == 403
    assert not ToolPolicy.objects.filter(tool__name="get_member_badges").exists()


def test_an_account_without_a_role_gets_403(client, catalog, django_user_model):
    client.force_login(django_user_model.objects.create_user("plain"))
    assert client.get(URL).status_code == 403


# --- the queue --------------------------------------------------------------------------


def test_the_queue_lists_tools_awaiting_review_with_their_proposal_and_evidence(client, catalog):
    signed_in(client, "operator")
    page = client.get(URL).content.decode()
    assert "3 tools await review" in page
    badges = page.split('id="review-get_member_badges"')[1].split("</tr>")[0]
    assert 'value="list" selected' in badges and 'value="low" selected' in badges
    assert 'value="loyalty, members"' in badges
    assert "readOnlyHint: true" in badges and "schema has paging fields (page): list" in badges
    assert "nearest reviewed tools: get_member (loyalty, members)" in badges
    assert "server loyalty: most of its 3 reviewed tools have loyalty" in badges
    erase = page.split('id="review-erase_member"')[1].split("</tr>")[0]
    assert 'value="delete" selected' in erase and 'value="high" selected' in erase and "required" in erase
    assert "Accepting asks a second operator" in erase
    assert "get_member</a>" not in page.split("Proposals")[1]  # reviewed tools are not in the queue


def test_the_policies_page_and_the_servers_sync_link_to_the_queue(client, catalog):
    signed_in(client, "viewer")
    policies = client.get("/policies/").content.decode()
    assert f'href="{URL}"' in policies and "3 tools await review" in policies
    McpServer.objects.filter(name="loyalty").update(sync_phase="done", sync_report={"new": ["get_member_badges"]})
    server = client.get(reverse("mcp-server-detail", args=["loyalty"])).content.decode()
    assert f'href="{URL}?server=loyalty"' in server
    only_loyalty = client.get(URL, {"server": "loyalty"}).content.decode()
    make_tool("unrelated_tool")
    assert "unrelated_tool" not in client.get(URL, {"server": "loyalty"}).content.decode()
    assert "3 tools await review" in only_loyalty and "from the MCP server loyalty" in only_loyalty


# --- accept, edit, reject ----------------------------------------------------------------


def test_accepting_selected_proposals_writes_active_versions_with_author_and_note(client, catalog):
    signed_in(client, "operator", "ana")
    response = post(client, "get_member_badges", "update_member_email", note="badges and email reviewed")
    assert response.status_code == 302 and response.url == URL
    badges, email = policy_of("get_member_badges"), policy_of("update_member_email")
    assert (badges.status, badges.operation, badges.risk, badges.version) == ("active", "list", "low", 1)
    assert (email.status, email.operation, email.risk) == ("active", "update", "medium")
    assert sorted(d.name for d in badges.domains.all()) == ["loyalty", "members"]
    version = PolicyVersion.objects.get(policy=badges)
    assert (version.author.username, version.note, version.snapshot["status"]) == (
        "ana", "badges and email reviewed", "active")  # fmt: skip
    assert policy_of("erase_member") is None  # not selected: still denied
    page = client.get(URL).content.decode()
    assert "Accepted 2 policies" in page and "1 tool awaits review" in page


def test_a_rows_edits_are_what_is_accepted(client, catalog):
    Domain.objects.create(name="profiles", title="Profiles")
    signed_in(client, "operator")
    pk = tool_id("update_member_email")
    edits = {f"t{pk}-operation": "execute", f"t{pk}-risk": "low", f"t{pk}-domains": "profiles, loyalty",
             f"t{pk}-base_version": "0"}  # fmt: skip
    assert post(client, "update_member_email", **edits).status_code == 302
    policy = policy_of("update_member_email")
    assert (policy.operation, policy.risk, policy.requires_confirmation) == ("execute", "low", False)
    assert sorted(d.name for d in policy.domains.all()) == ["loyalty", "profiles"]


def test_an_unknown_domain_in_a_selected_row_is_refused_beside_it_and_nothing_is_saved(client, catalog):
    signed_in(client, "operator")
    pk = tool_id("update_member_email")
    edits = {f"t{pk}-operation": "update", f"t{pk}-risk": "medium", f"t{pk}-domains": "loyalty, <b>nope</b>",
             f"t{pk}-base_version": "0"}  # fmt: skip
    response = post(client, "get_member_badges", "update_member_email", **edits)
    page = response.content.decode()
    assert response.status_code == 400 and "1 selected row needs fixing" in page
    row = page.split('id="review-update_member_email"')[1].split("</tr>")[0]
    assert "No such domain: &lt;b&gt;nope&lt;/b&gt;" in row and "<b>nope" not in page
    assert 'value="loyalty, &lt;b&gt;nope&lt;/b&gt;"' in row  # the edit is kept, inert
    assert f'id="select-{pk}" checked' in page
    assert not ToolPolicy.objects.exists() or policy_of("get_member_badges") is None


def test_rejecting_denies_the_tools_with_the_note(client, catalog):
    make_policy(make_tool("merge_members"), domains=("members",), operation="update", risk="high",
                requires_confirmation=True, status="draft")  # fmt: skip
    signed_in(client, "operator", "ana")
    assert post(client, "erase_member", "merge_members", decision="reject", note="not for agents").status_code == 302
    erase, merge = policy_of("erase_member"), policy_of("merge_members")
    assert (erase.status, erase.operation, erase.version) == ("rejected", "delete", 1)
    assert (merge.status, merge.operation, merge.risk, merge.version) == ("rejected", "update", "high", 2)
    assert merge.versions.get(number=2).note == "not for agents" and not PolicyChangeRequest.objects.exists()
    page = client.get(URL).content.decode()
    assert "Rejected 2 tools" in page and "status denied" in page and "erase_member" not in page.split("Proposals")[1]
    assert "denied" in client.get("/policies/erase_member/").content.decode()


@pytest.mark.parametrize(
    ("note", "error"),
    [
        ("", "A note is required"),
        ("   ", "A note is required"),
        ("x" * 100_000, "at most 500 characters"),
        ("line one\nline two", "without control characters"),
        ("bell\x07", "without control characters"),
    ],
)
def test_the_note_is_required_one_line_and_bounded(client, catalog, note, error):
    signed_in(client, "operator")
    response = post(client, "get_member_badges", note=note)
    assert response.status_code == 400 and error in response.content.decode()
    assert not ToolPolicy.objects.filter(tool__name="get_member_badges").exists()


def test_nothing_selected_and_an_unknown_decision_are_refused(client, catalog):
    signed_in(client, "operator")
    assert "Select at least one tool" in client.post(URL, {"decision": "accept", "note": "n"}).content.decode()
    assert post(client, "get_member_badges", decision="approve").status_code == 400
    assert post(client, "get_member_badges", tools=["not-a-number"]).status_code == 400
    assert not ToolPolicy.objects.filter(tool__name="get_member_badges").exists()


def test_html_in_a_note_and_a_description_is_stored_as_text_and_shown_inert(client, catalog):
    make_tool("get_member_card", description='<script>alert("x")</script><img src=x onerror=alert(1)> a card',
              annotations={"readOnlyHint": "<b>yes</b>"})  # fmt: skip
    signed_in(client, "operator")
    page = client.get(URL).content.decode()
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page and "<img src=x" not in page
    assert "readOnlyHint is not a boolean (&#x27;&lt;b&gt;yes&lt;/b&gt;&#x27;): ignored" in page
    note = '<em onclick="x()">checked</em>'
    assert post(client, "get_member_card", note=note).status_code == 302
    version = PolicyVersion.objects.get(policy__tool__name="get_member_card")
    assert version.note == note
    history = client.get("/policies/get_member_card/").content.decode()
    assert "&lt;em onclick=&quot;x()&quot;&gt;checked&lt;/em&gt;" in history and "<em onclick" not in history


# --- four eyes ---------------------------------------------------------------------------


def test_a_high_risk_proposal_waits_for_a_second_operator_and_the_rest_applies(client, catalog):
    signed_in(client, "operator", "ana")
    response = post(client, "get_member_badges", "erase_member", note="reviewed")
    assert response.status_code == 302
    assert policy_of("get_member_badges").status == "active"
    assert policy_of("erase_member") is None  # still denied
    change = PolicyChangeRequest.objects.get()
    assert (change.tool.name, change.status, change.requested_by.username, change.base_version) == (
        "erase_member", "pending", "ana", 0)  # fmt: skip
    assert change.draft["status"] == "active" and change.draft["risk"] == "high"
    assert change.reasons == ["activates a high-risk policy accepted from the review queue"]
    page = client.get(URL).content.decode()
    assert "1 wait for a second operator" in page and "Waiting for a second operator: asked by ana" in page
    assert f'id="select-{tool_id("erase_member")}"' not in page  # not decidable again until decided
    assert post(client, "erase_member").status_code == 400  # a stale or forged selection of it
    # Who accepted cannot approve it; another operator can.
    url = f"/policies/erase_member/changes/{change.pk}/"
    assert client.post(url, {"decision": "approve"}).status_code == 403
    signed_in(client, "operator", "ben")
    assert client.post(url, {"decision": "approve"}).status_code == 302
    erase = policy_of("erase_member")
    assert (erase.status, erase.risk, erase.requires_confirmation) == ("active", "high", True)
    assert erase.versions.get().note == "reviewed (approved by ben)"


def test_lowering_a_high_risk_proposal_is_the_operators_own_policy(client, catalog):
    """As in the editor, a first policy an operator sets at a risk four eyes does not cover applies at once."""
    signed_in(client, "operator")
    pk = tool_id("erase_member")
    edits = {f"t{pk}-operation": "delete", f"t{pk}-risk": "medium", f"t{pk}-domains": "loyalty",
             f"t{pk}-base_version": "0"}  # fmt: skip
    assert post(client, "erase_member", **edits).status_code == 302
    erase = policy_of("erase_member")
    assert (erase.status, erase.risk, erase.requires_confirmation) == ("active", "medium", True)  # as proposed


def test_accepting_a_proposal_that_loosens_a_draft_policy_waits(client, settings, catalog):
    settings.TOOLHUB_FOUR_EYES_RISKS = ["medium"]
    policy = make_policy(make_tool("merge_members"), domains=("members",), operation="update", risk="medium",
                         requires_confirmation=True, status="draft")  # fmt: skip
    signed_in(client, "operator")
    edits = {f"t{policy.tool_id}-operation": "update", f"t{policy.tool_id}-risk": "low",
             f"t{policy.tool_id}-domains": "members, loyalty", f"t{policy.tool_id}-base_version": "1"}  # fmt: skip
    assert post(client, "merge_members", **edits).status_code == 302
    change = PolicyChangeRequest.objects.get()
    assert change.reasons == ["lowers the risk from medium to low", "adds the domain loyalty"]
    policy.refresh_from_db()
    assert (policy.status, policy.version) == ("draft", 1)


# --- whole or nothing ----------------------------------------------------------------------


def test_a_policy_decided_since_the_page_was_shown_fails_the_whole_batch(client, catalog):
    signed_in(client, "operator")
    make_policy(Tool.objects.get(name="update_member_email"), operation="update")  # someone else decided it
    pk = tool_id("update_member_email")
    response = post(client, "get_member_badges", "update_member_email", note="stale page",
                    **{f"t{pk}-operation": "update", f"t{pk}-risk": "medium", f"t{pk}-domains": "",
                       f"t{pk}-base_version": "0"})  # fmt: skip
    assert response.status_code == 400 and "no longer awaits review" in response.content.decode()
    assert policy_of("get_member_badges") is None


def test_a_conflict_midway_saves_nothing_and_says_so(client, catalog, monkeypatch):
    signed_in(client, "operator")
    real, calls = review.save_policy_draft, []

    def conflict_on_second(tool, **kwargs):
        calls.append(tool.name)
        if len(calls) == 2:
            raise PolicyConflict(f"The policy of {tool.name} changed to version 1 since you opened it.")
        return real(tool, **kwargs)

    monkeypatch.setattr(review, "save_policy_draft", conflict_on_second)
    response = post(client, "get_member_badges", "update_member_email")
    assert response.status_code == 409 and "Nothing was saved" in response.content.decode()
    assert len(calls) == 2 and not ToolPolicy.objects.filter(tool__name__in=calls).exists()


def many_tools(count: int) -> list[Tool]:
    Tool.objects.bulk_create(
        Tool(
            name=f"get_item_{i:04d}",
            description="Read one item of the warehouse.",
            input_schema=OBJECT_SCHEMA,
            annotations={"readOnlyHint": True},
            schema_hash=str(i),
            schema_tokens=20,
        )  # fmt: skip
        for i in range(count)
    )
    return list(Tool.objects.filter(name__startswith="get_item_").order_by("pk"))


# 1,500 policy saves (~12 s): run on PostgreSQL in the integration stage, the database a deployment rolls back.
@pytest.mark.postgres
def test_accepting_1000_proposals_is_whole_or_nothing(client, monkeypatch):
    tools = many_tools(1000)
    signed_in(client, "operator", "ana")
    page = client.get(URL)
    assert "1000 tools await review" in page.content.decode() and page.context["page"].paginator.num_pages == 10
    fingerprint = page.context["form"]["queue"].value()
    real, calls = review.save_policy_draft, []

    def fail_midway(tool, **kwargs):
        calls.append(tool.name)
        if len(calls) == 500:
            raise RuntimeError("the database went away")
        return real(tool, **kwargs)

    monkeypatch.setattr(review, "save_policy_draft", fail_midway)
    with pytest.raises(RuntimeError):
        client.post(URL, {"decision": "accept", "note": "all items", "everything": "on", "queue": fingerprint})
    assert len(calls) == 500
    assert not ToolPolicy.objects.exists() and not PolicyVersion.objects.exists()

    monkeypatch.setattr(review, "save_policy_draft", real)
    response = client.post(URL, {"decision": "accept", "note": "all items", "everything": "on", "queue": fingerprint})
    assert response.status_code == 302
    assert ToolPolicy.objects.filter(status="active").count() == 1000 == PolicyVersion.objects.count()
    assert set(PolicyVersion.objects.values_list("note", "author__username")) == {("all items", "ana")}
    assert policy_of(tools[-1].name).operation == "read"


def test_everything_is_refused_when_the_queue_changed_since_the_page(client, catalog):
    signed_in(client, "operator")
    fingerprint = queue_fingerprint(review_queue())
    make_tool("list_member_badges", annotations={"readOnlyHint": True})  # a sync brought a new tool meanwhile
    response = client.post(URL, {"decision": "accept", "note": "all", "everything": "on", "queue": fingerprint})
    assert response.status_code == 400 and "The queue changed since you opened it" in response.content.decode()
    assert not ToolPolicy.objects.filter(tool__name__in=["get_member_badges", "list_member_badges"]).exists()


def test_the_service_refuses_a_tool_twice_and_a_tool_with_a_waiting_change(catalog):
    ana = make_user("ana")
    items = {item.tool.name: item for item in review_queue()}
    badges = items["get_member_badges"]
    twice = [Decision(badges.tool, badges.draft(), 0)] * 2
    with pytest.raises(review.ReviewRefused, match="twice"):
        accept_proposals(twice, user=ana, note="n")
    erase = items["erase_member"]
    accept_proposals([Decision(erase.tool, erase.draft(), 0)], user=ana, note="n")
    with pytest.raises(review.ReviewRefused, match="already waits for a second operator"):
        review.reject_tools([Decision(badges.tool, badges.draft(), 0), Decision(erase.tool, erase.draft(), 0)],
                            user=ana, note="n")  # fmt: skip
    assert policy_of("get_member_badges") is None
