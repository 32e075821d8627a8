"""Demo Loyalty tool builders and the list/get/search/create/update/delete tools of each entity."""

from __future__ import annotations

from typing import Any

from . import loyalty_schemas as s

# Operation and default risk of each CRUD verb.
_CRUD = {
    "list": ("list", "low"),
    "get": ("read", "low"),
    "search": ("search", "low"),
    "create": ("create", "medium"),
    "update": ("update", "medium"),
    "delete": ("delete", "high"),
}
RULE_PHASES = ["rule_draft", "rule_formula", "rule_criteria", "rule_submit"]

CAMPAIGNS = ["loyalty", "campaigns"]
MEMBERS = ["loyalty", "members"]
REWARDS = ["loyalty", "rewards"]


def policy(
    operation: str,
    risk: str,
    domains: list[str],
    aliases: list[str],
    *,
    phases: tuple[str, ...] | list[str] = (),
    confirm: bool | None = None,
    status: str = "active",
) -> dict[str, Any]:
    return {
        "domains": list(domains),
        "operation": operation,
        "risk": risk,
        "workflow_phases": list(phases),
        "aliases": list(aliases),
        "requires_confirmation": risk in ("high", "critical") if confirm is None else confirm,
        "status": status,
    }


def mcp_tool(name: str, description: str, schema: s.Schema, tool_policy: dict[str, Any] | None) -> dict[str, Any]:
    """One tool dict in the shape the loader and the MCP server expect."""
    return {
        "name": name,
        "description": description,
        "input_schema": schema,
        "source": "mcp",
        "is_mcp": True,
        "always_load": False,
        "should_defer": True,
        "policy": tool_policy,
    }


def _aliases(verb: str, label: str, plural: str, vi: str) -> list[str]:
    return {
        "list": [f"list {plural}", f"show all {plural}", f"danh sách {vi}"],
        "get": [f"{label} details", f"show {label}", f"xem {vi}"],
        "search": [f"find {label}", f"look up {plural}", f"tìm {vi}"],
        "create": [f"new {label}", f"add {label}", f"tạo {vi}"],
        "update": [f"edit {label}", f"change {label}", f"cập nhật {vi}"],
        "delete": [f"remove {label}", f"xóa {vi}"],
    }[verb]


def _crud(
    entity: str,
    plural: str,
    vi: str,
    domains: list[str],
    docs: dict[str, str],
    schemas: dict[str, s.Schema],
    extra_aliases: dict[str, list[str]] | None = None,
) -> list[dict[str, Any]]:
    """The six list/get/search/create/update/delete tools of one entity."""
    label = entity.replace("_", " ")
    plural_label = plural.replace("_", " ")
    names = {
        "list": f"list_{plural}",
        "get": f"get_{entity}",
        "search": f"search_{plural}",
        "create": f"create_{entity}",
        "update": f"update_{entity}",
        "delete": f"delete_{entity}",
    }
    tools = []
    for verb, name in names.items():
        operation, risk = _CRUD[verb]
        aliases = _aliases(verb, label, plural_label, vi) + (extra_aliases or {}).get(verb, [])
        tools.append(mcp_tool(name, docs[verb], schemas[verb], policy(operation, risk, domains, aliases)))
    return tools


def _schemas(
    entity: str,
    props: dict[str, s.Schema],
    required: list[str],
    filters: dict[str, s.Schema],
    sort: list[str],
    matched: str,
) -> dict[str, s.Schema]:
    return {
        "list": s.list_schema(filters, sort, sort[0]),
        "get": s.get_schema(entity),
        "search": s.search_schema(matched, filters, sort),
        "create": s.create_schema(props, required),
        "update": s.update_schema(entity, {k: v for k, v in props.items() if k not in ("campaign_id", "member_id")}),
        "delete": s.delete_schema(entity),
    }


def status_filter(values: list[str]) -> dict[str, s.Schema]:
    return {"status": s.enum("Only items in this state.", values)}


# --- entity CRUD ---------------------------------------------------------------

