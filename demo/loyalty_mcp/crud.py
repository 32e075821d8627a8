"""The list/get/search/create/update/delete tools of every Loyalty entity, done generically over the store.

A tool name says the verb and the entity (`list_campaigns`, `get_member`,
`delete_points_transaction`); filters are matched against the record's
fields, a few of them (period, stock, channel, ...) with their own rule.
Entity-specific guards (an active campaign cannot be deleted) live in GUARDS.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .store import Record, Store, ToolError, id_key, new_id, now

PLURALS = {
    "campaign": "campaigns",
    "rule": "rules",
    "reward": "rewards",
    "member": "members",
    "tier": "tiers",
    "voucher": "vouchers",
    "points_transaction": "points_transactions",
    "segment": "segments",
}
_PAGING = {"page", "page_size", "sort_by", "sort_order", "query"}


def balance(store: Store, member_id: str) -> int:
    return sum(entry.get("points", 0) for entry in store.where("points_transaction", member_id=member_id))


def lookup(record: Record, path: str) -> Any:
    value: Any = record
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


# --- derived fields shown with a record ------------------------------------------


def _decorate(store: Store, entity: str, record: Record) -> Record:
    if entity == "campaign":
        record["rule_count"] = len(store.where("rule", campaign_id=record["campaign_id"]))
    elif entity == "member":
        record["points_balance"] = balance(store, record["member_id"])
    elif entity == "tier":
        record["member_count"] = len(store.where("member", tier_id=record["tier_id"]))
    return record


# --- filters -------------------------------------------------------------------


def _in_period(stamp: Any, period: dict) -> bool:
    if not isinstance(stamp, str):
        return False
    start, end = period.get("start"), period.get("end")
    return (not start or stamp >= start) and (not end or stamp < end)


_FILTERS: dict[str, Callable[[Store, Record, Any], bool]] = {
    "channel": lambda _, r, v: not r.get("channels") or v in r["channels"],
    "active_on": lambda _, r, v: (lookup(r, "period.start") or "")[:10] <= v < (lookup(r, "period.end") or "9")[:10],
    "formula_type": lambda _, r, v: lookup(r, "formula.type") == v,
    "tier_id": lambda _, r, v: r.get("tier_id") == v or v in (r.get("eligible_tier_ids") or [v]),
    "in_stock": lambda _, r, v: v == (bool(lookup(r, "stock.unlimited")) or (lookup(r, "stock.quantity") or 0) > 0),
    "max_points_cost": lambda _, r, v: r.get("points_cost", 0) <= v,
    "joined_after": lambda _, r, v: (r.get("joined_at") or "")[:10] >= v,
    "has_members": lambda s, r, v: v == bool(s.where("member", tier_id=r["tier_id"])),
    "period": lambda _, r, v: _in_period(r.get("effective_at"), v),
    "campaign_id": lambda _, r, v: v in (r.get("campaign_id"), lookup(r, "reference.campaign_id")),
}


def _matches(store: Store, record: Record, filters: dict[str, Any]) -> bool:
    for name, value in filters.items():
        rule = _FILTERS.get(name)
        if rule is not None:
            if not rule(store, record, value):
                return False
        elif record.get(name) != value:
            return False
    return True


# --- paging and sorting ----------------------------------------------------------

_SORT_PATHS = {"start": "period.start", "expires_at": "validity.end", "name": "name"}


def _sort_key(record: Record, field: str) -> tuple:
    value = lookup(record, _SORT_PATHS.get(field, field))
    if value is None and field == "name":
        value = lookup(record, "profile.first_name")
    return (value is None, value if isinstance(value, int | float) else str(value or ""))


def page(items: list, args: dict, default_size: int = 20) -> dict:
    number, size = args.get("page", 1), args.get("page_size", default_size)
    start = (number - 1) * size
    return {"items": items[start : start + size], "page": number, "page_size": size, "total": len(items)}


def _sorted(records: list[Record], args: dict, default: str | None) -> list[Record]:
    field = args.get("sort_by", default)
    if not field or field == "relevance":
        return records
    ordered = sorted(records, key=lambda r: _sort_key(r, field))
    return ordered[::-1] if args.get("sort_order", "desc") == "desc" else ordered


# --- the six verbs ------------------------------------------------------------------


def _list(store: Store, entity: str, args: dict) -> dict:
    filters = {k: v for k, v in args.items() if k not in _PAGING}
    records = [_decorate(store, entity, r) for r in store.all(entity)]
    records = [r for r in records if _matches(store, r, filters)]
    return page(_sorted(records, args, None), args)


def _search(store: Store, entity: str, args: dict) -> dict:
    words = args["query"].lower().split()
    filters = {k: v for k, v in args.items() if k not in _PAGING}
    scored = []
    for record in store.all(entity):
        text = json.dumps(record, ensure_ascii=False).lower()
        if all(word in text for word in words) and _matches(store, record, filters):
            scored.append((sum(text.count(word) for word in words), _decorate(store, entity, record)))
    scored.sort(key=lambda pair: -pair[0])
    return page(_sorted([record for _, record in scored], args, "relevance"), args, default_size=10)


def _check_references(store: Store, entity: str, args: dict) -> None:
    for key, value in args.items():
        referenced = key.removesuffix("_id")
        if key.endswith("_id") and key != id_key(entity) and referenced in PLURALS and value is not None:
            store.need(referenced, value)


_CREATE_DEFAULTS: dict[str, Callable[[Store, dict], dict]] = {
    "campaign": lambda s, a: {"status": "draft", "timezone": "Asia/Ho_Chi_Minh", "participants": 0},
    "rule": lambda s, a: {"priority": 100, "currency": "VND", "stackable": True, "status": "draft"},
    "reward": lambda s, a: {"redemptions": 0},
    "member": lambda s, a: {"status": "active", "joined_at": now(), "tier_id": _entry_tier(s)},
    "voucher": lambda s, a: {"status": "active", "redemptions": 0, "code": _voucher_code()},
    "points_transaction": lambda s, a: {"effective_at": now()},
    "segment": lambda s, a: {"refresh": "daily", "member_ids": []},
}


def _entry_tier(store: Store) -> str | None:
    tiers = sorted(store.all("tier"), key=lambda t: t.get("rank", 99))
    return tiers[0]["tier_id"] if tiers else None


def _voucher_code() -> str:
    return "V-" + new_id("voucher").split("_", 1)[1].upper()


def _create(store: Store, entity: str, args: dict) -> dict:
    _check_references(store, entity, args)
    GUARDS.get(("create", entity), lambda *_: None)(store, None, args)
    data = {**_CREATE_DEFAULTS.get(entity, lambda s, a: {})(store, args), **args}
    return _decorate(store, entity, store.insert(entity, data))


def _get(store: Store, entity: str, args: dict) -> dict:
    return _decorate(store, entity, store.need(entity, args[id_key(entity)]))


def _update(store: Store, entity: str, args: dict) -> dict:
    record = store.need(entity, args[id_key(entity)])
    changes = {k: v for k, v in args.items() if k != id_key(entity)}
    _check_references(store, entity, changes)
    GUARDS.get(("update", entity), lambda *_: None)(store, record, changes)
    record.update(changes)
    return _decorate(store, entity, store.save(entity, record))


def _delete(store: Store, entity: str, args: dict) -> dict:
    record = store.need(entity, args[id_key(entity)])
    GUARDS.get(("delete", entity), lambda *_: None)(store, record, args)
    store.delete(entity, record[id_key(entity)])
    return {"deleted": record[id_key(entity)], "reason": args.get("reason")}


# --- entity guards (raise ToolError to refuse) -------------------------------------


def _refuse(condition: bool, message: str) -> None:
    if condition:
        raise ToolError(message)


def _delete_campaign(store: Store, record: Record, _args: dict) -> None:
    _refuse(record.get("status") == "active", "An active campaign must be paused or archived before it is deleted.")
    for rule in store.where("rule", campaign_id=record["campaign_id"]):
        store.delete("rule", rule["rule_id"])


def _delete_member(store: Store, record: Record, _args: dict) -> None:
    for entry in store.where("points_transaction", member_id=record["member_id"]):
        entry["member_id"] = None  # anonymised: the history stays, the person does not
        store.save("points_transaction", entry)


def _delete_tier(store: Store, record: Record, _args: dict) -> None:
    _refuse(record.get("rank") == 1, "The entry tier (rank 1) cannot be deleted.")
    members = store.where("member", tier_id=record["tier_id"])
    _refuse(bool(members), f"Tier {record['tier_id']} still has {len(members)} member(s); move them out first.")


def _delete_segment(store: Store, record: Record, _args: dict) -> None:
    users = [c["campaign_id"] for c in store.all("campaign") if record["segment_id"] in _audience_segments(c)]
    _refuse(bool(users), f"Segment {record['segment_id']} is used by {', '.join(users)}.")


def _audience_segments(campaign: Record) -> list[str]:
    return lookup(campaign, "audience.segment_ids") or []


def _create_member(_store: Store, _record: None, args: dict) -> None:
    _refuse(not lookup(args, "consents.data_processing"), "A member needs consents.data_processing true to earn.")


def _create_tier(store: Store, _record: None, args: dict) -> None:
    _refuse(bool(store.where("tier", code=args["code"])), f"A tier with code {args['code']} exists already.")


def _update_voucher(_store: Store, record: Record, changes: dict) -> None:
    changed = "discount" in changes and changes["discount"] != record.get("discount")
    _refuse(changed and record.get("redemptions", 0) > 0, "The discount of a redeemed voucher cannot change.")


def _delete_voucher(_store: Store, record: Record, _args: dict) -> None:
    _refuse(record.get("redemptions", 0) > 0, "A redeemed voucher cannot be deleted; void it instead.")


GUARDS: dict[tuple[str, str], Callable[[Store, Any, dict], None]] = {
    ("delete", "campaign"): _delete_campaign,
    ("delete", "member"): _delete_member,
    ("delete", "tier"): _delete_tier,
    ("delete", "segment"): _delete_segment,
    ("delete", "voucher"): _delete_voucher,
    ("create", "member"): _create_member,
    ("create", "tier"): _create_tier,
    ("update", "voucher"): _update_voucher,
}

_VERBS = {"list": _list, "search": _search, "get": _get, "create": _create, "update": _update, "delete": _delete}


def crud_handler(tool_name: str) -> Callable[[Store, dict], dict] | None:
    """The handler of a generic entity tool, or None when the name is not one."""
    verb, _, rest = tool_name.partition("_")
    if verb not in _VERBS:
        return None
    for entity, plural in PLURALS.items():
        if rest == (plural if verb in ("list", "search") else entity):
            return lambda store, args, entity=entity: _VERBS[verb](store, entity, args)
    return None
