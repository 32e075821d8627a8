"""Tool examples: add (validated, merged, bounded, flood-capped), approve, edit, delete; never touches policy.

An example only helps search rank its tool (catalog.search.index documents the
fusion); whether a tool may be shown is the bundle's decision alone. Every
refusal is an ExampleRefused whose message says why.
"""

import hashlib
import logging
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F

from catalog.models import Tool, ToolExample

from . import embeddings
from .index import words

log = logging.getLogger(__name__)

# Two texts of one tool at least this close (cosine) are one example, merged.
NEAR_DUPLICATE_SIMILARITY = 0.95


class ExampleRefused(ValueError):
    """An example that cannot be stored; `field` names the form field the reason belongs to."""

    def __init__(self, message: str, field: str = "text"):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Added:
    example: ToolExample
    created: bool  # False: merged into an existing example of the same tool


def normalized(text: str) -> str:
    """What makes two texts the same example: their lowercase words, in order."""
    return " ".join(words(text))


def text_key(text: str) -> str:
    return hashlib.sha256(normalized(text).encode()).hexdigest()


def clean_text(text) -> str:
    """The text stripped, or ExampleRefused for an empty, word-less or oversized one."""
    text = " ".join(str(text or "").split())
    if not text:
        raise ExampleRefused("An example needs text: the request a user would write.")
    if len(text) > ToolExample.MAX_TEXT_CHARS:
        raise ExampleRefused(
            f"An example is at most {ToolExample.MAX_TEXT_CHARS:,} characters; this one has {len(text):,}."
        )
    if not normalized(text):
        raise ExampleRefused("An example needs words, not only punctuation.")
    return text


def check_tool(tool: Tool | str) -> Tool:
    """The tool (by instance or name) if it exists and is enabled, else ExampleRefused."""
    name = tool.name if isinstance(tool, Tool) else str(tool)
    found = Tool.objects.filter(name=name).first()
    if found is None:
        raise ExampleRefused(f"There is no tool named {name!r}.", field="tool")
    if not found.enabled:
        raise ExampleRefused(f"{name} is disabled; examples are only kept for enabled tools.", field="tool")
    return found


def add_example(
    *,
    tool: Tool | str,
    text: str,
    source: str = ToolExample.Source.OPERATOR,
    approved: bool = False,
    owner=None,
    turn_id: int | None = None,
    conversation_id: int | None = None,
) -> Added:
    """Store an example, or merge it into the same tool's equal or near-identical one.

    Learned examples are capped per conversation (TOOLHUB_LEARN_MAX_PER_CONVERSATION);
    each tool keeps at most TOOLHUB_MAX_EXAMPLES_PER_TOOL, the least useful learned ones
    going first (operators' examples are never evicted; a tool full of them refuses more).
    """
    tool = check_tool(tool)
    text = clean_text(text)
    if source not in ToolExample.Source.values:
        raise ExampleRefused(f"Unknown example source {source!r}.", field="source")
    owner_id = getattr(owner, "pk", owner)
    if source == ToolExample.Source.LEARNED and conversation_id is not None:
        cap = settings.TOOLHUB_LEARN_MAX_PER_CONVERSATION
        learned = ToolExample.objects.filter(source=ToolExample.Source.LEARNED, conversation_id=conversation_id)
        if learned.count() >= cap:
            raise ExampleRefused(f"This conversation already taught {cap} examples; no more are learned from it.")
    key = text_key(text)
    vector = _vector(text)
    with transaction.atomic():
        existing = _same_example(tool, key, vector, owner_id)
        if existing is not None:
            return Added(_merge(existing, approved=approved), created=False)
        _make_room(tool, source)
        example = ToolExample(
            tool=tool,
            text=text,
            text_key=key,
            source=source,
            approved=approved,
            owner_id=owner_id,
            turn_id=turn_id,
            conversation_id=conversation_id,
        )
        if vector is not None:
            example.model_name, example.vector, example.dim = embeddings.model_name(), _bytes(vector), vector.shape[0]
        try:
            with transaction.atomic():
                example.save()
        except IntegrityError:  # the same text was stored concurrently: merge into it
            existing = ToolExample.objects.get(tool=tool, text_key=key)
            return Added(_merge(existing, approved=approved), created=False)
    return Added(example, created=True)


