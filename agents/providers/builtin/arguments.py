"""Reading a tool's arguments from what the user wrote, by the tool's JSON schema: the builtin model's filler.

One filler for every tool (toolhub's own, MCP and an API client's): ids by their
schema `pattern` (or the shape of the description's example, or the word that
names them: "member 42"), numbers and amounts (digits, "2 million", "189k",
"five hundred"), enum values and `const` by name, dates (ISO, today/tomorrow),
free text for reason-, name- and query-like fields, nested objects and arrays
of them. Every value read is checked against its own schema; one that does not
fit is not that value.

It must never guess: a value the request does not state, or states ambiguously,
is missing, and the model asks for it by name (design seed 002). Optional
fields are filled only by the exact readers (enum names, ids of a specific
pattern, ISO dates, places), never by free text or a lone number.
"""

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import jsonschema
from django.utils import timezone

from .readers import (
    EMAIL,
    arithmetic_expression,
    named_text,
    numbers,
    place,
    reason_clause,
    salient_query,
    tokens,
)

PLACE_FIELDS = frozenset({"location", "city", "place", "where", "timezone", "zone", "tz"})
QUERY_FIELDS = frozenset({"query", "q", "search", "keyword", "keywords", "text", "question", "prompt", "input",
                          "message", "topic", "term"})  # fmt: skip
REASON_FIELDS = frozenset({"reason", "note", "notes", "comment", "comments", "justification", "why", "memo",
                           "description", "details", "remark", "remarks"})  # fmt: skip
NAME_FIELDS = frozenset({"name", "new_name", "title", "label", "display_name", "nickname"})
EXPRESSION_FIELDS = frozenset({"expression", "expr", "formula_text", "equation"})
ID_WORDS = frozenset({"id", "ids", "code", "key", "ref", "number", "no"})
LABEL_SKIP = frozenset({"named", "called", "id", "code", "number", "no", "#", ":", "=", "is", "of", "with"})
STOPWORDS = frozenset(
    "a an the this that these those to for of in on at by from with and or is are was be it its my our your their "
    "me us them please now all any some what which who how when where why do does show give get set make add "
    "remove move check list find".split()
)
NEGATIVE_WORDS = re.compile(r"\b(?:remove|deduct|subtract|take away|minus|decrease|reduce|lower|trừ|bớt|giảm)\b", re.I)
SOURCE_WORDS = ("from", "từ", "of")
TARGET_WORDS = ("to", "into", "sang", "cho", "đến", "tới")
GENERIC_SAMPLES = ("the", "show", "web", "Please", "member")
OPERATOR_SYMBOLS = {">=": "gte", "=>": "gte", "<=": "lte", "=<": "lte", "!=": "neq", ">": "gt", "<": "lt", "=": "eq"}
RELATIVE_DAYS = {"today": 0, "hôm nay": 0, "tomorrow": 1, "ngày mai": 1, "yesterday": -1, "hôm qua": -1}


@dataclass(frozen=True)
class Request:
    """What the user said for this call, oldest first (the newest text wins), and values tools returned
    that the conversation keeps (a workflow's ids, by field name)."""

    texts: tuple[str, ...]
    known: Mapping[str, object] = field(default_factory=dict)

    @property
    def newest_first(self) -> tuple[str, ...]:
        return tuple(reversed(self.texts))


@dataclass(frozen=True)
class Filled:
    arguments: dict
    missing: list[str]  # dotted names of required values not stated ("period.start")


def fill_arguments(parameters: dict, request: Request) -> Filled:
    """The tool's required arguments (and the optional ones stated exactly) read from the request."""
    arguments, missing = _fill_object(parameters or {}, request, prefix="")
    return Filled(arguments, missing)


def client_arguments(parameters: dict, text: str) -> tuple[dict, list[str]]:
    """(arguments read from `text`, names of the required ones it could not read)."""
    filled = fill_arguments(parameters, Request((text,)))
    return filled.arguments, filled.missing


