"""Campaign lifecycle, rule checks and the staged rule workflow (draft -> formula -> criteria -> submit)."""

from __future__ import annotations

import datetime

from .crud import lookup, page
from .formulas import POINT_VALUE, simulate
from .store import Record, Store, ToolError, now

# --- campaign lifecycle -----------------------------------------------------------


def _set_status(store: Store, campaign: Record, status: str, **extra) -> dict:
    campaign.update(status=status, **extra)
    return store.save("campaign", campaign)


def activate_campaign(store: Store, args: dict) -> dict:
    campaign = store.need("campaign", args["campaign_id"])
    if campaign.get("status") not in ("draft", "paused", "scheduled"):
        raise ToolError(
            f"Campaign {campaign['campaign_id']} is {campaign.get('status')}; only draft or paused ones start."
        )
    if not store.where("rule", campaign_id=campaign["campaign_id"], status="active"):
        raise ToolError(f"Campaign {campaign['campaign_id']} has no active rule; activate or submit a rule first.")
    budget = (campaign.get("budget") or {}).get("amount")
    if budget is not None and campaign.get("budget_used", 0) >= budget:
        raise ToolError(f"Campaign {campaign['campaign_id']} has used up its budget.")
    if args.get("start_at"):
        return _set_status(store, campaign, "scheduled", scheduled_start=args["start_at"])
    return _set_status(
        store, campaign, "active", activated_at=now(), launch_message_sent=args.get("notify_members", False)
    )


def pause_campaign(store: Store, args: dict) -> dict:
    campaign = store.need("campaign", args["campaign_id"])
    if campaign.get("status") != "active":
        raise ToolError(f"Campaign {campaign['campaign_id']} is {campaign.get('status')}, not active.")
    return _set_status(store, campaign, "paused", pause_reason=args["reason"], resume_at=args.get("resume_at"))


def archive_campaign(store: Store, args: dict) -> dict:
    campaign = store.need("campaign", args["campaign_id"])
    if campaign.get("status") not in ("ended", "paused"):
        raise ToolError(
            f"Campaign {campaign['campaign_id']} is {campaign.get('status')}; only ended or paused ones archive."
        )
    return _set_status(store, campaign, "archived", archive_reason=args.get("reason"))


def clone_campaign(store: Store, args: dict) -> dict:
    source = store.need("campaign", args["campaign_id"])
    data = {k: v for k, v in source.items() if k not in ("campaign_id", "created_at", "updated_at")}
    data.update(name=args["new_name"], status="draft", participants=0, budget_used=0, cloned_from=source["campaign_id"])
    if args.get("period"):
        data["period"] = args["period"]
    copy = store.insert("campaign", data)
    if args.get("include_rules", True):
        for rule in store.where("rule", campaign_id=source["campaign_id"]):
            fields = {k: v for k, v in rule.items() if k not in ("rule_id", "created_at", "updated_at")}
            store.insert("rule", {**fields, "campaign_id": copy["campaign_id"], "status": "draft"})
    copy["rule_count"] = len(store.where("rule", campaign_id=copy["campaign_id"]))
    return copy


def _bucket(stamp: str, granularity: str) -> str:
    if granularity == "day":
        return stamp[:10]
    if granularity == "month":
        return stamp[:7]
    if granularity == "week":
        year, week, _ = datetime.date.fromisoformat(stamp[:10]).isocalendar()
        return f"{year}-W{week:02d}"
    return "total"


