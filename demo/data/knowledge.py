"""Demo domains, knowledge snippets and model profiles for seeding toolhub."""

from __future__ import annotations

from typing import Any

DOMAINS: list[dict[str, Any]] = [
    {
        "name": "general",
        "title": "General utilities",
        "description": "Math, current time and date, and finding tools in the catalog.",
        "aliases": ["math", "time", "date", "calculator", "tính toán", "giờ", "ngày"],
    },
    {
        "name": "web",
        "title": "Web and DNS",
        "description": "Searching the public web and resolving DNS records.",
        "aliases": ["internet", "online", "dns", "domain name", "tìm trên mạng", "tên miền"],
    },
    {
        "name": "infrastructure",
        "title": "Infrastructure operations",
        "description": "Docker containers and systemd services on the shop's hosts.",
        "aliases": ["containers", "docker", "servers", "services", "ops", "hạ tầng", "máy chủ", "dịch vụ"],
    },
    {
        "name": "loyalty",
        "title": "Loyalty program",
        "description": "The points-based loyalty program: earning, burning, ledgers and program settings.",
        "aliases": [
            "loyalty program",
            "points",
            "membership",
            "rule",
            "rules",
            "earning rules",
            "tích điểm",
            "khách hàng thân thiết",
            "điểm",
            "quy tắc",
        ],  # fmt: skip
    },
    {
        "name": "campaigns",
        "title": "Campaigns and rules",
        "description": "Promotional campaigns and the earning rules that decide who gets how many points.",
        "aliases": ["campaign", "campaigns", "promotion", "promotions", "chiến dịch", "khuyến mãi"],
    },
    {
        "name": "members",
        "title": "Members, tiers and segments",
        "description": "Member profiles, balances, tier ladder and audience segments.",
        "aliases": ["customers", "members", "tier", "segment", "khách hàng", "hội viên", "hạng thành viên"],
    },
    {
        "name": "rewards",
        "title": "Rewards and vouchers",
        "description": "The reward catalog, stock, redemptions and discount vouchers.",
        "aliases": ["rewards", "gifts", "vouchers", "coupons", "phần thưởng", "quà tặng", "đổi quà", "mã giảm giá"],
    },
]


def _snippet(
    domain: str, action: str, title: str, text: str, source: str, owner: str, days_ago: int, interval: int
) -> dict[str, Any]:
    return {
        "domain": domain,
        "action": action,
        "title": title,
        "text": text,
        "source": source,
        "owner": owner,
        "last_reviewed_days_ago": days_ago,
        "review_interval_days": interval,
    }


_LOYALTY = "loyalty-team@example.com"
_CRM = "crm-ops@example.com"
_SRE = "sre@example.com"

