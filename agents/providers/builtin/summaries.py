"""What the builtin model says: a tool result as sentences a person reads, and its question for a missing value.

Pure functions over the result as the tool sent it and the tool's schema;
they never add a fact the result does not hold.
"""

import json
import re

from django.conf import settings

LIST_KEYS = ("items", "results", "rows", "data", "records", "entries", "matches")
NAME_KEYS = ("name", "title", "code", "label", "full_name", "display_name")
MAX_ITEMS = 10
MAX_FIELDS = 12


def describe(tool: str, result) -> str:
    if isinstance(result, dict) and "error" in result:
        return str(result["error"])
    if tool == settings.TOOLHUB_CALCULATOR_TOOL and isinstance(result, dict) and "result" in result:
        return f"{result.get('expression', '')} = {result['result']}"
    if tool in settings.TOOLHUB_CLOCK_TOOLS and isinstance(result, dict):
        if "time" in result or "local_time" in result:
            return f"It is {result.get('local_time') or result.get('time')} in {result.get('timezone', 'UTC')}."
        if "date" in result:
            return f"Today is {result.get('weekday', '')} {result['date']} in {result.get('timezone', 'UTC')}."
    if tool == settings.TOOLHUB_WEB_SEARCH_TOOL and isinstance(result, dict) and "results" in result:
        lines = [f'Web results for "{result.get("query", "")}":']
        for item in result["results"]:
            lines.append(f"- {item.get('title', '')} ({item.get('url', '')}): {item.get('snippet', '')}")
        return "\n".join(lines) if result["results"] else "The web search found nothing."
    if isinstance(result, str):
        return result
    if isinstance(result, dict) and isinstance(result.get("chosen"), dict):  # a staged step's type choice
        return "Chose " + ", ".join(f"{name} type {kind}" for name, kind in result["chosen"].items()) + "."
    return summarise(tool, result)


def summarise(tool: str, result) -> str:
    """Any JSON result in a sentence or two: a list by count and names, an object by its plain fields."""
    listed = _listed(result)
    if listed is not None:
        key, items = listed
        total = result.get("total") if isinstance(result, dict) else None
        if not items:
            return f"{tool} found no {key}."
        shown = "; ".join(_item(item) for item in items[:MAX_ITEMS])
        more = f" (showing {min(len(items), MAX_ITEMS)} of {total or len(items)})" if (total or len(items)) > min(
            len(items), MAX_ITEMS) else ""  # fmt: skip
        count = total if isinstance(total, int) else len(items)
        return f"{tool} found {count} {key[:-1] if count == 1 and key.endswith('s') else key}{more}: {shown}."
    if isinstance(result, dict):
        fields = _fields(result)
        return f"{tool} returned {fields}." if fields else f"{tool} finished with no details."
    return f"{tool} returned {json.dumps(result, ensure_ascii=False)[:500]}."


def _listed(result) -> tuple[str, list] | None:
    if isinstance(result, list):
        return "items", result
    if not isinstance(result, dict):
        return None
    for key in LIST_KEYS:
        if isinstance(result.get(key), list):
            return key, result[key]
    lists = [(key, value) for key, value in result.items() if isinstance(value, list) and value and all(
        isinstance(v, dict) for v in value)]  # fmt: skip
    return lists[0] if len(lists) == 1 and len(result) <= 4 else None


def _item(item) -> str:
    if not isinstance(item, dict):
        return str(item)
    name = next((str(item[k]) for k in NAME_KEYS if isinstance(item.get(k), str | int)), None)
    identifier = next((str(v) for k, v in item.items() if k.endswith("id") and isinstance(v, str)), None)
    status = item.get("status")
    extras = [x for x in (identifier if name else None, status if isinstance(status, str) else None) if x]
    head = name or identifier or _fields(item, limit=4)
    return f"{head} ({', '.join(extras)})" if extras else head


def _fields(data: dict, *, limit: int = MAX_FIELDS) -> str:
    parts = []
    for key, value in data.items():
        if isinstance(value, str | int | float | bool):
            parts.append(f"{key.replace('_', ' ')} {value}")
        elif isinstance(value, dict):
            inner = next((str(value[k]) for k in (*NAME_KEYS, "amount", "id") if k in value), None)
            if inner is None and len(value) <= 3 and all(isinstance(v, str | int | float) for v in value.values()):
                inner = ", ".join(f"{k} {v}" for k, v in value.items())
            if inner:
                parts.append(f"{key.replace('_', ' ')} {inner}")
        elif isinstance(value, list):
            parts.append(f"{len(value)} {key.replace('_', ' ')}")
        if len(parts) >= limit:
            break
    return ", ".join(parts)


def question_for(tool: str, missing: list[str], parameters: dict) -> str:
    """The question for a tool's missing values: all named, the first asked for with what it looks like."""
    first = missing[0]
    hint = value_hint(_property(parameters, first))
    about = f" ({hint})" if hint else ""
    return f"To call {tool} I need {', '.join(missing)}: what is the {first}{about}?"


def value_hint(prop: dict) -> str:
    if isinstance(prop.get("enum"), list):
        return "one of " + ", ".join(str(v) for v in prop["enum"][:8])
    variants = [_tag(option) for option in prop.get("oneOf") or []]
    if variants and all(variants):
        return "one of " + ", ".join(variants)
    description = (prop.get("description") or "").strip()
    sentence = re.split(r"(?<=[.;])\s", description)[0].rstrip(".;") if description else ""
    if sentence and "e.g." not in sentence and re.search(r"e\.g\.", description):
        sentence = description.rstrip(".")
    if not sentence and _kinds(prop) & {"number", "integer"}:
        sentence = " ".join(["a number" if "number" in _kinds(prop) else "a whole number", *_bounds(prop)])
    if prop.get("pattern") and "e.g." not in sentence:
        sentence = f"{sentence}, matching {prop['pattern']}" if sentence else f"matching {prop['pattern']}"
    return sentence[:160]


def _kinds(prop: dict) -> set:
    kinds = prop.get("type")
    return set(kinds) if isinstance(kinds, list) else {kinds}


def _bounds(prop: dict) -> list[str]:
    words = {"minimum": "from", "exclusiveMinimum": "above", "maximum": "up to", "exclusiveMaximum": "below"}
    return [f"{word} {prop[key]}" for key, word in words.items() if isinstance(prop.get(key), int | float)]


def _tag(option) -> str | None:
    if not isinstance(option, dict):
        return None
    return next((p["const"] for p in (option.get("properties") or {}).values() if "const" in p), None)


def _property(parameters: dict, dotted: str) -> dict:
    prop = parameters
    for part in re.sub(r"\[\d+\]", "", dotted).split("."):
        prop = (prop.get("properties") or {}).get(part) or (prop.get("items") or {}).get("properties", {}).get(
            part) or {}  # fmt: skip
    return prop
