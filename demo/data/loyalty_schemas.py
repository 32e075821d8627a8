"""JSON Schema builders shared by the demo Loyalty tool definitions."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

ID_PREFIXES: dict[str, str] = {
    "campaign": "cmp",
    "rule": "rul",
    "rule_draft": "drf",
    "reward": "rwd",
    "member": "mem",
    "tier": "tir",
    "voucher": "vch",
    "points_transaction": "ptx",
    "segment": "seg",
    "store": "sto",
}
CHANNELS = ["pos", "web", "mobile_app", "call_center", "partner"]
CURRENCY = "^[A-Z]{3}$"

# --- primitives ---------------------------------------------------------------


def string(description: str, **kw: Any) -> Schema:
    return {"type": "string", "description": description, **kw}


def integer(description: str, **kw: Any) -> Schema:
    return {"type": "integer", "description": description, **kw}


def number(description: str, **kw: Any) -> Schema:
    return {"type": "number", "description": description, **kw}


def boolean(description: str, **kw: Any) -> Schema:
    return {"type": "boolean", "description": description, **kw}


def enum(description: str, values: list[str], **kw: Any) -> Schema:
    return {"type": "string", "description": description, "enum": list(values), **kw}


def array(items: Schema, description: str, **kw: Any) -> Schema:
    return {"type": "array", "description": description, "items": items, **kw}


def plain(type_: str, **kw: Any) -> Schema:
    """A field whose name says all a description would (points, factor, skus): no description tokens."""
    return {"type": type_, **kw}


def obj(
    properties: dict[str, Schema], required: tuple[str, ...] | list[str] = (), description: str | None = None
) -> Schema:
    """A closed object schema; also used for the top level of every tool."""
    schema: Schema = {"type": "object"}
    if description:
        schema["description"] = description
    schema["properties"] = properties
    schema["required"] = list(required)
    schema["additionalProperties"] = False
    return schema


def nested(properties: dict[str, Schema], required: tuple[str, ...] | list[str] = (), description: str = "") -> Schema:
    """A closed object inside a tool schema; omits an empty `required`."""
    schema = obj(properties, required, description)
    if not required:
        del schema["required"]
    return schema


def entity_id(entity: str, description: str | None = None) -> Schema:
    prefix = ID_PREFIXES[entity]
    label = entity.replace("_", " ")
    return string(description or f"The {label} id, e.g. {prefix}_8f3k2m9q.", pattern=f"^{prefix}_[a-z0-9]{{8,}}$")


def ids(entity: str, description: str, max_items: int = 50) -> Schema:
    return array(entity_id(entity, f"A {entity} id."), description, maxItems=max_items, uniqueItems=True)


def money(description: str) -> Schema:
    return nested(
        {
            "amount": number("Amount, e.g. 150000.", minimum=0),
            "currency": string("ISO 4217 code, e.g. VND.", pattern=CURRENCY),
        },
        ["amount", "currency"],
        description,
    )


def date_range(description: str, require_start: bool = True) -> Schema:
    return nested(
        {
            "start": string("Inclusive start, ISO 8601 date-time.", format="date-time"),
            "end": string("Exclusive end, ISO 8601 date-time; omit if open-ended.", format="date-time"),
        },
        ["start"] if require_start else [],
        description,
    )


def channels(description: str = "Sales channels it applies to; empty means all.") -> Schema:
    return array(enum("A sales channel.", CHANNELS), description, uniqueItems=True)


def pagination(max_size: int = 100, default: int = 20) -> dict[str, Schema]:
    return {
        "page": integer("1-based page number.", minimum=1, default=1),
        "page_size": integer(f"Items per page, at most {max_size}.", minimum=1, maximum=max_size, default=default),
    }


def sorting(fields: list[str], default: str) -> dict[str, Schema]:
    return {
        "sort_by": enum("Field to sort by.", fields, default=default),
        "sort_order": enum("Sort direction.", ["asc", "desc"], default="desc"),
    }


# --- generic CRUD tool schemas -------------------------------------------------


def list_schema(filters: dict[str, Schema], sort_fields: list[str], default_sort: str) -> Schema:
    return obj({**filters, **pagination(), **sorting(sort_fields, default_sort)})


def search_schema(matched: str, filters: dict[str, Schema], sort_fields: list[str]) -> Schema:
    query = string(f"Free text matched against {matched}.", minLength=2, maxLength=200)
    props = {"query": query, **filters, **pagination(50, 10), **sorting(["relevance", *sort_fields], "relevance")}
    return obj(props, ["query"])


def get_schema(entity: str, extra: dict[str, Schema] | None = None) -> Schema:
    return obj({f"{entity}_id": entity_id(entity), **(extra or {})}, [f"{entity}_id"])


def delete_schema(entity: str, extra: dict[str, Schema] | None = None) -> Schema:
    reason = string("Why it is deleted; stored in the audit log.", minLength=5, maxLength=500)
    return obj({f"{entity}_id": entity_id(entity), "reason": reason, **(extra or {})}, [f"{entity}_id", "reason"])


def create_schema(properties: dict[str, Schema], required: list[str]) -> Schema:
    return obj(properties, required)


def update_schema(entity: str, properties: dict[str, Schema]) -> Schema:
    """Only the id is required; omitted fields keep their value, nested objects are replaced whole."""
    return obj({f"{entity}_id": entity_id(entity), **properties}, [f"{entity}_id"])


# --- CampaignRule: criteria and formula ---------------------------------------

CONDITION_FIELDS = [
    "transaction_amount",
    "transaction_channel",
    "store_id",
    "product_category",
    "product_sku",
    "basket_item_count",
    "payment_method",
    "member_tier",
    "member_attribute",
    "member_tenure_days",
    "birthday_month",
    "day_of_week",
    "time_window",
    "is_first_purchase",
    "segment_id",
]
OPERATORS = ["eq", "neq", "gt", "gte", "lt", "lte", "in", "not_in", "between", "contains"]


def condition() -> Schema:
    return nested(
        {
            "field": enum("What is tested; day_of_week is mon..sun, time_window is local HH:MM.", CONDITION_FIELDS),
            "operator": enum("in/not_in take a list, between takes [min, max].", OPERATORS),
            "value": {
                "description": "Number, string, boolean or list, matching the field.",
                "type": ["string", "number", "boolean", "array"],
                "items": {"type": ["string", "number"]},
            },
            "attribute": string("Member attribute key, for field member_attribute.", pattern="^[a-z][a-z0-9_]{1,39}$"),
        },
        ["field", "operator", "value"],
    )


def criteria(description: str | None = None) -> Schema:
    """AND of OR-groups: every all_of group must match; a group matches if any condition holds."""
    group = nested({"any_of": array(condition(), "Conditions; one must hold.", minItems=1, maxItems=20)}, ["any_of"])
    return nested(
        {"all_of": array(group, "Groups that must all match.", minItems=1, maxItems=10)},
        ["all_of"],
        description or "When the rule fires, e.g. [[amount gte 500000], [channel in [pos, web]]].",
    )


def _variant(kind: str, description: str, properties: dict[str, Schema], required: list[str]) -> Schema:
    return nested({"type": {"type": "string", "const": kind}, **properties}, ["type", *required], description)


def formula(description: str | None = None) -> Schema:
    """How many points a matching transaction earns: one of 8 types chosen by `type`."""
    pts = plain("integer", minimum=1, maximum=100000)
    variants = [
        _variant(
            "fixed_points",
            "Flat points per transaction or qualifying item.",
            {"points": pts, "per": plain("string", enum=["transaction", "item"], default="transaction")},
            ["points"],
        ),
        _variant(
            "points_per_amount",
            "Points per full spend unit, e.g. 1 per 10000 VND.",
            {"points": pts, "spend_unit": number("Spend per award.", exclusiveMinimum=0)},
            ["points", "spend_unit"],
        ),
        _variant(
            "multiplier",
            "Multiplies the base earn, e.g. 2 for double points.",
            {"factor": plain("number", exclusiveMinimum=1, maximum=10)},
            ["factor"],
        ),
        _variant(
            "tiered_spend",
            "Points of the highest spend band reached.",
            {
                "bands": array(
                    nested({"min_spend": number("Lower bound.", minimum=0), "points": pts}, ["min_spend", "points"]),
                    "Ascending by min_spend.",
                    minItems=2,
                    maxItems=10,
                ),
                "cumulative": boolean("Sum all bands reached.", default=False),
            },
            ["bands"],
        ),
        _variant(
            "percentage_cashback",
            "Share of net spend returned as points.",
            {
                "percent": plain("number", exclusiveMinimum=0, maximum=100),
                "max_cashback": number("Cap per transaction.", minimum=0),
            },
            ["percent"],
        ),
        _variant(
            "bonus_on_threshold",
            "Bonus once spend reaches a threshold.",
            {
                "threshold": number("Spend needed.", exclusiveMinimum=0),
                "bonus_points": pts,
                "scope": enum("Spend summed per.", ["transaction", "day", "campaign"], default="transaction"),
            },
            ["threshold", "bonus_points"],
        ),
        _variant(
            "product_bonus",
            "Extra points per unit of listed SKUs or categories.",
            {
                "skus": plain("array", items={"type": "string"}, maxItems=200),
                "categories": plain("array", items={"type": "string"}, maxItems=50),
                "points_per_unit": pts,
            },
            ["points_per_unit"],
        ),
        _variant(
            "streak_bonus",
            "Bonus after N consecutive periods with a purchase.",
            {
                "period": plain("string", enum=["day", "week", "month"]),
                "streak_length": integer("Periods needed.", minimum=2, maximum=52),
                "bonus_points": pts,
            },
            ["period", "streak_length", "bonus_points"],
        ),
    ]
    return {
        "description": description or "Points calculation: set type first, then its fields. Amounts use currency.",
        "oneOf": variants,
    }


def rule_properties() -> dict[str, Schema]:
    """The CampaignRule fields (without campaign_id) shared by create and update (simulate takes fewer)."""
    return {
        "name": string("Rule name.", minLength=3, maxLength=120),
        "description": string("What it rewards.", maxLength=1000),
        "priority": integer("Lower runs first.", minimum=1, maximum=1000, default=100),
        "currency": string("ISO 4217 code of all amounts.", pattern=CURRENCY, default="VND"),
        "criteria": criteria(),
        "formula": formula(),
        "stackable": boolean("Later rules may also award.", default=True),
        "limits": nested(
            {
                "per_transaction": integer("Max points per transaction.", minimum=1),
                "per_member": integer("Max points per member.", minimum=1),
            },
            [],
            "Caps applied after the formula.",
        ),
        "status": enum("State after saving.", ["draft", "active", "inactive"], default="draft"),
    }


def simulated_rule_properties() -> dict[str, Schema]:
    """What simulate_rule takes of an unsaved rule: its criteria and formula.

    Name, priority and status change no points; caps are left out too (a saved rule_id simulates with
    its caps). Leaving them and create_rule's examples out keeps simulate_rule under the schema-token gate.
    """
    return {
        "criteria": criteria("When it fires."),
        # Amounts are in the samples' currency: an unsaved rule carries none of its own.
        "formula": formula("Points: set type first, then its fields."),
    }


def sample_transaction() -> Schema:
    return nested(
        {
            "amount": money("Net transaction amount."),
            "channel": enum("Sales channel.", CHANNELS),
            "store_id": entity_id("store"),
            "occurred_at": string("Local time of purchase, ISO 8601.", format="date-time"),
            "items": array(
                nested(
                    {
                        "sku": plain("string"),
                        "category": plain("string"),
                        "quantity": plain("integer", minimum=1),
                    },
                    ["sku", "quantity"],
                ),
                "Basket lines.",
                maxItems=100,
            ),
        },
        ["amount", "channel", "occurred_at"],
    )


# --- entity property sets ------------------------------------------------------


def campaign_properties() -> dict[str, Schema]:
    return {
        "name": string("Display name, unique within the program.", minLength=3, maxLength=120),
        "description": string("Goal and mechanics for staff.", maxLength=2000),
        "type": enum("Mechanic family.", ["earn", "burn", "tier_bonus", "referral", "birthday", "seasonal"]),
        "period": date_range("When it runs; its rules never fire outside this window."),
        "timezone": string("IANA zone of its rules.", default="Asia/Ho_Chi_Minh"),
        "budget": money("Cost cap; the campaign pauses when reached."),
        "channels": channels(),
        "audience": nested(
            {"segment_ids": ids("segment", "Segments that may join."), "tier_ids": ids("tier", "Tiers that may join.")},
            [],
            "Who may participate; omit for all members.",
        ),
        "max_participants": integer("Enrollment cap; omit for unlimited.", minimum=1),
    }


def reward_properties() -> dict[str, Schema]:
    return {
        "name": string("Catalog name shown to members.", minLength=3, maxLength=120),
        "description": string("Member-facing description.", maxLength=2000),
        "category": enum(
            "Reward kind.", ["merchandise", "voucher", "experience", "donation", "partner_points", "service"]
        ),
        "points_cost": integer("Points needed for one unit.", minimum=1, maximum=10000000),
        "cash_value": money("Retail value, used for liability reporting."),
        "stock": nested(
            {
                "quantity": integer("Units on hand.", minimum=0),
                "unlimited": boolean("Ignore quantity (digital rewards).", default=False),
                "low_stock_threshold": integer("Alert at or below this.", minimum=0),
            },
            [],
            "Inventory settings.",
        ),
        "availability": date_range("When it can be redeemed."),
        "eligible_tier_ids": ids("tier", "Tiers that may redeem; empty means all."),
        "max_per_member": integer("Redemptions per member.", minimum=1),
        "fulfillment": enum("How it is delivered.", ["in_store_pickup", "delivery", "digital"]),
        "image_url": string("Catalog image URL.", format="uri"),
    }


def member_properties() -> dict[str, Schema]:
    return {
        "external_id": string("Customer id in the POS or CRM.", maxLength=64),
        "profile": nested(
            {
                "first_name": string("Given name.", maxLength=80),
                "last_name": string("Family name.", maxLength=80),
                "email": string("Email address.", format="email"),
                "phone": string("E.164 phone, e.g. +84901234567.", pattern="^\\+[1-9][0-9]{7,14}$"),
                "birth_date": string("YYYY-MM-DD; drives birthday campaigns.", format="date"),
                "gender": enum("Self-declared.", ["female", "male", "other", "undisclosed"]),
                "preferred_language": enum("Messages language.", ["vi", "en"], default="vi"),
            },
            ["first_name"],
            "Personal data.",
        ),
        "consents": nested(
            {
                "data_processing": boolean("Consent to process personal data; needed to earn."),
                "marketing_email": boolean("Email marketing opt-in.", default=False),
                "marketing_sms": boolean("SMS marketing opt-in.", default=False),
            },
            ["data_processing"],
            "Recorded consents.",
        ),
        "enrollment_channel": enum("Where the member joined.", CHANNELS),
        "tier_id": entity_id("tier", "Starting tier; defaults to the entry tier."),
        "home_store_id": entity_id("store", "Preferred store."),
        "referral_code": string("Referrer's code.", pattern="^[A-Z0-9]{6,12}$"),
        "attributes": {
            "type": "object",
            "description": "Custom attributes used by criteria, e.g. {'pet_owner': true}.",
            "additionalProperties": {"type": ["string", "number", "boolean"]},
            "maxProperties": 30,
        },
    }


def tier_properties() -> dict[str, Schema]:
    return {
        "name": string("Tier name, e.g. Gold.", minLength=2, maxLength=60),
        "code": string("Stable code used in criteria, e.g. GOLD.", pattern="^[A-Z][A-Z0-9_]{1,15}$"),
        "rank": integer("Ladder position; 1 is the entry tier.", minimum=1, maximum=20),
        "qualification": nested(
            {
                "min_points": integer("Points earned in the window.", minimum=0),
                "min_spend": money("Spend in the window."),
                "min_transactions": integer("Purchases in the window.", minimum=0),
                "window_months": integer("Rolling window.", minimum=1, maximum=36, default=12),
            },
            [],
            "Reaching any threshold qualifies.",
        ),
        "earn_multiplier": number("Applied to base earn.", minimum=1, maximum=5, default=1),
        "benefits": array(
            nested(
                {
                    "type": enum(
                        "Benefit kind.",
                        ["free_shipping", "birthday_bonus", "priority_support", "extra_discount", "early_access"],
                    ),
                    "value": number("Amount or percent, if any.", minimum=0),
                    "description": string("Member-facing text.", maxLength=200),
                },
                ["type"],
            ),
            "Perks of the tier.",
            maxItems=20,
        ),
        "retention": nested(
            {
                "grace_period_days": integer("Days kept after missing the threshold.", minimum=0, maximum=365),
                "downgrade_policy": enum("On expiry.", ["one_level", "to_qualified_tier", "never"]),
            },
            [],
            "What happens when a member stops qualifying.",
        ),
    }


def voucher_properties() -> dict[str, Schema]:
    return {
        "code": string("Redemption code; omit to auto-generate.", pattern="^[A-Z0-9-]{4,32}$"),
        "campaign_id": entity_id("campaign", "Campaign that funds the voucher."),
        "discount": nested(
            {
                "type": enum("Discount kind.", ["percent", "fixed_amount", "free_shipping"]),
                "value": number("Percent or amount.", minimum=0),
                "max_discount": money("Cap for percent discounts."),
            },
            ["type"],
            "What the voucher gives.",
        ),
        "min_spend": money("Minimum basket."),
        "validity": date_range("Redeemable from start until end."),
        "usage_limit": nested(
            {
                "total": integer("Redemptions across all members.", minimum=1),
                "per_member": integer("Redemptions per member.", minimum=1, default=1),
            },
            [],
            "Redemption caps.",
        ),
        "member_id": entity_id("member", "Bind to one member; omit for a shared code."),
        "channels": channels(),
    }


POINTS_KINDS = ["earn", "burn", "adjustment", "expiry", "transfer_in", "transfer_out"]


def points_transaction_properties() -> dict[str, Schema]:
    return {
        "member_id": entity_id("member"),
        "kind": enum("Ledger entry kind.", POINTS_KINDS),
        "points": integer("Signed points; negative for burn and expiry.", minimum=-1000000, maximum=1000000),
        "reason": string("Audit reason.", minLength=5, maxLength=500),
        "reference": nested(
            {
                "order_id": string("POS or web order id.", maxLength=64),
                "store_id": entity_id("store"),
                "campaign_id": entity_id("campaign"),
                "channel": enum("Sales channel.", CHANNELS),
            },
            [],
            "What produced the entry.",
        ),
        "effective_at": string("When the entry counts, ISO 8601.", format="date-time"),
        "expires_at": string("When earned points expire, ISO 8601.", format="date-time"),
    }


def segment_properties() -> dict[str, Schema]:
    return {
        "name": string("Segment name.", minLength=3, maxLength=120),
        "description": string("Who is in it and why.", maxLength=1000),
        "criteria": criteria("Membership rule over member attributes and purchase behaviour."),
        "refresh": enum("Recompute schedule; static never changes.", ["static", "hourly", "daily"], default="daily"),
    }