_campaign = _crud(
    "campaign",
    "campaigns",
    "chiến dịch",
    CAMPAIGNS,
    {
        "list": "List loyalty campaigns page by page, filtered by status, type or channel. "
        "Use it to browse campaigns; use search_campaigns for a name or tag.",
        "get": "Get one campaign with its period, budget, audience and rule count. "
        "Use it before editing or activating a campaign.",
        "search": "Find campaigns by free text over name, description and tags. "
        "Use it when the user names a campaign but has no campaign id.",
        "create": "Create a campaign in draft with its period, budget and audience. "
        "Add rules afterwards; a campaign without rules awards nothing.",
        "update": "Change fields of a campaign; omitted fields stay as they are. "
        "Period and budget of an active campaign can only be extended.",
        "delete": "Delete a draft or archived campaign and its rules. "
        "Active campaigns must be paused or archived first.",
    },
    _schemas(
        "campaign",
        s.campaign_properties(),
        ["name", "type", "period"],
        {
            **status_filter(["draft", "scheduled", "active", "paused", "ended", "archived"]),
            "type": s.enum("Only this mechanic.", ["earn", "burn", "tier_bonus", "referral", "birthday", "seasonal"]),
            "channel": s.enum("Only campaigns on this channel.", s.CHANNELS),
            "active_on": s.string("Only campaigns running on this date.", format="date"),
        },
        ["start", "name", "budget_used", "participants"],
        "campaign name, description and tags",
    ),
    {"list": ["chiến dịch", "promotions", "chương trình khuyến mãi"], "create": ["set up a promotion"]},
)

_rule = _crud(
    "rule",
    "rules",
    "quy tắc tích điểm",
    CAMPAIGNS,
    {
        "list": "List earning rules across campaigns, filtered by campaign, status or formula type. "
        "Use list_campaign_rules for one campaign in priority order.",
        "get": "Get one rule with its full criteria, formula and limits. "
        "Use it to explain why a transaction did or did not earn points.",
        "search": "Find rules by free text over name and description. "
        "Use it when the user describes a rule but has no rule id.",
        "create": "Create a complete CampaignRule in one call: criteria, a formula whose type picks its "
        "fields, and limits. Use the create_rule_draft workflow while details are still being collected.",
        "update": "Change a rule's criteria, formula, limits or status; omitted fields stay as they are. "
        "A new formula replaces the old one entirely, so send all fields of its type.",
        "delete": "Delete a rule. Points already awarded by it are kept.",
    },
    _schemas(
        "rule",
        {"campaign_id": s.entity_id("campaign", "Campaign the rule belongs to."), **s.rule_properties()},
        ["campaign_id", "name", "criteria", "formula"],
        {
            "campaign_id": s.entity_id("campaign", "Only rules of this campaign."),
            **status_filter(["draft", "active", "inactive"]),
            "formula_type": s.enum(
                "Only this formula type.", [v["properties"]["type"]["const"] for v in s.formula()["oneOf"]]
            ),
        },
        ["priority", "name", "created_at"],
        "rule name and description",
    ),
    {"create": ["tạo quy tắc", "earning rule", "cách tính điểm"]},
)

_reward = _crud(
    "reward",
    "rewards",
    "phần thưởng",
    REWARDS,
    {
        "list": "List rewards in the catalog, filtered by category, tier or stock state. "
        "Use it to show what members can redeem.",
        "get": "Get one reward with points cost, stock and eligibility. Use it before redeeming or restocking.",
        "search": "Find rewards by free text over name and description. "
        "Use it when the user describes a gift but has no reward id.",
        "create": "Add a reward to the catalog with its points cost, stock and fulfilment. "
        "It becomes redeemable when its availability starts.",
        "update": "Change a reward's cost, stock settings, availability or eligibility. "
        "Cost changes apply to new redemptions only.",
        "delete": "Remove a reward from the catalog. Open redemptions are still fulfilled.",
    },
    _schemas(
        "reward",
        s.reward_properties(),
        ["name", "category", "points_cost", "fulfillment"],
        {
            "category": s.enum("Only this kind.", ["merchandise", "voucher", "experience", "donation", "service"]),
            "tier_id": s.entity_id("tier", "Only rewards this tier may redeem."),
            "in_stock": s.boolean("Only rewards with stock left."),
            "max_points_cost": s.integer("Only rewards costing at most this.", minimum=1),
        },
        ["points_cost", "name", "stock", "redemptions"],
        "reward name and description",
    ),
    {"list": ["đổi quà", "gift catalog", "quà tặng"]},
)

