"""Demo Loyalty-domain tools, served by the loyalty MCP server and seeded into toolhub."""

from __future__ import annotations

import copy
import json
from typing import Any

from . import loyalty_schemas as s
from .loyalty_entities import CAMPAIGNS, CRUD_TOOLS, MEMBERS, REWARDS, RULE_PHASES, mcp_tool, policy, status_filter

# --- campaign lifecycle and reporting -------------------------------------------

_CMP = s.entity_id("campaign")
_RUL = s.entity_id("rule")
_MEM = s.entity_id("member")
_DRF = s.entity_id("rule_draft", "Draft id returned by create_rule_draft, e.g. drf_4k9s2m1p.")
_REASON = s.string("Why; stored in the audit log.", minLength=5, maxLength=500)

_campaign_extra = [
    mcp_tool(
        "activate_campaign",
        "Start a draft or paused campaign now or at a scheduled time. "
        "Fails if the campaign has no active rule or its budget is used up.",
        s.obj(
            {
                "campaign_id": _CMP,
                "start_at": s.string("Schedule activation instead of now, ISO 8601.", format="date-time"),
                "notify_members": s.boolean("Send the launch message to the audience.", default=False),
            },
            ["campaign_id"],
        ),
        policy("execute", "medium", CAMPAIGNS, ["launch campaign", "go live", "kích hoạt chiến dịch"]),
    ),
    mcp_tool(
        "pause_campaign",
        "Stop an active campaign from awarding points until it is activated again. Points already earned are kept.",
        s.obj(
            {
                "campaign_id": _CMP,
                "reason": _REASON,
                "resume_at": s.string("Resume automatically at this time.", format="date-time"),
            },
            ["campaign_id", "reason"],
        ),
        policy("execute", "medium", CAMPAIGNS, ["stop campaign", "tạm dừng chiến dịch"]),
    ),
    mcp_tool(
        "archive_campaign",
        "Archive an ended or paused campaign so it leaves dashboards; its history stays queryable.",
        s.obj({"campaign_id": _CMP, "reason": _REASON}, ["campaign_id"]),
        policy("update", "medium", CAMPAIGNS, ["archive campaign", "lưu trữ chiến dịch"]),
    ),
    mcp_tool(
        "clone_campaign",
        "Copy a campaign, optionally with its rules, into a new draft with a new name and period. "
        "Use it to rerun last year's seasonal campaign.",
        s.obj(
            {
                "campaign_id": _CMP,
                "new_name": s.string("Name of the copy.", minLength=3, maxLength=120),
                "period": s.date_range("Period of the copy; defaults to the source period."),
                "include_rules": s.boolean("Copy the rules too.", default=True),
            },
            ["campaign_id", "new_name"],
        ),
        policy("create", "medium", CAMPAIGNS, ["duplicate campaign", "copy campaign", "nhân bản chiến dịch"]),
    ),
    mcp_tool(
        "get_campaign_stats",
        "Get participation, points awarded and redeemed, cost and incremental revenue of a campaign. "
        "Use it to answer how a campaign performs.",
        s.obj(
            {
                "campaign_id": _CMP,
                "period": s.date_range("Window; defaults to the whole campaign.", require_start=False),
                "granularity": s.enum("Time bucket.", ["total", "day", "week", "month"], default="total"),
                "metrics": s.array(
                    s.enum(
                        "A metric.",
                        ["participants", "transactions", "points_awarded", "points_redeemed", "cost", "revenue"],
                    ),
                    "Metrics to return; empty means all.",
                    uniqueItems=True,
                ),
            },
            ["campaign_id"],
        ),
        policy("read", "low", CAMPAIGNS, ["campaign performance", "campaign report", "hiệu quả chiến dịch"]),
    ),
    mcp_tool(
        "list_campaign_rules",
        "List the rules of one campaign in evaluation (priority) order.",
        s.obj(
            {"campaign_id": _CMP, **status_filter(["draft", "active", "inactive"]), **s.pagination(50)}, ["campaign_id"]
        ),
        policy("list", "low", CAMPAIGNS, ["rules of campaign", "quy tắc của chiến dịch"]),
    ),
]

# --- rule checks and the staged rule workflow ----------------------------------

