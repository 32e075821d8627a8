"""Member, tier and points-ledger actions of the demo server.

The balance is always the sum of the member's ledger entries (signed points);
every change of points is a new ledger entry, never an edit of a balance.
"""

from __future__ import annotations

import datetime

from .crud import balance, lookup, page
from .store import Record, Store, ToolError, now

_BENEFIT_TEXT = {
    "free_shipping": ("Free shipping", "Miễn phí vận chuyển"),
    "birthday_bonus": ("Birthday bonus points", "Điểm thưởng sinh nhật"),
    "priority_support": ("Priority support", "Hỗ trợ ưu tiên"),
    "extra_discount": ("Extra discount", "Giảm giá thêm"),
    "early_access": ("Early access to sales", "Mua sớm khi có khuyến mãi"),
}


def _active_member(store: Store, member_id: str) -> Record:
    member = store.need("member", member_id)
    if member.get("status", "active") != "active":
        raise ToolError(f"Member {member_id} is {member.get('status')}.")
    return member


def write_entry(store: Store, member_id: str, kind: str, points: int, reason: str, **reference) -> Record:
    entry = {"member_id": member_id, "kind": kind, "points": points, "reason": reason, "effective_at": now()}
    entry["reference"] = {k: v for k, v in reference.items() if v is not None}
    if kind == "earn":
        stamp = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=365)
        entry["expires_at"] = stamp.isoformat(timespec="seconds")
    return store.insert("points_transaction", entry)


def _need_points(store: Store, member_id: str, points: int) -> None:
    available = balance(store, member_id)
    if available < points:
        raise ToolError(f"Member {member_id} has {available} points, fewer than the {points} needed.")


# --- points ---------------------------------------------------------------------------


def award_points(store: Store, args: dict) -> dict:
    _active_member(store, args["member_id"])
    if args.get("campaign_id"):
        store.need("campaign", args["campaign_id"])
    entry = write_entry(
        store, args["member_id"], "earn", args["points"], args["reason"],
        campaign_id=args.get("campaign_id"), order_id=args.get("order_id"),
    )  # fmt: skip
    return {"entry": entry, "balance": balance(store, args["member_id"])}


def deduct_points(store: Store, args: dict) -> dict:
    store.need("member", args["member_id"])
    _need_points(store, args["member_id"], args["points"])
    entry = write_entry(
        store, args["member_id"], "adjustment", -args["points"], args["reason"], order_id=args.get("order_id")
    )
    return {"entry": entry, "balance": balance(store, args["member_id"])}


def transfer_points(store: Store, args: dict) -> dict:
    source, target = args["from_member_id"], args["to_member_id"]
    if source == target:
        raise ToolError("Points cannot be transferred to the same member.")
    store.need("member", source)
    _active_member(store, target)
    _need_points(store, source, args["points"])
    write_entry(store, source, "transfer_out", -args["points"], args["reason"], to_member_id=target)
    write_entry(store, target, "transfer_in", args["points"], args["reason"], from_member_id=source)
    return {"from_balance": balance(store, source), "to_balance": balance(store, target), "points": args["points"]}


def expire_points(store: Store, args: dict) -> dict:
    cutoff = args["expire_before"]
    due: dict[str, list[Record]] = {}
    for entry in store.where("points_transaction", kind="earn"):
        member_id = entry.get("member_id")
        if member_id and not entry.get("expired") and (entry.get("expires_at") or "9")[:10] < cutoff:
            if args.get("member_id") in (None, member_id):
                due.setdefault(member_id, []).append(entry)
    report = []
    for member_id, entries in due.items():
        points = min(sum(e["points"] for e in entries), max(balance(store, member_id), 0))
        report.append({"member_id": member_id, "points": points})
        if not args.get("dry_run", True):
            for entry in entries:
                entry["expired"] = True
                store.save("points_transaction", entry)
            if points:
                write_entry(store, member_id, "expiry", -points, f"Points earned before {cutoff} expired")
    return {"dry_run": args.get("dry_run", True), "members": report, "total_points": sum(r["points"] for r in report)}