def get_campaign_stats(store: Store, args: dict) -> dict:
    campaign = store.need("campaign", args["campaign_id"])
    period = args.get("period") or {}
    buckets: dict[str, dict] = {}
    for entry in store.all("points_transaction"):
        stamp = entry.get("effective_at") or ""
        if lookup(entry, "reference.campaign_id") != campaign["campaign_id"]:
            continue
        if (period.get("start") and stamp < period["start"]) or (period.get("end") and stamp >= period["end"]):
            continue
        row = buckets.setdefault(
            _bucket(stamp, args.get("granularity", "total")), {"members": set(), "n": 0, "in": 0, "out": 0}
        )
        row["members"].add(entry.get("member_id"))
        row["n"] += 1
        row["in" if entry["points"] > 0 else "out"] += abs(entry["points"])
    metrics = args.get("metrics") or [
        "participants",
        "transactions",
        "points_awarded",
        "points_redeemed",
        "cost",
        "revenue",
    ]
    values = {
        "participants": lambda r: len(r["members"]),
        "transactions": lambda r: r["n"],
        "points_awarded": lambda r: r["in"],
        "points_redeemed": lambda r: r["out"],
        "cost": lambda r: {"amount": r["in"] * POINT_VALUE, "currency": lookup(campaign, "budget.currency") or "VND"},
        "revenue": lambda r: None,
    }
    series = [{"bucket": key, **{m: values[m](row) for m in metrics}} for key, row in sorted(buckets.items())]
    note = "revenue is not tracked by the demo server" if "revenue" in metrics else None
    return {"campaign_id": campaign["campaign_id"], "series": series, "note": note}


def list_campaign_rules(store: Store, args: dict) -> dict:
    store.need("campaign", args["campaign_id"])
    rules = store.where("rule", campaign_id=args["campaign_id"])
    if args.get("status"):
        rules = [r for r in rules if r.get("status") == args["status"]]
    return page(sorted(rules, key=lambda r: r.get("priority", 100)), args, default_size=50)


# --- rule checks --------------------------------------------------------------------


def _rule_problems(store: Store, rule: Record, check_overlaps: bool) -> tuple[list[str], list[str]]:
    errors, warnings = [], []
    tier_codes = {t.get("code") for t in store.all("tier")}
    for group in (rule.get("criteria") or {}).get("all_of", []):
        for c in group["any_of"]:
            if c["operator"] == "between" and not (isinstance(c["value"], list) and len(c["value"]) == 2):
                errors.append(f"{c['field']} between needs [min, max]")
            if c["operator"] in ("in", "not_in") and not isinstance(c["value"], list):
                errors.append(f"{c['field']} {c['operator']} needs a list")
            if c["field"] == "member_attribute" and not c.get("attribute"):
                errors.append("member_attribute condition without an attribute key")
            if c["field"] == "member_tier":
                values = c["value"] if isinstance(c["value"], list) else [c["value"]]
                errors += [f"member_tier {v!r} is not a tier code" for v in values if v not in tier_codes]
            if c["field"] == "segment_id":
                values = c["value"] if isinstance(c["value"], list) else [c["value"]]
                errors += [f"segment {v} does not exist" for v in values if store.get("segment", str(v)) is None]
    formula, cap = rule.get("formula") or {}, (rule.get("limits") or {}).get("per_transaction")
    minimum = formula.get("points") or formula.get("bonus_points") or formula.get("points_per_unit")
    if cap and minimum and cap < minimum:
        errors.append(f"limit per_transaction {cap} is below the formula's minimum award {minimum}")
    if check_overlaps:
        for other in store.where("rule", campaign_id=rule.get("campaign_id"), status="active"):
            if other["rule_id"] != rule.get("rule_id") and other.get("priority") == rule.get("priority"):
                warnings.append(f"same priority as active rule {other['rule_id']} ({other.get('name')})")
            if other["rule_id"] != rule.get("rule_id") and other.get("criteria") == rule.get("criteria"):
                warnings.append(f"same criteria as active rule {other['rule_id']}; both would fire")
    return errors, warnings


def validate_rule(store: Store, args: dict) -> dict:
    rule = store.need("rule", args["rule_id"])
    errors, warnings = _rule_problems(store, rule, args.get("check_overlaps", True))
    return {"rule_id": rule["rule_id"], "valid": not errors, "errors": errors, "warnings": warnings}


def simulate_rule(store: Store, args: dict) -> dict:
    if bool(args.get("rule_id")) == bool(args.get("rule")):
        raise ToolError("Send exactly one of rule_id or rule.")
    rule = store.need("rule", args["rule_id"]) if args.get("rule_id") else args["rule"]
    member = store.need("member", args["member_id"]) if args.get("member_id") else None
    tier = store.get("tier", member.get("tier_id") or "") if member else None
    return simulate(rule, args["transactions"], member, tier.get("code") if tier else None)


