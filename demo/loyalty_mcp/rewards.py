"""Voucher, reward and segment actions of the demo server."""

from __future__ import annotations

from .crud import balance, lookup, page
from .formulas import criteria_hold, facts
from .members import write_entry
from .store import Record, Store, ToolError, new_id, now

# --- vouchers ---------------------------------------------------------------------------


def _issue(store: Store, definition: Record, member_id: str, expires_at: str | None) -> Record:
    fields = {k: v for k, v in definition.items() if k not in ("voucher_id", "created_at", "updated_at", "code")}
    fields |= {"member_id": member_id, "issued_from": definition["voucher_id"], "status": "active", "redemptions": 0}
    fields["code"] = "V-" + new_id("voucher").split("_", 1)[1].upper()
    if expires_at:
        fields["validity"] = {**(fields.get("validity") or {"start": now()}), "end": expires_at}
    return store.insert("voucher", fields)


def _issuable(store: Store, voucher_id: str) -> Record:
    definition = store.need("voucher", voucher_id)
    if definition.get("status") != "active":
        raise ToolError(f"Voucher {voucher_id} is {definition.get('status')} and cannot be issued.")
    return definition


def issue_voucher(store: Store, args: dict) -> dict:
    definition = _issuable(store, args["voucher_id"])
    member = store.need("member", args["member_id"])
    voucher = _issue(store, definition, member["member_id"], args.get("expires_at"))
    return {**voucher, "notified": args.get("notify", True)}


def bulk_issue_vouchers(store: Store, args: dict) -> dict:
    definition = _issuable(store, args["voucher_id"])
    if bool(args.get("segment_id")) == bool(args.get("member_ids")):
        raise ToolError("Send exactly one of segment_id or member_ids.")
    if args.get("segment_id"):
        member_ids = segment_member_ids(store, store.need("segment", args["segment_id"]))
    else:
        member_ids = [store.need("member", m)["member_id"] for m in args["member_ids"]]
    value = lookup(definition, "discount.value") if lookup(definition, "discount.type") == "fixed_amount" else None
    report = {"dry_run": args.get("dry_run", True), "count": len(member_ids)}
    report["max_cost"] = value * len(member_ids) if value is not None else "depends on baskets (percent discount)"
    if not report["dry_run"]:
        report["issued"] = [_issue(store, definition, m, args.get("expires_at"))["voucher_id"] for m in member_ids]
    return report


def _find_code(store: Store, code: str) -> Record:
    found = store.where("voucher", code=code)
    if not found:
        raise ToolError(f"No voucher has code {code}.")
    return found[0]


def _code_problems(store: Store, voucher: Record, member_id: str | None, total: dict | None, channel=None) -> list:
    problems = []
    stamp = now()
    if voucher.get("status") != "active":
        problems.append(f"voucher is {voucher.get('status')}")
    validity = voucher.get("validity") or {}
    if (validity.get("start") and stamp < validity["start"]) or (validity.get("end") and stamp >= validity["end"]):
        problems.append("voucher is outside its validity period")
    if voucher.get("member_id") and member_id and voucher["member_id"] != member_id:
        problems.append("voucher belongs to another member")
    if voucher.get("member_id") and not member_id:
        problems.append("voucher is bound to a member; give member_id")
    if channel and voucher.get("channels") and channel not in voucher["channels"]:
        problems.append(f"voucher is not valid on {channel}")
    minimum = voucher.get("min_spend")
    if total and minimum and (total["currency"] != minimum["currency"] or total["amount"] < minimum["amount"]):
        problems.append(f"basket is below the minimum spend {minimum['amount']} {minimum['currency']}")
    limit = voucher.get("usage_limit") or {}
    if limit.get("total") and voucher.get("redemptions", 0) >= limit["total"]:
        problems.append("voucher has reached its total usage limit")
    used = [r for r in voucher.get("redeemed_by", []) if r == member_id]
    if member_id and len(used) >= limit.get("per_member", 1):
        problems.append("member has used this voucher up to its per-member limit")
    return problems


def _discount(voucher: Record, total: dict) -> dict:
    kind, value = lookup(voucher, "discount.type"), lookup(voucher, "discount.value") or 0
    amount = 0.0
    if kind == "percent":
        amount = total["amount"] * value / 100
        cap = lookup(voucher, "discount.max_discount.amount")
        amount = min(amount, cap) if cap is not None else amount
    elif kind == "fixed_amount":
        amount = min(value, total["amount"])
    return {"type": kind, "amount": amount, "currency": total["currency"]}


def validate_voucher_code(store: Store, args: dict) -> dict:
    voucher = _find_code(store, args["code"])
    problems = _code_problems(store, voucher, args.get("member_id"), args.get("order_total"), args.get("channel"))
    result = {"code": args["code"], "valid": not problems, "problems": problems}
    if args.get("order_total") and not problems:
        result["discount"] = _discount(voucher, args["order_total"])
    return result