_rule_extra = [
    mcp_tool(
        "validate_rule",
        "Check a saved rule for errors: conditions on unknown values, overlaps with other rules, "
        "limits below the formula's minimum award. Nothing is changed.",
        s.obj(
            {"rule_id": _RUL, "check_overlaps": s.boolean("Also compare with other rules.", default=True)}, ["rule_id"]
        ),
        policy("read", "low", CAMPAIGNS, ["check rule", "lint rule", "kiểm tra quy tắc"]),
    ),
    mcp_tool(
        "simulate_rule",
        "Points a saved rule (rule_id) or an unsaved one (rule) would award for sample purchases. "
        "Send one of them; nothing is stored.",
        s.obj(
            {
                "rule_id": _RUL,
                "rule": s.nested(s.simulated_rule_properties(), ["criteria", "formula"], "Unsaved rule."),
                "member_id": s.entity_id("member", "Evaluate as this member (tier, attributes)."),
                "transactions": s.array(s.sample_transaction(), "Sample purchases.", minItems=1, maxItems=20),
            },
            ["transactions"],
        ),
        policy("read", "low", CAMPAIGNS, ["dry run rule", "what if this rule", "thử quy tắc"]),
    ),
    mcp_tool(
        "test_rule_against_member",
        "Replay a member's recent purchases through a rule and report which would have matched and "
        "the points. Use it to answer why a member did not earn.",
        s.obj(
            {
                "rule_id": _RUL,
                "member_id": _MEM,
                "lookback_days": s.integer("Days of history to replay.", minimum=1, maximum=365, default=30),
            },
            ["rule_id", "member_id"],
        ),
        policy("read", "low", ["loyalty", "campaigns", "members"], ["why no points", "sao không được điểm"]),
    ),
    mcp_tool(
        "activate_rule",
        "Make a draft or inactive rule live inside its campaign from the next transaction on.",
        s.obj({"rule_id": _RUL}, ["rule_id"]),
        policy("execute", "medium", CAMPAIGNS, ["enable rule", "bật quy tắc"]),
    ),
    mcp_tool(
        "deactivate_rule",
        "Stop a rule from matching new transactions; awarded points are kept.",
        s.obj({"rule_id": _RUL, "reason": _REASON}, ["rule_id", "reason"]),
        policy("execute", "medium", CAMPAIGNS, ["disable rule", "tắt quy tắc"]),
    ),
]

_rule_workflow = [
    mcp_tool(
        "create_rule_draft",
        "Step 1 of building a rule with the user: open a draft for a campaign with name and priority. "
        "Returns a draft_id for set_rule_formula and set_rule_criteria.",
        s.obj(
            {
                "campaign_id": _CMP,
                "name": s.string("Rule name.", minLength=3, maxLength=120),
                "description": s.string("What the rule should reward.", maxLength=1000),
                "priority": s.integer("Lower runs first.", minimum=1, maximum=1000, default=100),
            },
            ["campaign_id", "name"],
        ),
        policy("create", "medium", CAMPAIGNS, ["start a rule", "bắt đầu tạo quy tắc"], phases=["rule_draft"]),
    ),
    mcp_tool(
        "set_rule_formula",
        "Step 2: set how the draft computes points. Choose the formula type first, then send the "
        "fields that type requires; calling again replaces the formula.",
        s.obj({"draft_id": _DRF, "formula": s.formula()}, ["draft_id", "formula"]),
        policy("update", "medium", CAMPAIGNS, ["points formula", "công thức tính điểm"], phases=["rule_formula"]),
    ),
    mcp_tool(
        "set_rule_criteria",
        "Step 3: set when the draft fires: all_of groups that must all match, each holding any_of "
        "conditions on transaction, product, store, member or time. Calling again replaces the criteria.",
        s.obj({"draft_id": _DRF, "criteria": s.criteria()}, ["draft_id", "criteria"]),
        policy("update", "medium", CAMPAIGNS, ["rule conditions", "điều kiện quy tắc"], phases=["rule_criteria"]),
    ),
    mcp_tool(
        "submit_rule",
        "Step 4: validate the draft and save it as a rule of its campaign, optionally activating it. "
        "Fails with the missing parts if formula or criteria are not set.",
        s.obj(
            {
                "draft_id": _DRF,
                "activate": s.boolean("Activate right away instead of saving as draft.", default=False),
                "note": s.string("Change note for reviewers.", maxLength=500),
            },
            ["draft_id"],
        ),
        policy(
            "execute",
            "medium",
            CAMPAIGNS,
            ["save rule", "finish rule", "lưu quy tắc"],
            phases=["rule_submit"],
            confirm=True,
        ),
    ),
    mcp_tool(
        "get_rule_draft",
        "Get a rule draft with the parts already set and those still missing. "
        "Use it at any step to show progress to the user.",
        s.obj({"draft_id": _DRF}, ["draft_id"]),
        policy("read", "low", CAMPAIGNS, ["draft progress", "xem bản nháp quy tắc"], phases=RULE_PHASES),
    ),
]