def adjust_points(store: Store, args: dict) -> dict:
    if args["delta"] == 0:
        raise ToolError("delta must not be zero.")
    store.need("member", args["member_id"])
    if args["delta"] < 0:
        _need_points(store, args["member_id"], -args["delta"])
    entry = write_entry(
        store, args["member_id"], "adjustment", args["delta"], args["reason"], ticket_id=args.get("ticket_id")
    )
    return {"entry": entry, "balance": balance(store, args["member_id"])}


def _in_window(stamp: str | None, period: dict | None) -> bool:
    if not period:
        return True
    stamp = stamp or ""
    return (not period.get("start") or stamp >= period["start"]) and (not period.get("end") or stamp < period["end"])


def get_points_ledger(store: Store, args: dict) -> dict:
    store.need("member", args["member_id"])
    running, rows = 0, []
    entries = sorted(store.where("points_transaction", member_id=args["member_id"]), key=lambda e: e["effective_at"])
    for entry in entries:
        running += entry["points"]
        if (not args.get("kinds") or entry["kind"] in args["kinds"]) and _in_window(
            entry["effective_at"], args.get("period")
        ):
            rows.append({**entry, "running_balance": running})
    return page(rows[::-1], args)


def get_member_balance(store: Store, args: dict) -> dict:
    store.need("member", args["member_id"])
    available = balance(store, args["member_id"])
    horizon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=args.get("expiring_within_days", 30))
    expiring = sum(
        e["points"]
        for e in store.where("points_transaction", member_id=args["member_id"], kind="earn")
        if not e.get("expired") and e.get("expires_at") and e["expires_at"] <= horizon.isoformat()
    )
    return {"member_id": args["member_id"], "available": available, "pending": 0, "expiring": min(expiring, available)}


# --- members --------------------------------------------------------------------------


def get_member_history(store: Store, args: dict) -> dict:
    member = store.need("member", args["member_id"])
    events = [
        {"type": "points", "at": e["effective_at"], "points": e["points"], "kind": e["kind"], "reason": e["reason"]}
        for e in store.where("points_transaction", member_id=member["member_id"])
    ]
    events += [
        {"type": "voucher", "at": v["created_at"], "voucher_id": v["voucher_id"], "status": v.get("status")}
        for v in store.where("voucher", member_id=member["member_id"])
    ]
    events += [{"type": "tier_change", **change} for change in member.get("tier_changes", [])]
    events += [{"type": "redemption", **r} for r in member.get("redemptions", [])]
    wanted = args.get("event_types")
    events = [e for e in events if (not wanted or e["type"] in wanted) and _in_window(e["at"], args.get("period"))]
    return page(sorted(events, key=lambda e: e["at"], reverse=True), args)


def get_member_vouchers(store: Store, args: dict) -> dict:
    store.need("member", args["member_id"])
    vouchers = store.where("voucher", member_id=args["member_id"])
    if args.get("status"):
        vouchers = [v for v in vouchers if v.get("status") == args["status"]]
    return page(vouchers, args)


def enroll_member(store: Store, args: dict) -> dict:
    member = _active_member(store, args["member_id"])
    campaign = store.need("campaign", args["campaign_id"])
    audience = campaign.get("audience") or {}
    tier_ok = not audience.get("tier_ids") or member.get("tier_id") in audience["tier_ids"]
    segments = [store.get("segment", s) or {} for s in audience.get("segment_ids", [])]
    segment_ok = not segments or any(member["member_id"] in s.get("member_ids", []) for s in segments)
    if not (tier_ok and segment_ok):
        raise ToolError(f"Member {member['member_id']} is outside the audience of {campaign['campaign_id']}.")
    enrolled = campaign.setdefault("enrolled_member_ids", [])
    if member["member_id"] in enrolled:
        raise ToolError(f"Member {member['member_id']} is already enrolled in {campaign['campaign_id']}.")
    if campaign.get("max_participants") and len(enrolled) >= campaign["max_participants"]:
        raise ToolError(f"Campaign {campaign['campaign_id']} is full.")
    enrolled.append(member["member_id"])
    campaign["participants"] = len(enrolled)
    store.save("campaign", campaign)
    return {"member_id": member["member_id"], "campaign_id": campaign["campaign_id"], "channel": args.get("channel")}