def _fill_object(schema: dict, request: Request, *, prefix: str) -> tuple[dict, list[str]]:
    properties = schema.get("properties") or {}
    required = [name for name in schema.get("required") or [] if isinstance(name, str)]
    arguments, missing, used = {}, [], set()
    for name in [*required, *(n for n in properties if n not in required)]:
        prop = properties.get(name) or {}
        is_required = name in required
        if name in request.known and _fits(request.known[name], prop):
            arguments[name] = request.known[name]
            continue
        value, inner_missing = _read(name, prop, request, required=is_required, used=used, prefix=prefix)
        if value is not None and not is_required and value in arguments.values():
            continue  # an optional field never repeats a value another field took (a period's end is not its start)
        if value is not None:
            arguments[name] = value
        elif is_required:
            missing += inner_missing or [f"{prefix}{name}"]
    return arguments, missing


def _read(name: str, prop: dict, request: Request, *, required: bool, used: set, prefix: str):
    """(value or None, the dotted names missing inside it)."""
    if "const" in prop:
        return prop["const"], []
    kinds = prop.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "object" in kinds or ("properties" in prop and kinds == [None]):
        if not required:
            return None, []
        value, missing = _fill_object(prop, request, prefix=f"{prefix}{name}.")
        return (None, missing) if missing else (value, [])
    if isinstance(prop.get("oneOf"), list):
        return _read_variant(name, prop["oneOf"], request, required=required, prefix=prefix)
    if "array" in kinds and not set(kinds) & {"string", "number", "integer"}:
        return (_read_array(name, prop, request, prefix=prefix) if required else None), []
    for text in request.newest_first:
        value = _read_scalar(name, prop, text, kinds, required=required, used=used)
        if value is not None and _fits(value, prop):
            return value, []
    return None, []


def _read_scalar(name: str, prop: dict, text: str, kinds: list, *, required: bool, used: set):
    lowered = name.lower()
    if isinstance(prop.get("enum"), list):
        return _enum_value(prop["enum"], text)
    if kinds and set(kinds) & {"integer", "number"}:
        if not required:
            return None
        value = _number(name, prop, text, used)
        if value is not None or "string" not in kinds:
            return value
    if "string" not in kinds and kinds != [None]:
        return None
    if prop.get("pattern"):
        return _pattern_value(name, prop["pattern"], text, used)
    fmt = prop.get("format")
    if fmt in ("date", "date-time"):
        return _date(text, with_time=fmt == "date-time", exact=not required)
    if fmt == "email" or lowered in ("email", "email_address"):
        found = {m.group(0) for m in EMAIL.finditer(text)}
        return found.pop() if len(found) == 1 else None
    if lowered in PLACE_FIELDS:
        return place(text)
    if not required:
        return None
    if lowered in EXPRESSION_FIELDS:
        return arithmetic_expression(text)
    if lowered in QUERY_FIELDS:
        return salient_query(text)
    if lowered in REASON_FIELDS or lowered.endswith(("_reason", "_note")):
        return reason_clause(text)
    if lowered in NAME_FIELDS or lowered.endswith("_name"):
        return named_text(text)
    if lowered.endswith("_id") or lowered in ID_WORDS:
        return _example_value(prop, text, used) or _labelled_token(name, text, used, None)
    return _labelled_token(name, text, used, None)


# --- ids ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=512)
def _search_pattern(pattern: str) -> tuple[re.Pattern | None, bool]:
    """(the pattern unanchored, for searching a text; whether it is generic: it matches plain words too)."""
    body = pattern[1:] if pattern.startswith("^") else pattern
    body = body[:-1] if body.endswith("$") and not body.endswith("\\$") else body
    try:
        whole = re.compile(pattern)
        found = re.compile(rf"(?<![\w-])(?:{body})(?![\w-])")
    except re.error:
        return None, True
    return found, any(whole.search(word) and whole.fullmatch(word) for word in GENERIC_SAMPLES)


def _pattern_value(name: str, pattern: str, text: str, used: set):
    found, generic = _search_pattern(pattern)
    if found is None:
        return None
    if generic:  # any word would fit: only the word the field's name points at ("the web container")
        return _labelled_token(name, text, used, found)
    matches = [m for m in found.finditer(text) if m.group(0) not in used]
    distinct = list(dict.fromkeys(m.group(0) for m in matches))
    if len(distinct) > 1:
        distinct = _by_role(name, text, matches) or _by_label(name, text, matches) or distinct
        if len(set(distinct)) > 1 and not _ordered_role(name):
            return None
    if not distinct:
        return None
    used.add(distinct[0])
    return distinct[0]