# --- members, tiers ------------------------------------------------------------

_TIER_MOVE = {
    "member_id": _MEM,
    "tier_id": s.entity_id("tier", "Target tier."),
    "reason": _REASON,
    "valid_until": s.string("Hold the tier until this date, then re-evaluate.", format="date"),
}

_member_extra = [
    mcp_tool(
        "enroll_member",
        "Enroll an existing member in an opt-in campaign so its rules apply to them. "
        "Fails if the member is outside the campaign audience.",
        s.obj(
            {"member_id": _MEM, "campaign_id": _CMP, "channel": s.enum("Where they opted in.", s.CHANNELS)},
            ["member_id", "campaign_id"],
        ),
        policy("execute", "medium", ["loyalty", "members", "campaigns"], ["join campaign", "đăng ký chiến dịch"]),
    ),
    mcp_tool(
        "merge_members",
        "Merge a duplicate member into a surviving one: balances, history and vouchers move over "
        "and the duplicate is closed. Cannot be undone.",
        s.obj(
            {
                "source_member_id": s.entity_id("member", "Duplicate to close."),
                "target_member_id": s.entity_id("member", "Member that survives."),
                "keep_profile": s.enum("Whose profile wins.", ["source", "target"], default="target"),
                "reason": _REASON,
            },
            ["source_member_id", "target_member_id", "reason"],
        ),
        policy("update", "high", MEMBERS, ["duplicate members", "gộp tài khoản"], status="draft"),
    ),
    mcp_tool(
        "get_member_balance",
        "Get a member's available, pending and soon-to-expire points. Use it to answer how many points a member has.",
        s.obj(
            {
                "member_id": _MEM,
                "expiring_within_days": s.integer("Report points expiring within.", minimum=1, default=30),
            },
            ["member_id"],
        ),
        policy("read", "low", MEMBERS, ["points balance", "how many points", "số điểm", "còn bao nhiêu điểm"]),
    ),
    mcp_tool(
        "get_member_history",
        "List a member's activity timeline: purchases, points, vouchers, tier changes, redemptions.",
        s.obj(
            {
                "member_id": _MEM,
                "event_types": s.array(
                    s.enum("An event type.", ["purchase", "points", "voucher", "tier_change", "redemption"]),
                    "Types to include; empty means all.",
                    uniqueItems=True,
                ),
                "period": s.date_range("Window.", require_start=False),
                **s.pagination(),
            },
            ["member_id"],
        ),
        policy("list", "low", MEMBERS, ["member activity", "lịch sử khách hàng"]),
    ),
    mcp_tool(
        "get_member_vouchers",
        "List the vouchers held by a member, by status.",
        s.obj(
            {"member_id": _MEM, **status_filter(["active", "redeemed", "expired", "voided"]), **s.pagination()},
            ["member_id"],
        ),
        policy("list", "low", ["loyalty", "members", "rewards"], ["my vouchers", "voucher của khách"]),
    ),
    mcp_tool(
        "export_member_data",
        "Export everything stored about a member (profile, purchases, points, vouchers, consents) "
        "for a data-subject access request.",
        s.obj(
            {
                "member_id": _MEM,
                "format": s.enum("File format.", ["json", "csv"], default="json"),
                "deliver_to": s.string("Email that receives the download link.", format="email"),
            },
            ["member_id", "deliver_to"],
        ),
        None,  # unpolicied on purpose: the bundle must fail closed on it
    ),
    mcp_tool(
        "upgrade_member_tier",
        "Move a member to a higher tier now, e.g. as a service gesture, optionally until a date.",
        s.obj(dict(_TIER_MOVE), ["member_id", "tier_id", "reason"]),
        policy("update", "medium", MEMBERS, ["promote member", "nâng hạng"]),
    ),
    mcp_tool(
        "downgrade_member_tier",
        "Move a member to a lower tier now; normally the nightly tier run does this after the grace period.",
        s.obj(dict(_TIER_MOVE), ["member_id", "tier_id", "reason"]),
        policy("update", "medium", MEMBERS, ["demote member", "hạ hạng"]),
    ),
    mcp_tool(
        "recalculate_member_tier",
        "Re-evaluate a member's tier from their qualifying points and spend now. "
        "With dry_run it only reports the tier they would get.",
        s.obj({"member_id": _MEM, "dry_run": s.boolean("Report only.", default=True)}, ["member_id"]),
        policy("execute", "medium", MEMBERS, ["re-evaluate tier", "tính lại hạng"]),
    ),
    mcp_tool(
        "get_tier_benefits",
        "Get the member-facing benefits of a tier in the requested language.",
        s.obj(
            {"tier_id": s.entity_id("tier"), "language": s.enum("Text language.", ["vi", "en"], default="vi")},
            ["tier_id"],
        ),
        policy("read", "low", MEMBERS, ["tier perks", "quyền lợi hạng"]),
    ),
]