KNOWLEDGE_SNIPPETS: list[dict[str, Any]] = [
    _snippet(
        "campaigns",
        "create",
        "Building a campaign rule step by step",
        "A campaign rule needs a formula type before its fields: pick one of the 8 types (fixed_points, "
        "points_per_amount, multiplier, tiered_spend, percentage_cashback, bonus_on_threshold, product_bonus, "
        "streak_bonus), then ask only for that type's fields. The staged order is create_rule_draft, "
        "set_rule_formula, set_rule_criteria, submit_rule. submit_rule rejects a draft without both formula "
        "and criteria and lists what is missing.",
        "Loyalty handbook §3.2",
        _LOYALTY,
        20,
        90,
    ),
    _snippet(
        "campaigns",
        "update",
        "Changing rules of a live campaign",
        "Edits to an active rule apply from the next transaction; points already awarded are never "
        "recalculated. A new formula replaces the old one entirely, so all fields of its type must be sent. "
        "Run simulate_rule with three typical baskets before saving a formula change.",
        "Loyalty handbook §3.4",
        _LOYALTY,
        45,
        90,
    ),
    _snippet(
        "campaigns",
        "execute",
        "Activating and pausing campaigns",
        "A campaign can only be activated when it has at least one active rule and budget left. "
        "It pauses automatically when the budget is used up. The period and budget of an active campaign "
        "can be extended but never shortened; pause it and clone it instead.",
        "wiki/loyalty/campaign-lifecycle",
        _LOYALTY,
        130,
        90,
    ),
    _snippet(
        "campaigns",
        "answer",
        "Rule priority and stacking",
        "Rules run in ascending priority (1 first, default 100). If a matching rule has stackable set to false, "
        "no later rule of the same campaign awards on that transaction. Limits such as "
        "max_points_per_transaction are applied after the formula.",
        "Loyalty handbook §3.3",
        _LOYALTY,
        60,
        180,
    ),
    _snippet(
        "members",
        "answer",
        "Tier thresholds",
        "Tiers are evaluated nightly over a rolling 12-month window: Member (rank 1, entry), Silver at 2,000 "
        "points or 5,000,000 VND spend, Gold at 8,000 points or 20,000,000 VND, Platinum at 20,000 points or "
        "50,000,000 VND. Reaching either the points or the spend threshold qualifies. Earn multipliers are "
        "1.0, 1.25, 1.5 and 2.0.",
        "Loyalty handbook §2.1",
        _LOYALTY,
        200,
        180,
    ),
    _snippet(
        "members",
        "update",
        "Manual tier changes",
        "Members keep their tier for a 90-day grace period after missing the threshold, then drop one level. "
        "Manual upgrades need a reason and should set valid_until; without it the nightly run may undo them. "
        "Downgrades by hand are only for confirmed fraud.",
        "wiki/loyalty/tiers#manual-changes",
        _CRM,
        30,
        90,
    ),
    _snippet(
        "members",
        "delete",
        "Erasure requests",
        "delete_member is only for a verified erasure request logged in the privacy tracker. The member's "
        "history is anonymised and the points balance is forfeited, which cannot be undone. "
        "Offer export_member_data first if the request also asks for a copy.",
        "Privacy runbook §4",
        "privacy@example.com",
        80,
        90,
    ),
    _snippet(
        "members",
        "create",
        "Registering a member",
        "A member needs a first name and data_processing consent; without that consent no points can be "
        "earned. Phone numbers are stored in E.164 form (+84...). New members start in the Member tier "
        "and get a 200-point welcome bonus from the Welcome campaign.",
        "Loyalty handbook §1.2",
        _CRM,
        15,
        180,
    ),
    _snippet(
        "loyalty",
        "answer",
        "Points earning and expiry policy",
        "Base earn is 1 point per 10,000 VND of net spend, after discounts and before tier multipliers. "
        "Points expire 12 months after they were earned, on the last day of that month; members are notified "
        "30 days before. The monthly expiry run uses expire_points with dry_run first.",
        "Loyalty handbook §4.1",
        _LOYALTY,
        75,
        90,
    ),
    _snippet(
        "loyalty",
        "execute",
        "Manual points corrections",
        "Use award_points for goodwill credits up to 5,000 points; larger credits need a team lead on the "
        "ticket. Use adjust_points with a ticket_id to correct errors and deduct_points after refunds. "
        "Points transfers are allowed only between members of the same household account.",
        "wiki/loyalty/points-corrections",
        _CRM,
        50,
        90,
    ),
    _snippet(
        "rewards",
        "answer",
        "Voucher expiry and limits",
        "A voucher is redeemable from validity.start up to but not including validity.end, in the store's "
        "time zone. Vouchers default to one use per member. Voided vouchers cannot be reinstated; "
        "issue a new one instead, and redeemed vouchers can only be voided, not deleted.",
        "Loyalty handbook §5.2",
        _LOYALTY,
        95,
        60,
    ),
    _snippet(
        "rewards",
        "execute",
        "Redeeming rewards",
        "Redemption reserves stock and deducts points at once; a cancelled delivery refunds both. "
        "Rewards restricted by tier are hidden from lower tiers in the app. "
        "Restock when get_reward_stock reports units at or below low_stock_threshold.",
        "Loyalty handbook §5.1",
        _LOYALTY,
        40,
        120,
    ),
    _snippet(
        "rewards",
        "create",
        "Bulk voucher campaigns",
        "Always run bulk_issue_vouchers with dry_run true first and share the count and cost with the "
        "campaign owner. Sends above 10,000 members are scheduled outside 21:00-08:00 local time.",
        "wiki/loyalty/vouchers/bulk",
        _LOYALTY,
        10,
        90,
    ),
    _snippet(
        "infrastructure",
        "execute",
        "Container restart etiquette",
        "Inspect the container first and note its last exit code and restart count. Prefer restart_container "
        "over stop plus start. Database containers (postgres-*, redis-*) are not restarted between 08:00 and "
        "22:00 without the on-call engineer's approval in #ops.",
        "SRE runbook: containers",
        _SRE,
        25,
        90,
    ),
    _snippet(
        "infrastructure",
        "execute",
        "Restarting host services",
        "restart_service is critical: every client of the service sees an outage. For nginx a reload is "
        "enough after config changes, so check get_service_status first. Announce service restarts in #ops "
        "with the reason before running them.",
        "SRE runbook: services §2",
        _SRE,
        400,
        180,
    ),
    _snippet(
        "web",
        "answer",
        "DNS changes and propagation",
        "Our zones use a 300-second TTL, so changed A and CNAME records are visible within about five "
        "minutes. MX changes are coordinated with the mail provider first. "
        "dns_lookup queries public resolvers, not the internal split-horizon DNS.",
        "wiki/sre/dns",
        _SRE,
        60,
        365,
    ),
    _snippet(
        "general",
        "answer",
        "Time zones for shop questions",
        "Stores and campaigns run on Asia/Ho_Chi_Minh (UTC+7) unless a campaign sets another timezone. "
        "Answer time and date questions in the user's zone when they give one, otherwise in store time.",
        "wiki/general/timezones",
        "platform@example.com",
        5,
        365,
    ),
]

# The demo names no upstream model: both call TOOLHUB_MODEL (the builtin model when no server is set).
MODEL_PROFILES: list[dict[str, Any]] = [
    {"name": "chat-8k", "context_window": 8192, "max_output_tokens": 1024, "reserved_result_tokens": 1024},
    {"name": "chat-32k", "context_window": 32768, "max_output_tokens": 4096, "reserved_result_tokens": 4096},
]