def _ordered_role(name: str) -> bool:
    """A field of a pair (from/to, source/target) takes the ids in the order the request names them."""
    words = set(name.lower().split("_"))
    return bool(words & {"from", "source", "to", "target", "old", "new"})


def _by_role(name: str, text: str, matches: list) -> list[str]:
    words = set(name.lower().split("_"))
    before = SOURCE_WORDS if words & {"from", "source", "old"} else TARGET_WORDS if words & {"to", "target"} else ()
    return [m.group(0) for m in matches if _word_before(text, m.start()) in before]


def _by_label(name: str, text: str, matches: list) -> list[str]:
    labels = _labels(name)
    return [m.group(0) for m in matches if _word_before(text, m.start()) in labels]


def _word_before(text: str, at: int) -> str:
    words = re.findall(r"[\wÀ-ỹ]+", text[:at].lower())
    return words[-1] if words else ""


def _labels(name: str) -> set[str]:
    words = [
        w
        for w in name.lower().split("_")
        if w and w not in ID_WORDS and w not in ("from", "to", "source", "target", "new", "old")
    ]
    words = words or [w for w in name.lower().split("_") if w]
    return {w for word in words for w in (word, word + "s", word + "es")}


def _labelled_token(name: str, text: str, used: set, shape: re.Pattern | None):
    """The token right after (or else right before) a word naming the field: "member 42", "the web container".

    `shape`: what the value must look like (the schema's pattern, unanchored), if anything."""
    labels = _labels(name)
    words = tokens(text)
    for index, word in enumerate(words):
        if word.lower() not in labels:
            continue
        after = [w for w in words[index + 1 : index + 3] if w.lower() not in LABEL_SKIP][:1]
        before = [words[index - 1]] if index else []
        for candidate in [*after, *before]:
            if candidate.lower() in STOPWORDS or candidate.lower() in labels or candidate in used:
                continue
            if shape is None or shape.fullmatch(candidate):
                used.add(candidate)
                return candidate
    if shape is not None:  # no word names it: a lone token that cannot be a plain word (example.com, web-1)
        marked = list(dict.fromkeys(w for w in words if re.search(r"[.\d_@-]", w) and shape.fullmatch(w)))
        marked = [w for w in marked if w not in used]
        if len(marked) == 1:
            used.add(marked[0])
            return marked[0]
    return None


def _example_value(prop: dict, text: str, used: set):
    """An id shaped like the description's example ("e.g. M-100": M-<letters or digits>), or None."""
    found = re.search(r"(?:e\.g\.|for example|like|such as|ví dụ)\s*[:`'\"]?([A-Za-z]+[-_][A-Za-z0-9]*\d[\w-]*)",
                      prop.get("description", ""), re.I)  # fmt: skip
    if not found:
        return None
    prefix = re.match(r"[A-Za-z]+[-_]", found.group(1)).group(0)
    shape = re.compile(rf"(?<![\w-]){re.escape(prefix)}[A-Za-z0-9]+(?![\w-])")
    distinct = [v for v in dict.fromkeys(m.group(0) for m in shape.finditer(text)) if v not in used]
    if len(distinct) != 1:
        return None
    used.add(distinct[0])
    return distinct[0]


# --- numbers, enums, dates -----------------------------------------------------------------------------


def _number(name: str, prop: dict, text: str, used: set):
    candidates = [(value, start, end) for value, start, end in numbers(text) if (start, end) not in used]
    if not candidates:
        return None
    if len(candidates) > 1:
        labels = _labels(name)
        near = [c for c in candidates if _near_label(text, c[1], c[2], labels)]
        if len(near) != 1:
            return None
        candidates = near
    value, start, end = candidates[0]
    if "integer" in _kinds(prop) and value != int(value):
        return None
    value = int(value) if "integer" in _kinds(prop) or value == int(value) else value
    if NEGATIVE_WORDS.search(text) and _signed(prop) and value > 0:
        value = -value
    used.add((start, end))
    return value