# --- vouchers, points, rewards, segments ---------------------------------------

_CODE = s.string("Voucher code as printed.", pattern="^[A-Z0-9-]{4,32}$")

_voucher_extra = [
    mcp_tool(
        "issue_voucher",
        "Give a member a voucher from a campaign; it appears in their app and is sent by their channel.",
        s.obj(
            {
                "member_id": _MEM,
                "voucher_id": s.entity_id("voucher", "Voucher definition to issue."),
                "expires_at": s.string("Override expiry, ISO 8601.", format="date-time"),
                "notify": s.boolean("Notify the member.", default=True),
            },
            ["member_id", "voucher_id"],
        ),
        policy("execute", "medium", REWARDS, ["give voucher", "tặng voucher", "phát mã giảm giá"]),
    ),
    mcp_tool(
        "redeem_voucher",
        "Redeem a voucher code on an order and return the discount applied.",
        s.obj(
            {
                "code": _CODE,
                "member_id": _MEM,
                "order_id": s.string("Order the voucher is used on.", maxLength=64),
                "order_total": s.money("Basket total before discount."),
            },
            ["code", "order_id", "order_total"],
        ),
        policy("execute", "medium", REWARDS, ["use voucher", "dùng mã giảm giá"]),
    ),
    mcp_tool(
        "void_voucher",
        "Invalidate an issued voucher so it can no longer be redeemed, e.g. after fraud or a refund.",
        s.obj({"voucher_id": s.entity_id("voucher"), "reason": _REASON}, ["voucher_id", "reason"]),
        policy("execute", "high", REWARDS, ["cancel voucher", "hủy voucher"]),
    ),
    mcp_tool(
        "bulk_issue_vouchers",
        "Issue a voucher to every member of a segment or to a list of members. "
        "Run with dry_run first to see the count and cost.",
        s.obj(
            {
                "voucher_id": s.entity_id("voucher", "Voucher definition to issue."),
                "segment_id": s.entity_id("segment", "Issue to this segment."),
                "member_ids": s.ids("member", "Or to these members.", max_items=1000),
                "expires_at": s.string("Override expiry, ISO 8601.", format="date-time"),
                "dry_run": s.boolean("Only report count and cost.", default=True),
            },
            ["voucher_id"],
        ),
        policy("execute", "high", REWARDS, ["mass voucher", "phát voucher hàng loạt"]),
    ),
    mcp_tool(
        "validate_voucher_code",
        "Check whether a code is valid for a member, basket and channel without redeeming it.",
        s.obj(
            {
                "code": _CODE,
                "member_id": _MEM,
                "order_total": s.money("Basket total."),
                "channel": s.enum("Sales channel.", s.CHANNELS),
            },
            ["code"],
        ),
        policy("read", "low", REWARDS, ["is this code valid", "kiểm tra mã giảm giá"]),
    ),
]

_POINTS = s.integer("Points, positive.", minimum=1, maximum=1000000)

