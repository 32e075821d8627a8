"""What an API client says of a request, kept on its conversation: OpenAI's `user` (whom the request is for, in the
client's own words) and `metadata` (tags, string to string). Both are optional; the console shows them and its
search filters by them (agents/console/turn_search.py).

OpenAI's limits hold: `user` up to 256 characters; `metadata` up to 16 pairs, keys up to 64 characters, values
strings up to 512. Control characters are refused (a NUL cannot be stored; the others could hide what a tag says);
HTML is stored as sent and shown as text. Anything else is a 400 naming the field.
"""

import re

from .errors import ApiError

MAX_USER = 256
MAX_PAIRS = 16
MAX_KEY = 64
MAX_VALUE = 512
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _text(value, *, field: str, limit: int, what: str) -> str:
    if not isinstance(value, str):
        raise ApiError(400, f"{what} must be a string.", param=field)
    if len(value) > limit:
        raise ApiError(400, f"{what} is {len(value)} characters long; at most {limit} are allowed.", param=field)
    if CONTROL.search(value):
        raise ApiError(400, f"{what} holds a control character.", param=field)
    return value


def parse_attribution(payload: dict) -> tuple[str, dict[str, str]]:
    """The request's `user` ("" without one) and `metadata` ({} without), checked against the limits above."""
    user = payload.get("user")
    end_user = "" if user is None else _text(user, field="user", limit=MAX_USER, what="user")
    metadata = payload.get("metadata")
    if metadata is None:
        return end_user, {}
    if not isinstance(metadata, dict):
        raise ApiError(400, "metadata must be an object of string keys and string values.", param="metadata")
    if len(metadata) > MAX_PAIRS:
        raise ApiError(400, f"metadata has {len(metadata)} keys; at most {MAX_PAIRS} are allowed.", param="metadata")
    tags = {}
    for key, value in metadata.items():
        name = _text(key, field="metadata", limit=MAX_KEY, what="A metadata key")
        if not name:
            raise ApiError(400, "A metadata key is empty.", param="metadata")
        tags[name] = _text(value, field="metadata", limit=MAX_VALUE, what=f"metadata[{name!r}]")
    return end_user, tags
