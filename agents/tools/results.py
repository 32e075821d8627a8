"""Cuts a tool result to a token budget for the model; JSON stays valid JSON and every cut is marked, never silent.

JSON (a dict or list, or text that parses as a JSON object or array) keeps its
shape: arrays keep as many leading items as fit and end with a marker item
("… 37 more items cut"), objects keep their leading keys (a marker key "…"
counts the rest), long strings keep their start and end with
"… [cut 1234 chars]", and the budget is shared so small values stay whole.
Plain text keeps its first tokens and ends with a line saying how many
characters were cut ("… [cut 1234 chars]"). Token counts are cl100k counts (catalog.models.tokens); the returned text
is counted again before it is returned, so it always fits. Only a bounded
prefix of a long text or string is ever tokenized, so the time a cut takes
does not grow with the size of the result.
"""

from __future__ import annotations

import json
from functools import cache

from catalog.models.tokens import count_tokens, encoding

MIN_PARTIAL_TOKENS = 16  # below this, a value that does not fit is left out rather than cut to a stub
_RETRIES = 12
_ITEMS_PER_TOKEN = 4  # at most this many JSON items (`"",` or `{},`) share one token


def truncate_result(content: object, max_tokens: int) -> tuple[str, bool]:
    """(text for the model, whether anything was cut); the text has at most `max_tokens` tokens."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    text, value = _as_text_and_json(content)
    if _fits(text, max_tokens):
        return text, False
    if value is None:
        return _cut_text(text, max_tokens), True
    return _cut_json(value, max_tokens), True


def truncate_blocks(blocks: list[dict], max_tokens: int) -> tuple[list[dict], bool]:
    """MCP content blocks with their text cut to share `max_tokens`, in order; other blocks pass untouched.

    A text block keeps its other fields (annotations); text blocks that get no room are left out and one text block
    at the end says how many characters went.
    """
    remaining, kept, cut, dropped = max_tokens, [], False, 0
    for block in blocks:
        if block.get("type") != "text" or not isinstance(block.get("text"), str):
            kept.append(block)
            continue
        if remaining < MIN_PARTIAL_TOKENS:
            cut, dropped = True, dropped + len(block["text"])
            continue
        text, was_cut = truncate_result(block["text"], remaining)
        cut = cut or was_cut
        remaining -= count_tokens(text)  # at most `remaining` tokens: bounded, whatever the block's size
        kept.append(block if text == block["text"] else {**block, "text": text})
    if dropped:
        kept.append({"type": "text", "text": _chars_marker(dropped)})
    return kept, cut


def _as_text_and_json(content: object) -> tuple[str, object]:
    """The text as given (or serialized) and, when it is a JSON object or array, its parsed value."""
    if isinstance(content, str):
        if content.lstrip()[:1] in ("{", "["):
            try:
                return content, json.loads(content)
            except (ValueError, RecursionError):
                pass
        return content, None
    try:
        text = _dumps(content)
    except (TypeError, ValueError, RecursionError):  # not JSON-serialisable, NaN, ints past the str limit
        return _plain(content), None
    value = json.loads(text)  # normalised: tuples are lists, keys are strings
    return text, value if isinstance(value, dict | list) else None


def _plain(content: object) -> str:
    try:
        return str(content)
    except Exception:  # a __str__ that fails, or nesting past the recursion limit
        return f"<a {type(content).__name__} that cannot be shown as text>"


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _fits(text: str, budget: int) -> bool:
    # A token is at least one byte and at most the longest token's bytes: short and long text need no encoding.
    if len(text) <= budget // 4:
        return True
    size = len(text.encode())
    return size <= budget or (size <= budget * _longest_token_bytes() and count_tokens(text) <= budget)


@cache
def _longest_token_bytes() -> int:
    return max(len(token) for token in encoding().token_byte_values())


def _cut_text(text: str, max_tokens: int) -> str:
    tokens = _prefix_tokens(text, max_tokens)
    keep = max_tokens
    for _ in range(_RETRIES):
        kept = _decode_prefix(tokens, keep)
        candidate = f"{kept}\n{_chars_marker(len(text) - len(kept))}"
        overshoot = count_tokens(candidate) - max_tokens
        if overshoot <= 0:
            return candidate
        keep = _shrink(keep, overshoot, max_tokens)
        if keep <= 0:
            break
    for fallback in (_chars_marker(len(text)), "…"):
        if count_tokens(fallback) <= max_tokens:
            return fallback
    return ""


def _prefix_tokens(text: str, max_tokens: int) -> list[int]:
    """The tokens of a prefix of `text` holding more than `max_tokens` tokens: never the whole of a long text.

    Most tokens are a few characters, so a short prefix usually does; a token is never longer than the longest
    token's bytes (each at least a character), so a prefix of max_tokens * that many characters always does.
    """
    for chars in (max_tokens * 8 + 64, (max_tokens + 1) * _longest_token_bytes()):
        tokens = encoding().encode(text[:chars], disallowed_special=())
        if len(tokens) > max_tokens or chars >= len(text):
            return tokens
    return tokens


def _shrink(keep: int, overshoot: int, budget: int) -> int:
    """Fewer tokens to keep, in proportion to the overshoot (JSON escapes can make one kept token cost several)."""
    return min(keep - 1, keep * budget // (budget + overshoot))


def _decode_prefix(tokens: list[int], count: int) -> str:
    """The first `count` tokens as text, dropping a character split between tokens."""
    return encoding().decode_bytes(tokens[: max(count, 0)]).decode("utf-8", errors="ignore")


def _cut_json(value: dict | list, max_tokens: int) -> str:
    shrinker = _Shrinker(max_tokens)
    budget = max_tokens
    try:
        for _ in range(_RETRIES):
            text = _dumps(shrinker.fit(value, budget))
            overshoot = count_tokens(text) - max_tokens
            if overshoot <= 0:
                return text
            budget -= max(overshoot, budget // 10, 1)  # pieces' counts do not add up exactly; tighten and retry
            if budget < 1:
                break
    except RecursionError:  # nesting deeper than Python's recursion limit: only the stub below is left
        pass
    stub = [_items_marker(len(value))] if isinstance(value, list) else {"…": _keys_marker(len(value))}
    text = _dumps(stub)
    return text if count_tokens(text) <= max_tokens else _dumps(type(value)())


def _items_marker(count: int) -> str:
    return f"… {count} more items cut"


def _keys_marker(count: int) -> str:
    return f"{count} more keys cut"


def _chars_marker(count: int) -> str:
    return f"… [cut {count} chars]"


class _Shrinker:
    """Reduces one JSON value to token budgets, remembering what each part of the original costs."""

    def __init__(self, max_tokens: int):
        self._max_tokens = max_tokens  # no budget is larger, so a cost past it need not be exact
        self._costs: dict[int, int] = {}  # id of a part of the original value -> its token count

    def cost(self, part: object) -> int:
        """Tokens of a part of the original value (alive for the whole cut, so its id is stable).

        A part too large to fit any budget gets a lower bound instead, found without serializing it, which keeps a
        cut of megabytes as fast as a cut of kilobytes.
        """
        key = id(part)
        if key not in self._costs:
            floor = _token_floor(part, self._max_tokens)
            if floor > self._max_tokens:
                self._costs[key] = floor
            else:
                text = _dumps(part)
                size = len(text.encode())
                self._costs[key] = size // _longest_token_bytes() if size > self._max_tokens * _longest_token_bytes() \
                    else count_tokens(text)  # fmt: skip
        return self._costs[key]

    def fit(self, value: object, budget: int) -> object:
        """`value` reduced so that its JSON costs about `budget` tokens or less."""
        if self.cost(value) <= budget:
            return value
        if isinstance(value, str):
            return _cut_string(value, budget)
        if isinstance(value, list):
            return self._cut_list(value, budget)
        if isinstance(value, dict):
            return self._cut_dict(value, budget)
        return _chars_marker(len(_dumps(value)))  # a number too long for the budget

    def _cut_list(self, items: list, budget: int) -> list:
        marker_cost = count_tokens(_dumps(_items_marker(len(items)))) + 1
        kept: list = []
        used = 2  # the brackets
        for index, item in enumerate(items):
            comma = 1 if kept else 0
            last = index == len(items) - 1
            if used + comma + self.cost(item) + (0 if last else marker_cost) <= budget:
                kept.append(item)
                used += comma + self.cost(item)
                continue
            room = budget - used - comma - marker_cost
            if room >= MIN_PARTIAL_TOKENS and isinstance(item, str | list | dict):
                kept.append(self.fit(item, room))
            break
        if len(kept) < len(items):
            kept.append(_items_marker(len(items) - len(kept)))
        return kept

    def _cut_dict(self, mapping: dict, budget: int) -> dict:
        keys = list(mapping)
        marker_key = "…"
        while marker_key in mapping:
            marker_key += "…"
        marker_cost = count_tokens(_dumps({marker_key: _keys_marker(len(keys))}))
        overheads: dict = {}  # the key, its colon and a comma; counted only for the keys looked at

        # Keep leading keys while each still gets at least a small value.
        committed = 2  # the braces
        kept_keys: list = []
        for index, key in enumerate(keys):
            reserve = 0 if index == len(keys) - 1 else marker_cost
            overheads[key] = count_tokens(_dumps(key)) + 2
            need = overheads[key] + min(self.cost(mapping[key]), MIN_PARTIAL_TOKENS)
            if committed + need + reserve > budget:
                break
            kept_keys.append(key)
            committed += need
        available = budget - 2 - sum(overheads[key] for key in kept_keys)
        if len(kept_keys) < len(keys):
            available -= marker_cost

        # Share what is left: cheap values stay whole, the expensive ones split the rest evenly.
        shares: dict = {}
        by_cost = sorted(kept_keys, key=lambda key: self.cost(mapping[key]))
        for position, key in enumerate(by_cost):
            shares[key] = min(self.cost(mapping[key]), max(available // (len(by_cost) - position), 0))
            available -= shares[key]

        result = {}
        for key in kept_keys:
            value = mapping[key]
            small_scalar = not isinstance(value, str | list | dict) and self.cost(value) <= MIN_PARTIAL_TOKENS
            if small_scalar or self.cost(value) <= shares[key]:
                result[key] = value
            else:
                result[key] = self.fit(value, max(shares[key], MIN_PARTIAL_TOKENS))
        if len(kept_keys) < len(keys):
            result[marker_key] = _keys_marker(len(keys) - len(kept_keys))
        return result


def _token_floor(part: object, limit: int) -> int:
    """A lower bound of the tokens of `part` as JSON, looked for only until it passes `limit`.

    A token is at most the longest token's bytes, so a string has at least len / that many; the punctuation
    between a container's items is a few characters, so a few items share at most one token.
    """
    if isinstance(part, str):
        return len(part) // _longest_token_bytes()
    if isinstance(part, dict):
        items = [value for pair in part.items() for value in pair]
    elif isinstance(part, list):
        items = part
    else:
        return 1
    floor = len(items) // _ITEMS_PER_TOKEN
    for item in items:
        if floor > limit:
            break
        floor += _token_floor(item, limit - floor)
    return floor


def _cut_string(text: str, budget: int) -> str:
    room = budget - count_tokens(_dumps(_chars_marker(len(text))))
    if room <= 0:
        return _chars_marker(len(text))
    # Encode only a prefix long enough for `room` tokens: a cl100k token rarely spans more than 32 characters.
    tokens = encoding().encode(text[: room * 32 + 64], disallowed_special=())
    keep = room
    for _ in range(_RETRIES):
        kept = _decode_prefix(tokens, keep)
        candidate = kept + _chars_marker(len(text) - len(kept))
        overshoot = count_tokens(_dumps(candidate)) - budget
        if overshoot <= 0:
            return candidate
        keep = _shrink(keep, overshoot, budget)
        if keep <= 0:
            break
    return _chars_marker(len(text))
