"""An MCP tool result as plain data, and the text a chat model reads of it.

Content blocks are kept as the server sent them, in MCP's JSON form (camelCase
keys, base64 data): text, image, audio, resource_link and resource (embedded).
`model_text` is what a model gets in a chat turn: text blocks whole, every
other block summarised on one line (an image's type and size, a resource
link's name and URI, an embedded text resource's text under its URI), or the
structuredContent as JSON when there is no block. Never changes a block.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

TEXT = "text"


def wire_block(block) -> dict:
    """A content block of the SDK as MCP JSON."""
    return block.model_dump(mode="json", by_alias=True, exclude_none=True)


def _size(base64_data: str) -> str:
    data = base64_data.rstrip()
    size = len(data) * 3 // 4 - data[-2:].count("=")
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


def summary(block: dict) -> str:
    """One line saying what a non-text block is (the model does not get its data)."""
    kind = block.get("type", "unknown")
    if kind in ("image", "audio"):
        return f"[{kind} {block.get('mimeType', '')}, {_size(block.get('data', ''))}, shown to the user]"
    if kind == "resource_link":
        mime = f", {block['mimeType']}" if block.get("mimeType") else ""
        about = f": {block['description']}" if block.get("description") else ""
        return f"[resource link {block.get('name', '')} <{block.get('uri', '')}>{mime}{about}]"
    if kind == "resource":
        resource = block.get("resource") or {}
        mime = f", {resource['mimeType']}" if resource.get("mimeType") else ""
        if isinstance(resource.get("text"), str):
            return f"[resource <{resource.get('uri', '')}>{mime}]\n{resource['text']}"
        return f"[resource <{resource.get('uri', '')}>{mime}, {_size(resource.get('blob', ''))} of binary data]"
    return f"[{kind} content]"


def model_text(blocks: Sequence[dict], structured: object = None) -> str:
    """The result as a chat model reads it."""
    parts = [block["text"] if block.get("type") == TEXT else summary(block) for block in blocks]
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False)
    return "\n".join(parts)


def non_text(blocks: Sequence[dict]) -> list[dict]:
    return [block for block in blocks if block.get("type") != TEXT]


def wire_result(blocks: Sequence[dict], structured: object, is_error: bool) -> dict:
    """A CallToolResult as MCP JSON: what is stored with a turn and passed on by toolhub's /mcp."""
    result = {"content": list(blocks), "isError": is_error}
    if structured is not None:
        result["structuredContent"] = structured
    return result