def redeem_voucher(store: Store, args: dict) -> dict:
    voucher = _find_code(store, args["code"])
    problems = _code_problems(store, voucher, args.get("member_id"), args["order_total"])
    if problems:
        raise ToolError(f"Voucher {args['code']} cannot be redeemed: {'; '.join(problems)}.")
    voucher["redemptions"] = voucher.get("redemptions", 0) + 1
    if args.get("member_id"):
        voucher.setdefault("redeemed_by", []).append(args["member_id"])
    if voucher.get("member_id"):
        voucher["status"] = "redeemed"
    store.save("voucher", voucher)
    return {"code": args["code"], "order_id": args["order_id"], "discount": _discount(voucher, args["order_total"])}


def void_voucher(store: Store, args: dict) -> dict:
    voucher = store.need("voucher", args["voucher_id"])
    if voucher.get("status") in ("voided", "redeemed"):
        raise ToolError(f"Voucher {voucher['voucher_id']} is already {voucher['status']}.")
    voucher.update(status="voided", void_reason=args["reason"])
    return store.save("voucher", voucher)


# --- rewards ----------------------------------------------------------------------------


def redeem_reward(store: Store, args: dict) -> dict:
    member = store.need("member", args["member_id"])
    reward = store.need("reward", args["reward_id"])
    quantity = args.get("quantity", 1)
    eligible = reward.get("eligible_tier_ids")
    if eligible and member.get("tier_id") not in eligible:
        raise ToolError(f"{reward['name']} is not available to the member's tier.")
    stock = reward.setdefault("stock", {})
    if not stock.get("unlimited") and stock.get("quantity", 0) < quantity:
        raise ToolError(f"{reward['name']} has {stock.get('quantity', 0)} unit(s) left, fewer than {quantity}.")
    cost = reward["points_cost"] * quantity
    available = balance(store, member["member_id"])
    if available < cost:
        raise ToolError(
            f"Member {member['member_id']} has {available} points; {reward['name']} x{quantity} costs {cost}."
        )
    order_id = "ord_" + new_id("reward").split("_", 1)[1]
    write_entry(store, member["member_id"], "burn", -cost, f"Redeemed {reward['name']} x{quantity}", order_id=order_id)
    if not stock.get("unlimited"):
        stock["quantity"] -= quantity
    reward["redemptions"] = reward.get("redemptions", 0) + quantity
    store.save("reward", reward)
    redemption = {"at": now(), "reward_id": reward["reward_id"], "quantity": quantity, "order_id": order_id}
    member.setdefault("redemptions", []).append(redemption)
    store.save("member", member)
    return {
        **redemption,
        "points_spent": cost,
        "balance": balance(store, member["member_id"]),
        "delivery": args.get("delivery"),
    }


def get_reward_stock(store: Store, args: dict) -> dict:
    reward = store.need("reward", args["reward_id"])
    stock = reward.get("stock") or {}
    if args.get("store_id"):
        on_hand = (reward.get("store_stock") or {}).get(args["store_id"], 0)
        return {"reward_id": reward["reward_id"], "store_id": args["store_id"], "on_hand": on_hand, "reserved": 0}
    on_hand = stock.get("quantity", 0)
    return {
        "reward_id": reward["reward_id"],
        "on_hand": on_hand,
        "reserved": 0,
        "unlimited": stock.get("unlimited", False),
    }


def restock_reward(store: Store, args: dict) -> dict:
    reward = store.need("reward", args["reward_id"])
    if args.get("store_id"):
        per_store = reward.setdefault("store_stock", {})
        per_store[args["store_id"]] = per_store.get(args["store_id"], 0) + args["quantity"]
    else:
        stock = reward.setdefault("stock", {})
        stock["quantity"] = stock.get("quantity", 0) + args["quantity"]
    reward.setdefault("restocks", []).append({"at": now(), "quantity": args["quantity"], "note": args.get("note")})
    store.save("reward", reward)
    return get_reward_stock(store, {"reward_id": reward["reward_id"], "store_id": args.get("store_id")})


# --- segments ---------------------------------------------------------------------------


def segment_member_ids(store: Store, segment: Record) -> list[str]:
    """A static segment's listed members; otherwise the members its criteria match (member facts only)."""
    if segment.get("refresh") == "static":
        return list(segment.get("member_ids", []))
    tiers = {t["tier_id"]: t.get("code") for t in store.all("tier")}
    unknown: set[str] = set()
    return [
        m["member_id"]
        for m in store.where("member", status="active")
        if criteria_hold(segment.get("criteria"), facts(member=m, tier_code=tiers.get(m.get("tier_id"))), unknown)
    ]


def get_segment_members(store: Store, args: dict) -> dict:
    segment = store.need("segment", args["segment_id"])
    members = [store.get("member", m) for m in segment_member_ids(store, segment)]
    return page([m for m in members if m], args, default_size=50)


HANDLERS = {
    f.__name__: f
    for f in (
        issue_voucher,
        bulk_issue_vouchers,
        validate_voucher_code,
        redeem_voucher,
        void_voucher,
        redeem_reward,
        get_reward_stock,
        restock_reward,
        get_segment_members,
    )
}