_member = _crud(
    "member",
    "members",
    "khách hàng thành viên",
    MEMBERS,
    {
        "list": "List loyalty members page by page, filtered by tier, status or join date. "
        "Use search_members to find one person by name, phone or email.",
        "get": "Get one member's profile, tier, consents and points summary. Use it before any change to that member.",
        "search": "Find members by name, phone, email or external id. "
        "Use it to resolve a person the user mentions into a member id.",
        "create": "Register a new member with profile and consents; data_processing consent is required. "
        "The member starts in the entry tier unless tier_id is given.",
        "update": "Change a member's profile, consents or attributes; omitted fields stay as they are. "
        "Use upgrade_member_tier or downgrade_member_tier to change the tier.",
        "delete": "Delete a member and anonymise their history; their points balance is forfeited. "
        "Use only on a verified erasure request.",
    },
    _schemas(
        "member",
        s.member_properties(),
        ["profile", "consents"],
        {
            "tier_id": s.entity_id("tier", "Only members in this tier."),
            **status_filter(["active", "suspended", "closed"]),
            "joined_after": s.string("Only members who joined on or after this date.", format="date"),
        },
        ["joined_at", "points_balance", "last_purchase_at", "name"],
        "member name, phone, email and external id",
    ),
    {"list": ["hội viên", "khách hàng"], "search": ["tìm khách hàng", "look up customer"]},
)

_tier = _crud(
    "tier",
    "tiers",
    "hạng thành viên",
    MEMBERS,
    {
        "list": "List membership tiers in rank order with their thresholds. "
        "Use it to explain how members move up the ladder.",
        "get": "Get one tier with qualification thresholds, multiplier, benefits and retention. "
        "Use get_tier_benefits for a member-facing summary.",
        "search": "Find tiers by name or code. Use it when the user names a tier loosely.",
        "create": "Add a tier to the ladder with thresholds, multiplier and benefits. "
        "Members are re-evaluated at the next nightly tier run.",
        "update": "Change a tier's thresholds, benefits or retention; omitted fields stay as they are. "
        "Threshold changes take effect at the next nightly tier run.",
        "delete": "Delete a tier that has no members; move members out first. "
        "The entry tier (rank 1) cannot be deleted.",
    },
    _schemas(
        "tier",
        s.tier_properties(),
        ["name", "code", "rank", "qualification"],
        {"has_members": s.boolean("Only tiers with at least one member.")},
        ["rank", "name", "member_count"],
        "tier name and code",
    ),
    {"list": ["hạng", "membership levels", "tier ladder"]},
)

_voucher = _crud(
    "voucher",
    "vouchers",
    "voucher",
    REWARDS,
    {
        "list": "List vouchers filtered by campaign, status or member. Use it to audit what was issued and redeemed.",
        "get": "Get one voucher with its discount, validity, limits and redemptions.",
        "search": "Find vouchers by code fragment or campaign name. Use it when a customer reads out part of a code.",
        "create": "Define a voucher with discount, minimum spend, validity and usage limits. "
        "Use issue_voucher to hand an existing voucher to a member.",
        "update": "Change a voucher's validity, limits or channels; omitted fields stay as they are. "
        "The discount of a voucher that was already redeemed cannot change.",
        "delete": "Delete an unused voucher. Redeemed vouchers can only be voided.",
    },
    _schemas(
        "voucher",
        s.voucher_properties(),
        ["discount", "validity"],
        {
            "campaign_id": s.entity_id("campaign", "Only vouchers of this campaign."),
            "member_id": s.entity_id("member", "Only vouchers bound to this member."),
            **status_filter(["active", "redeemed", "expired", "voided"]),
        },
        ["created_at", "expires_at", "redemptions"],
        "voucher code and campaign name",
    ),
    {"list": ["phiếu giảm giá", "mã giảm giá", "coupons"]},
)