def merge_members(store: Store, args: dict) -> dict:
    source_id, target_id = args["source_member_id"], args["target_member_id"]
    if source_id == target_id:
        raise ToolError("A member cannot be merged into itself.")
    source, target = store.need("member", source_id), _active_member(store, target_id)
    moved = 0
    for entity in ("points_transaction", "voucher"):
        for record in store.where(entity, member_id=source_id):
            record["member_id"] = target_id
            store.save(entity, record)
            moved += 1
    if args.get("keep_profile") == "source":
        target["profile"] = source.get("profile")
        store.save("member", target)
    source.update(status="closed", merged_into=target_id, merge_reason=args["reason"])
    store.save("member", source)
    return {"target_member_id": target_id, "records_moved": moved, "balance": balance(store, target_id)}


def export_member_data(store: Store, args: dict) -> dict:
    store.need("member", args["member_id"])
    raise ToolError("export_member_data is not supported by the demo server: it cannot deliver files by email.")


# --- tiers ---------------------------------------------------------------------------


def _move_tier(store: Store, args: dict, direction: int) -> dict:
    member = _active_member(store, args["member_id"])
    target = store.need("tier", args["tier_id"])
    current = store.get("tier", member.get("tier_id") or "") or {"rank": 0, "name": "none"}
    if (target.get("rank", 0) - current.get("rank", 0)) * direction <= 0:
        word = "higher" if direction > 0 else "lower"
        raise ToolError(f"{target['name']} is not {word} than the member's tier {current['name']}.")
    change = {"at": now(), "from": member.get("tier_id"), "to": target["tier_id"], "reason": args["reason"]}
    member.update(tier_id=target["tier_id"], tier_valid_until=args.get("valid_until"))
    member.setdefault("tier_changes", []).append(change)
    return store.save("member", member)


def upgrade_member_tier(store: Store, args: dict) -> dict:
    return _move_tier(store, args, +1)


def downgrade_member_tier(store: Store, args: dict) -> dict:
    return _move_tier(store, args, -1)


def recalculate_member_tier(store: Store, args: dict) -> dict:
    member = _active_member(store, args["member_id"])
    earned = sum(e["points"] for e in store.where("points_transaction", member_id=member["member_id"], kind="earn"))
    tiers = sorted(store.all("tier"), key=lambda t: t.get("rank", 0))
    qualified = [t for t in tiers if earned >= (lookup(t, "qualification.min_points") or 0)]
    if not qualified:
        raise ToolError("No tier is defined.")
    tier = qualified[-1]
    result = {"member_id": member["member_id"], "qualifying_points": earned, "tier_id": tier["tier_id"]}
    result |= {"tier_name": tier["name"], "changed": tier["tier_id"] != member.get("tier_id")}
    if result["changed"] and not args.get("dry_run", True):
        change = {"at": now(), "from": member.get("tier_id"), "to": tier["tier_id"], "reason": "recalculated"}
        member["tier_id"] = tier["tier_id"]
        member.setdefault("tier_changes", []).append(change)
        store.save("member", member)
    return {**result, "dry_run": args.get("dry_run", True)}


def get_tier_benefits(store: Store, args: dict) -> dict:
    tier = store.need("tier", args["tier_id"])
    index = 1 if args.get("language", "vi") == "vi" else 0
    lines = []
    for benefit in tier.get("benefits", []):
        label = _BENEFIT_TEXT.get(benefit["type"], (benefit["type"], benefit["type"]))[index]
        value = f" ({benefit['value']})" if benefit.get("value") is not None else ""
        lines.append(
            label + value + (f": {benefit['description']}" if index == 0 and benefit.get("description") else "")
        )
    return {"tier_id": tier["tier_id"], "name": tier["name"], "benefits": lines}


HANDLERS = {
    f.__name__: f
    for f in (
        award_points,
        deduct_points,
        transfer_points,
        expire_points,
        adjust_points,
        get_points_ledger,
        get_member_balance,
        get_member_history,
        get_member_vouchers,
        enroll_member,
        merge_members,
        export_member_data,
        upgrade_member_tier,
        downgrade_member_tier,
        recalculate_member_tier,
        get_tier_benefits,
    )
}