def edit_example(example: ToolExample, *, text: str, approved: bool) -> ToolExample:
    """Change an example's text and approval; a text equal to another example of the tool is refused."""
    text = clean_text(text)
    key = text_key(text)
    if ToolExample.objects.filter(tool_id=example.tool_id, text_key=key).exclude(pk=example.pk).exists():
        raise ExampleRefused("This tool already has that example.")
    if key != example.text_key:
        vector = _vector(text)
        example.vector = _bytes(vector) if vector is not None else None
        example.dim = vector.shape[0] if vector is not None else 0
        example.model_name = embeddings.model_name() if vector is not None else ""
    example.text, example.text_key, example.approved = text, key, approved
    example.save()
    return example


def set_approved(example: ToolExample, approved: bool) -> ToolExample:
    example.approved = approved
    example.save(update_fields=["approved", "updated_at"])
    return example


def stored_vector(example: ToolExample, *, model: str | None = None) -> np.ndarray | None:
    """The example's stored vector if `model` (default: the search model) made it, else None."""
    if example.vector is None or example.model_name != embeddings.model_name(model) or not example.dim:
        return None
    raw = bytes(example.vector)
    return np.frombuffer(raw, dtype="<f4") if len(raw) == 4 * example.dim else None


def _same_example(tool: Tool, key: str, vector, owner_id) -> ToolExample | None:
    rows = ToolExample.objects.select_for_update().filter(tool=tool)
    same = rows.filter(text_key=key).first()
    if same is not None or vector is None:
        return same
    for row in rows.exclude(vector=None).only("id", "vector", "dim", "model_name", "owner_id", "approved"):
        stored = stored_vector(row)
        if stored is not None and stored.shape == vector.shape and row.owner_id in (None, owner_id):
            if float(stored @ vector) >= NEAR_DUPLICATE_SIMILARITY:
                return row
    return None


def _merge(existing: ToolExample, *, approved: bool) -> ToolExample:
    fields = {"seen_count": F("seen_count") + 1}
    if approved and not existing.approved:
        existing.approved = True
        existing.save(update_fields=["approved", "updated_at"])  # the index must learn it
    ToolExample.objects.filter(pk=existing.pk).update(**fields)
    existing.refresh_from_db(fields=["seen_count"])
    return existing


def _make_room(tool: Tool, source: str) -> None:
    """Evict learned/imported examples until one more fits; refuse when only operators' are left."""
    bound = settings.TOOLHUB_MAX_EXAMPLES_PER_TOOL
    rows = ToolExample.objects.filter(tool=tool)
    excess = rows.count() - bound + 1
    if excess <= 0:
        return
    evictable = rows.exclude(source=ToolExample.Source.OPERATOR).order_by("approved", "seen_count", "created_at")
    victims = list(evictable.values_list("pk", flat=True)[:excess])
    if len(victims) < excess:
        raise ExampleRefused(
            f"{tool.name} already has {bound} operator examples (TOOLHUB_MAX_EXAMPLES_PER_TOOL); delete one first."
        )
    ToolExample.objects.filter(pk__in=victims).delete()
    log.info("evicted %d example(s) of %s to stay within %d", len(victims), tool.name, bound)


def _vector(text: str) -> np.ndarray | None:
    """The text's dense vector when dense search is on (a query the steward just ranked is memoised)."""
    if not embeddings.dense_enabled():
        return None
    return np.asarray(_embed([text])[0], dtype=np.float32)


def _embed(texts: list[str]) -> np.ndarray:
    return embeddings.embed_texts(texts)


def _bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()