def replay_rule_for_member(store: Store, args: dict) -> dict:
    store.need("rule", args["rule_id"])
    store.need("member", args["member_id"])
    raise ToolError("test_rule_against_member is not supported by the demo server: it keeps no purchase history.")


def _rule_status(store: Store, rule_id: str, status: str, **extra) -> dict:
    rule = store.need("rule", rule_id)
    if rule.get("status") == status:
        raise ToolError(f"Rule {rule_id} is already {status}.")
    rule.update(status=status, **extra)
    return store.save("rule", rule)


def activate_rule(store: Store, args: dict) -> dict:
    rule = store.need("rule", args["rule_id"])
    errors, _ = _rule_problems(store, rule, check_overlaps=False)
    if errors:
        raise ToolError(f"Rule {rule['rule_id']} has errors: {'; '.join(errors)}.")
    return _rule_status(store, args["rule_id"], "active")


def deactivate_rule(store: Store, args: dict) -> dict:
    return _rule_status(store, args["rule_id"], "inactive", deactivation_reason=args["reason"])


# --- the staged rule workflow ---------------------------------------------------------

_PARTS = {"formula": "set_rule_formula", "criteria": "set_rule_criteria"}


def _draft_view(draft: Record) -> dict:
    missing = [part for part in _PARTS if not draft.get(part)]
    next_step = _PARTS[missing[0]] if missing else "submit_rule"
    return {**draft, "missing": missing, "next_step": next_step}


def create_rule_draft(store: Store, args: dict) -> dict:
    store.need("campaign", args["campaign_id"])
    draft = {**args, "priority": args.get("priority", 100), "formula": None, "criteria": None, "status": "open"}
    return _draft_view(store.insert("rule_draft", draft))


def _open_draft(store: Store, draft_id: str) -> Record:
    draft = store.need("rule_draft", draft_id)
    if draft.get("status") != "open":
        raise ToolError(f"Draft {draft_id} was submitted as rule {draft.get('rule_id')}; start a new draft.")
    return draft


def set_rule_formula(store: Store, args: dict) -> dict:
    draft = _open_draft(store, args["draft_id"])
    draft["formula"] = args["formula"]
    return _draft_view(store.save("rule_draft", draft))


def set_rule_criteria(store: Store, args: dict) -> dict:
    draft = _open_draft(store, args["draft_id"])
    draft["criteria"] = args["criteria"]
    return _draft_view(store.save("rule_draft", draft))


def get_rule_draft(store: Store, args: dict) -> dict:
    return _draft_view(store.need("rule_draft", args["draft_id"]))


def submit_rule(store: Store, args: dict) -> dict:
    draft = _open_draft(store, args["draft_id"])
    missing = [part for part in _PARTS if not draft.get(part)]
    if missing:
        steps = ", ".join(f"{part} ({_PARTS[part]})" for part in missing)
        raise ToolError(f"Draft {draft['draft_id']} cannot be submitted; missing: {steps}.")
    fields = ("campaign_id", "name", "description", "priority", "formula", "criteria")
    rule = {k: draft[k] for k in fields if draft.get(k) is not None}
    rule |= {"currency": "VND", "stackable": True, "status": "active" if args.get("activate") else "draft"}
    rule |= {"from_draft": draft["draft_id"], "note": args.get("note")}
    errors, warnings = _rule_problems(store, rule, check_overlaps=True)
    if errors:
        raise ToolError(f"Draft {draft['draft_id']} has errors: {'; '.join(errors)}.")
    saved = store.insert("rule", rule)
    draft.update(status="submitted", rule_id=saved["rule_id"])
    store.save("rule_draft", draft)
    return {**saved, "warnings": warnings}


# test_rule_against_member is served by replay_rule_for_member (a test_ name would look like a test).
HANDLERS = {"test_rule_against_member": replay_rule_for_member} | {
    f.__name__: f
    for f in (
        activate_campaign,
        pause_campaign,
        archive_campaign,
        clone_campaign,
        get_campaign_stats,
        list_campaign_rules,
        validate_rule,
        simulate_rule,
        activate_rule,
        deactivate_rule,
        create_rule_draft,
        set_rule_formula,
        set_rule_criteria,
        submit_rule,
        get_rule_draft,
    )
}