_points_extra = [
    mcp_tool(
        "award_points",
        "Credit points to a member outside automatic rules, e.g. goodwill or a missed receipt.",
        s.obj(
            {
                "member_id": _MEM,
                "points": _POINTS,
                "reason": _REASON,
                "campaign_id": s.entity_id("campaign", "Campaign that funds them."),
                "order_id": s.string("Related order.", maxLength=64),
            },
            ["member_id", "points", "reason"],
        ),
        policy("execute", "medium", MEMBERS, ["give points", "cộng điểm", "tặng điểm"]),
    ),
    mcp_tool(
        "deduct_points",
        "Debit points from a member, e.g. after a refunded order. Fails if the balance is too low.",
        s.obj(
            {"member_id": _MEM, "points": _POINTS, "reason": _REASON, "order_id": s.string("Related order.")},
            ["member_id", "points", "reason"],
        ),
        policy("execute", "medium", MEMBERS, ["remove points", "trừ điểm"]),
    ),
    mcp_tool(
        "transfer_points",
        "Move points from one member to another, e.g. within a family account.",
        s.obj(
            {
                "from_member_id": s.entity_id("member", "Member giving points."),
                "to_member_id": s.entity_id("member", "Member receiving points."),
                "points": _POINTS,
                "reason": _REASON,
            },
            ["from_member_id", "to_member_id", "points", "reason"],
        ),
        policy("execute", "high", MEMBERS, ["move points", "chuyển điểm"]),
    ),
    mcp_tool(
        "expire_points",
        "Expire earned points whose expiry date is before a cutoff, for one member or everyone. "
        "Run with dry_run first.",
        s.obj(
            {
                "member_id": s.entity_id("member", "Only this member; omit for all."),
                "expire_before": s.string("Cutoff date.", format="date"),
                "dry_run": s.boolean("Only report what would expire.", default=True),
            },
            ["expire_before"],
        ),
        policy("execute", "high", ["loyalty"], ["points expiry run", "hết hạn điểm"]),
    ),
    mcp_tool(
        "adjust_points",
        "Correct a member's balance by a signed amount with a support ticket reference.",
        s.obj(
            {
                "member_id": _MEM,
                "delta": s.integer("Signed correction, not zero.", minimum=-1000000, maximum=1000000),
                "reason": _REASON,
                "ticket_id": s.string("Support ticket id.", maxLength=64),
            },
            ["member_id", "delta", "reason"],
        ),
        policy("update", "medium", MEMBERS, ["fix points", "điều chỉnh điểm"]),
    ),
    mcp_tool(
        "get_points_ledger",
        "List a member's points entries with the running balance, newest first.",
        s.obj(
            {
                "member_id": _MEM,
                "kinds": s.array(s.enum("A kind.", s.POINTS_KINDS), "Kinds to include.", uniqueItems=True),
                "period": s.date_range("Window.", require_start=False),
                **s.pagination(),
            },
            ["member_id"],
        ),
        policy("list", "low", MEMBERS, ["points statement", "sao kê điểm", "lịch sử điểm"]),
    ),
]

_reward_extra = [
    mcp_tool(
        "redeem_reward",
        "Spend a member's points on a catalog reward and create the fulfilment order.",
        s.obj(
            {
                "member_id": _MEM,
                "reward_id": s.entity_id("reward"),
                "quantity": s.integer("Units.", minimum=1, maximum=10, default=1),
                "delivery": s.nested(
                    {
                        "method": s.enum("Delivery method.", ["in_store_pickup", "delivery", "digital"]),
                        "store_id": s.entity_id("store", "Pickup store."),
                        "address": s.string("Delivery address.", maxLength=300),
                    },
                    ["method"],
                    "Where it goes.",
                ),
            },
            ["member_id", "reward_id"],
        ),
        policy("execute", "medium", REWARDS, ["exchange points", "đổi điểm lấy quà"]),
    ),
    mcp_tool(
        "get_reward_stock",
        "Get units on hand and reserved for a reward, overall or for one store.",
        s.obj({"reward_id": s.entity_id("reward"), "store_id": s.entity_id("store")}, ["reward_id"]),
        policy("read", "low", REWARDS, ["stock left", "còn hàng không", "tồn kho quà"]),
    ),
    mcp_tool(
        "restock_reward",
        "Add units to a reward's stock, overall or at one store.",
        s.obj(
            {
                "reward_id": s.entity_id("reward"),
                "quantity": s.integer("Units added.", minimum=1, maximum=100000),
                "store_id": s.entity_id("store"),
                "note": s.string("Delivery note.", maxLength=300),
            },
            ["reward_id", "quantity"],
        ),
        policy("update", "medium", REWARDS, ["add stock", "nhập thêm quà"]),
    ),
]


def _unshared(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return json.loads(json.dumps(tools, ensure_ascii=False))


LOYALTY_TOOLS: list[dict[str, Any]] = _unshared(
    [
        *CRUD_TOOLS["campaign"],
        *_campaign_extra,
        *CRUD_TOOLS["rule"],
        *_rule_extra,
        *_rule_workflow,
        *CRUD_TOOLS["reward"],
        *_reward_extra,
        *CRUD_TOOLS["member"],
        *_member_extra,
        *CRUD_TOOLS["tier"],
        *CRUD_TOOLS["voucher"],
        *_voucher_extra,
        *CRUD_TOOLS["points"],
        *_points_extra,
        *CRUD_TOOLS["segment"],
    ]
)


def loyalty_tools() -> list[dict[str, Any]]:
    """Deep copies of LOYALTY_TOOLS, safe for callers to mutate."""
    return copy.deepcopy(LOYALTY_TOOLS)