def _kinds(prop: dict) -> list:
    kinds = prop.get("type")
    return kinds if isinstance(kinds, list) else [kinds]


def _signed(prop: dict) -> bool:
    low = prop.get("minimum", prop.get("exclusiveMinimum"))
    return isinstance(low, int | float) and low < 0


def _near_label(text: str, start: int, end: int, labels: set[str]) -> bool:
    after = re.findall(r"[\wÀ-ỹ]+", text[end:].lower())[:2]
    before = re.findall(r"[\wÀ-ỹ]+", text[:start].lower())[-2:]
    return bool(labels & set(after + before))


def _enum_value(options: list, text: str):
    named = []
    for option in options:
        if isinstance(option, str):
            spoken = re.escape(option).replace("_", "[ _-]")
            flags = 0 if option.isupper() else re.I  # "A" (a DNS record type) is not the article "a"
            if re.search(rf"(?<![\w-]){spoken}(?![\w-])", text, flags):
                named.append(option)
        elif isinstance(option, int | float) and not isinstance(option, bool):
            if re.search(rf"(?<![\w.]){re.escape(str(option))}(?![\w.])", text):
                named.append(option)
    if not named:
        symbols = [OPERATOR_SYMBOLS[s] for s in re.findall(r"[<>!=]=|=[<>]|[<>=]", text) if s in OPERATOR_SYMBOLS]
        named = [value for value in dict.fromkeys(symbols) if value in options]
    named = [n for n in named if not any(n != other and str(n) in str(other) for other in named)]
    return named[0] if len(named) == 1 else None


def _date(text: str, *, with_time: bool, exact: bool):
    stamp = re.search(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?)?\b", text)
    day = None
    if stamp:
        value = stamp.group(0)
        if len(value) > 10:
            return value.replace(" ", "T") if with_time else value[:10]
        day = datetime.date.fromisoformat(value)
    elif not exact:
        lowered = text.lower()
        offsets = {offset for word, offset in RELATIVE_DAYS.items() if re.search(rf"(?<!\w){word}(?!\w)", lowered)}
        if len(offsets) == 1:
            day = timezone.localdate() + datetime.timedelta(days=offsets.pop())
        elif with_time and re.search(r"\b(?:now|right now|immediately)\b|bây giờ|ngay", lowered):
            return timezone.localtime().replace(microsecond=0).isoformat()
    if day is None:
        return None
    if not with_time:
        return day.isoformat()
    midnight = datetime.datetime.combine(day, datetime.time(), tzinfo=timezone.get_current_timezone())
    return midnight.isoformat()


# --- arrays and type variants ----------------------------------------------------------------------------


def _read_array(name: str, prop: dict, request: Request, *, prefix: str):
    items = prop.get("items") or {}
    least = max(1, prop.get("minItems", 1))
    if isinstance(items.get("enum"), list):
        for text in request.newest_first:
            named = [o for o in items["enum"] if _enum_value([o], text) is not None]
            if len(named) >= least and _fits(named, prop):
                return named
        return None
    if _kinds(items)[0] == "object" and least == 1:
        item, missing = _fill_object(items, request, prefix=f"{prefix}{name}[0].")
        return [item] if not missing and _fits([item], prop) else None
    return None


def _read_variant(name: str, options: list, request: Request, *, required: bool, prefix: str):
    """A `oneOf` of type-tagged variants: the one the request names, filled."""
    if not required:
        return None, []
    named = []
    for option in options:
        tag = next((p["const"] for p in (option.get("properties") or {}).values() if "const" in p), None)
        if isinstance(tag, str) and any(_enum_value([tag], text) for text in request.texts):
            named.append(option)
    if len(named) != 1:
        return None, [f"{prefix}{name}"]
    value, missing = _fill_object(named[0], request, prefix=f"{prefix}{name}.")
    return (None, missing) if missing else (value, [])


def _fits(value, prop: dict) -> bool:
    try:
        return next(iter(jsonschema.Draft202012Validator(prop).iter_errors(value)), None) is None
    except (jsonschema.exceptions.SchemaError, TypeError, ValueError):
        return False