_points = _crud(
    "points_transaction",
    "points_transactions",
    "giao dịch điểm",
    ["loyalty"],
    {
        "list": "List points ledger entries across members, filtered by kind, campaign or date. "
        "Use get_points_ledger for one member's running balance.",
        "get": "Get one points ledger entry with its reference order, store and campaign.",
        "search": "Find points entries by order id or reason text. Use it to check whether an order earned points.",
        "create": "Write a raw ledger entry. Prefer award_points, deduct_points or adjust_points, "
        "which also apply caps and notifications.",
        "update": "Correct the reason, reference or expiry of a ledger entry; points and kind are fixed.",
        "delete": "Delete a ledger entry written by mistake; the member's balance is recomputed.",
    },
    {
        **_schemas(
            "points_transaction",
            s.points_transaction_properties(),
            ["member_id", "kind", "points", "reason"],
            {
                "kind": s.enum("Only this kind.", s.POINTS_KINDS),
                "campaign_id": s.entity_id("campaign", "Only entries from this campaign."),
                "period": s.date_range("Only entries effective in this window."),
            },
            ["effective_at", "points"],
            "order id and reason",
        ),
        "update": s.update_schema(
            "points_transaction",
            {k: v for k, v in s.points_transaction_properties().items() if k in ("reason", "reference", "expires_at")},
        ),
    },
    {"list": ["điểm", "points history"]},
)


# --- segments -------------------------------------------------------------------

_SEG = s.entity_id("segment")

_segments = [
    mcp_tool(
        "list_segments",
        "List member segments with size and refresh schedule. Segments are reusable audiences for campaigns.",
        s.list_schema(
            {"refresh": s.enum("Only this schedule.", ["static", "hourly", "daily"])}, ["name", "size"], "name"
        ),
        policy("list", "low", MEMBERS, ["audiences", "nhóm khách hàng", "phân khúc"]),
    ),
    mcp_tool(
        "get_segment",
        "Get one segment with its criteria, size and last refresh time.",
        s.get_schema("segment"),
        policy("read", "low", MEMBERS, ["segment details", "xem phân khúc"]),
    ),
    mcp_tool(
        "create_segment",
        "Define a member segment by criteria over attributes and purchase behaviour; it is computed within minutes.",
        s.create_schema(s.segment_properties(), ["name", "criteria"]),
        policy("create", "medium", MEMBERS, ["new audience", "tạo phân khúc"]),
    ),
    mcp_tool(
        "update_segment",
        "Change a segment's name, criteria or refresh schedule; campaigns using it see the new members.",
        s.update_schema("segment", s.segment_properties()),
        policy("update", "medium", MEMBERS, ["edit audience", "sửa phân khúc"]),
    ),
    mcp_tool(
        "delete_segment",
        "Delete a segment that no campaign or voucher uses.",
        s.delete_schema("segment"),
        policy("delete", "high", MEMBERS, ["remove audience", "xóa phân khúc"]),
    ),
    mcp_tool(
        "get_segment_members",
        "List the members currently in a segment.",
        s.obj({"segment_id": _SEG, **s.pagination(200, 50)}, ["segment_id"]),
        policy("list", "low", MEMBERS, ["who is in segment", "khách trong phân khúc"]),
    ),
]

# The JSON round trip unshares sub-schemas reused by several tools.

CRUD_TOOLS: dict[str, list[dict[str, Any]]] = {
    "campaign": _campaign,
    "rule": _rule,
    "reward": _reward,
    "member": _member,
    "tier": _tier,
    "voucher": _voucher,
    "points": _points,
    "segment": _segments,
}
