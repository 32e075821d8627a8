"""A few rows the demo server starts with, written once on first start (never again, even if deleted)."""

from __future__ import annotations

from .store import Store

SEEDED_FLAG = "seeded"
_YEAR = "2026"


def _period(start: str, end: str) -> dict:
    return {"start": f"{start}T00:00:00+07:00", "end": f"{end}T00:00:00+07:00"}


TIERS = {
    "tir_member01": {
        "name": "Member",
        "code": "MEMBER",
        "rank": 1,
        "qualification": {"min_points": 0, "window_months": 12},
        "earn_multiplier": 1,
        "benefits": [{"type": "birthday_bonus", "value": 100, "description": "100 points in your birthday month"}],
    },
    "tir_silver01": {
        "name": "Silver",
        "code": "SILVER",
        "rank": 2,
        "qualification": {"min_points": 1000, "window_months": 12},
        "earn_multiplier": 1.25,
        "benefits": [{"type": "free_shipping", "description": "Free shipping on web orders"}],
        "retention": {"grace_period_days": 60, "downgrade_policy": "one_level"},
    },
    "tir_gold0001": {
        "name": "Gold",
        "code": "GOLD",
        "rank": 3,
        "qualification": {"min_points": 5000, "window_months": 12},
        "earn_multiplier": 1.5,
        "benefits": [
            {"type": "free_shipping", "description": "Free shipping on every order"},
            {"type": "priority_support", "description": "Priority hotline"},
            {"type": "extra_discount", "value": 5, "description": "5% off at every store"},
        ],
        "retention": {"grace_period_days": 90, "downgrade_policy": "one_level"},
    },
}

MEMBERS = {
    "mem_lan00001": {
        "profile": {"first_name": "Lan", "last_name": "Nguyen", "email": "lan@example.com", "phone": "+84901234567"},
        "consents": {"data_processing": True, "marketing_email": True},
        "tier_id": "tir_gold0001",
        "status": "active",
        "joined_at": "2023-03-02T10:00:00+07:00",
        "attributes": {"pet_owner": True},
    },
    "mem_minh0001": {
        "profile": {"first_name": "Minh", "last_name": "Tran", "email": "minh@example.com"},
        "consents": {"data_processing": True},
        "tier_id": "tir_member01",
        "status": "active",
        "joined_at": "2025-11-20T09:30:00+07:00",
    },
    "mem_an000001": {
        "profile": {"first_name": "An", "last_name": "Pham", "phone": "+84987654321"},
        "consents": {"data_processing": True, "marketing_sms": True},
        "tier_id": "tir_silver01",
        "status": "active",
        "joined_at": "2024-06-15T18:00:00+07:00",
    },
}

SEGMENTS = {
    "seg_vip00001": {
        "name": "VIP shoppers",
        "description": "Hand-picked members for early access.",
        "criteria": {"all_of": [{"any_of": [{"field": "member_tier", "operator": "in", "value": ["GOLD"]}]}]},
        "refresh": "static",
        "member_ids": ["mem_lan00001"],
    },
}

CAMPAIGNS = {
    "cmp_tet2026a": {
        "name": "Tết 2026 double points",
        "description": "Double points on baskets from 500,000 VND during Tết.",
        "type": "seasonal",
        "period": _period(f"{_YEAR}-01-20", f"{_YEAR}-02-20"),
        "timezone": "Asia/Ho_Chi_Minh",
        "budget": {"amount": 200000000, "currency": "VND"},
        "channels": ["pos", "mobile_app"],
        "status": "active",
    },
    "cmp_bday0001": {
        "name": "Birthday bonus",
        "description": "Bonus points in the member's birthday month.",
        "type": "birthday",
        "period": _period(f"{_YEAR}-01-01", f"{_YEAR}-12-31"),
        "budget": {"amount": 50000000, "currency": "VND"},
        "status": "draft",
    },
}

RULES = {
    "rul_tetdbl01": {
        "campaign_id": "cmp_tet2026a",
        "name": "Double points from 500k",
        "priority": 10,
        "currency": "VND",
        "criteria": {
            "all_of": [{"any_of": [{"field": "transaction_amount", "operator": "gte", "value": 500000}]}],
        },
        "formula": {"type": "multiplier", "factor": 2},
        "stackable": True,
        "status": "active",
    },
}

REWARDS = {
    "rwd_coffee01": {
        "name": "Free coffee",
        "category": "merchandise",
        "points_cost": 500,
        "stock": {"quantity": 100, "low_stock_threshold": 10},
        "fulfillment": "in_store_pickup",
    },
    "rwd_tote0001": {
        "name": "Canvas tote bag",
        "category": "merchandise",
        "points_cost": 2000,
        "stock": {"quantity": 20},
        "eligible_tier_ids": ["tir_silver01", "tir_gold0001"],
        "fulfillment": "delivery",
    },
}

VOUCHERS = {
    "vch_welcome1": {
        "code": "WELCOME-10",
        "campaign_id": "cmp_tet2026a",
        "discount": {"type": "percent", "value": 10, "max_discount": {"amount": 100000, "currency": "VND"}},
        "min_spend": {"amount": 200000, "currency": "VND"},
        "validity": _period(f"{_YEAR}-01-01", f"{_YEAR}-12-31"),
        "usage_limit": {"total": 1000, "per_member": 1},
        "status": "active",
        "redemptions": 0,
    },
}

LEDGER = {
    "ptx_seed0001": ("mem_lan00001", "earn", 6200, "Purchases in 2025", "cmp_tet2026a"),
    "ptx_seed0002": ("mem_lan00001", "burn", -500, "Redeemed free coffee", None),
    "ptx_seed0003": ("mem_minh0001", "earn", 350, "Welcome purchase", None),
    "ptx_seed0004": ("mem_an000001", "earn", 1800, "Purchases in 2025", None),
}


def seed(store: Store) -> bool:
    """Write the demo rows unless this database was seeded before; True when it wrote them."""
    if store.flag(SEEDED_FLAG):
        return False
    for entity, rows in (
        ("tier", TIERS),
        ("member", MEMBERS),
        ("segment", SEGMENTS),
        ("campaign", CAMPAIGNS),
        ("rule", RULES),
        ("reward", REWARDS),
        ("voucher", VOUCHERS),
    ):
        for record_id, data in rows.items():
            store.insert(entity, dict(data), record_id)
    for record_id, (member_id, kind, points, reason, campaign_id) in LEDGER.items():
        entry = {
            "member_id": member_id,
            "kind": kind,
            "points": points,
            "reason": reason,
            "reference": {"campaign_id": campaign_id} if campaign_id else {},
            "effective_at": "2025-12-15T12:00:00+07:00",
        }
        if kind == "earn":
            entry["expires_at"] = "2026-12-15T12:00:00+07:00"
        store.insert("points_transaction", entry, record_id)
    store.set_flag(SEEDED_FLAG, "1")
    return True
