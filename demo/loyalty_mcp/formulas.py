"""Evaluate a CampaignRule's criteria and formula against sample transactions (for simulate_rule and segments).

Demo conventions, stated in every result that uses them: the base earn is one
point per BASE_EARN_UNIT of spend, and one point is worth POINT_VALUE in
currency (cashback). A condition on something a sample does not carry
(payment method, first purchase) does not match and is reported as unknown.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

BASE_EARN_UNIT = 10000
POINT_VALUE = 1000
_DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def _when(stamp: str | None) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(stamp) if stamp else None
    except ValueError:
        return None


def facts(transaction: dict | None = None, member: dict | None = None, tier_code: str | None = None) -> dict:
    """The values conditions test, from a sample transaction and/or a member record."""
    out: dict[str, Any] = {}
    if transaction:
        items = transaction.get("items") or []
        when = _when(transaction.get("occurred_at"))
        out |= {
            "transaction_amount": (transaction.get("amount") or {}).get("amount"),
            "transaction_channel": transaction.get("channel"),
            "store_id": transaction.get("store_id"),
            "product_category": [i["category"] for i in items if i.get("category")],
            "product_sku": [i["sku"] for i in items if i.get("sku")],
            "basket_item_count": sum(i.get("quantity", 1) for i in items),
        }
        if when:
            out |= {"day_of_week": _DAYS[when.weekday()], "time_window": when.strftime("%H:%M")}
    if member:
        out["member_attribute"] = member.get("attributes") or {}
        joined = _when(member.get("joined_at"))
        if joined:
            out["member_tenure_days"] = (datetime.datetime.now(joined.tzinfo) - joined).days
        birth = (member.get("profile") or {}).get("birth_date")
        if birth:
            out["birthday_month"] = int(birth[5:7])
    if tier_code:
        out["member_tier"] = tier_code
    return out


def _compare(actual: Any, operator: str, value: Any) -> bool:
    if isinstance(actual, list):  # basket-wide facts: any item may satisfy the condition
        return (
            any(_compare(item, operator, value) for item in actual)
            if operator != "not_in"
            else (not any(item in value for item in actual))
        )
    try:
        if operator == "eq":
            return actual == value
        if operator == "neq":
            return actual != value
        if operator == "in":
            return actual in value
        if operator == "not_in":
            return actual not in value
        if operator == "between":
            return value[0] <= actual <= value[1]
        if operator == "contains":
            return str(value).lower() in str(actual).lower()
        return {"gt": actual > value, "gte": actual >= value, "lt": actual < value, "lte": actual <= value}[operator]
    except (TypeError, IndexError, KeyError):
        return False


def condition_holds(condition: dict, known: dict, unknown: set[str]) -> bool:
    field = condition["field"]
    if field not in known:
        unknown.add(field)
        return False
    actual = known[field]
    if field == "member_attribute":
        actual = actual.get(condition.get("attribute", ""))
        if actual is None:
            return False
    return _compare(actual, condition["operator"], condition["value"])


def criteria_hold(criteria: dict | None, known: dict, unknown: set[str]) -> bool:
    """AND of OR-groups; no criteria means always."""
    groups = (criteria or {}).get("all_of", [])
    return all(any(condition_holds(c, known, unknown) for c in group["any_of"]) for group in groups)


def transaction_points(formula: dict, transaction: dict) -> int:
    """Points one matching transaction earns under `formula` (streak and day/campaign scopes are summed later)."""
    amount = (transaction.get("amount") or {}).get("amount", 0)
    items = transaction.get("items") or []
    kind = formula["type"]
    if kind == "fixed_points":
        units = sum(i.get("quantity", 1) for i in items) if formula.get("per") == "item" else 1
        return formula["points"] * units
    if kind == "points_per_amount":
        return formula["points"] * math.floor(amount / formula["spend_unit"])
    if kind == "multiplier":
        return math.floor(amount / BASE_EARN_UNIT * formula["factor"])
    if kind == "tiered_spend":
        reached = [band["points"] for band in formula["bands"] if amount >= band["min_spend"]]
        return (sum(reached) if formula.get("cumulative") else max(reached)) if reached else 0
    if kind == "percentage_cashback":
        cash = amount * formula["percent"] / 100
        if formula.get("max_cashback") is not None:
            cash = min(cash, formula["max_cashback"])
        return math.floor(cash / POINT_VALUE)
    if kind == "bonus_on_threshold":
        scope = formula.get("scope", "transaction")
        return formula["bonus_points"] if scope == "transaction" and amount >= formula["threshold"] else 0
    if kind == "product_bonus":
        skus, categories = set(formula.get("skus") or []), set(formula.get("categories") or [])
        units = sum(i.get("quantity", 1) for i in items if i.get("sku") in skus or i.get("category") in categories)
        return formula["points_per_unit"] * units
    return 0  # streak_bonus is awarded over the whole sample, below


def _period_key(when: datetime.datetime, period: str) -> int:
    if period == "day":
        return when.toordinal()
    if period == "week":
        return when.toordinal() // 7
    return when.year * 12 + when.month


def _sample_bonus(formula: dict, matched: list[dict]) -> int:
    """Bonuses that depend on several transactions: streaks and day/campaign thresholds."""
    kind = formula["type"]
    if kind == "streak_bonus":
        keys = sorted({_period_key(w, formula["period"]) for t in matched if (w := _when(t.get("occurred_at")))})
        longest = run = 1 if keys else 0
        for previous, current in zip(keys, keys[1:], strict=False):
            run = run + 1 if current == previous + 1 else 1
            longest = max(longest, run)
        return formula["bonus_points"] if longest >= formula["streak_length"] else 0
    if kind == "bonus_on_threshold" and formula.get("scope") in ("day", "campaign"):
        totals: dict[Any, float] = {}
        for t in matched:
            key = (t.get("occurred_at") or "")[:10] if formula["scope"] == "day" else "all"
            totals[key] = totals.get(key, 0) + (t.get("amount") or {}).get("amount", 0)
        return formula["bonus_points"] * sum(1 for total in totals.values() if total >= formula["threshold"])
    return 0


def simulate(rule: dict, transactions: list[dict], member: dict | None, tier_code: str | None) -> dict:
    limits = rule.get("limits") or {}
    unknown: set[str] = set()
    lines, matched = [], []
    for index, transaction in enumerate(transactions):
        known = facts(transaction, member, tier_code)
        hit = criteria_hold(rule.get("criteria"), known, unknown)
        points = transaction_points(rule["formula"], transaction) if hit else 0
        if limits.get("per_transaction"):
            points = min(points, limits["per_transaction"])
        lines.append({"transaction": index, "matched": hit, "points": points})
        if hit:
            matched.append(transaction)
    bonus = _sample_bonus(rule["formula"], matched)
    total = sum(line["points"] for line in lines) + bonus
    if limits.get("per_member"):
        total = min(total, limits["per_member"])
    result = {"transactions": lines, "bonus_points": bonus, "total_points": total}
    result["assumptions"] = f"base earn 1 point per {BASE_EARN_UNIT}; 1 point = {POINT_VALUE} in cashback"
    if unknown:
        result["unknown_facts"] = sorted(unknown)
    return result
