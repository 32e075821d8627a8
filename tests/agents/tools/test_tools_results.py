"""Tool results are cut to a token budget: JSON stays valid JSON, every cut is marked, what fits is untouched."""

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.tools.results import truncate_result
from catalog.models.tokens import count_tokens, encoding

encoding()  # load the encoding once here, not inside the first hypothesis example


def test_text_that_fits_is_returned_untouched():
    assert truncate_result("The answer is 42.", 50) == ("The answer is 42.", False)


def test_long_text_keeps_its_start_and_says_how_many_characters_were_cut():
    text = " ".join(f"line {n} of the log" for n in range(2000))

    cut, was_cut = truncate_result(text, 100)

    assert was_cut is True
    assert count_tokens(cut) <= 100
    kept, last_line = cut.rsplit("\n", 1)
    assert text.startswith(kept) and count_tokens(kept) > 80  # the budget is used
    cut_chars = int(re.fullmatch(r"… \[cut (\d+) chars\]", last_line).group(1))
    assert len(kept) + cut_chars == len(text)


@pytest.mark.parametrize(
    "make_content",  # made when the case runs: collecting ~20 MB of cases cost each process ~0.7 s
    [
        lambda: "a" * 5_000_000,  # one endless word
        lambda: "record value " * 400_000,
        lambda: json.dumps({f"key{n}": n for n in range(300_000)}),
        lambda: json.dumps({"data": [{"id": n, "text": "word " * 10} for n in range(60_000)]}),
        lambda: {"blob": "QUJD" * 1_250_000},
    ],
    ids=["word", "prose", "wide-object", "nested-array", "long-string"],
)
def test_megabytes_are_cut_to_the_budget_without_tokenizing_them_whole(make_content, monkeypatch):
    from agents.tools import results

    content = make_content()

    encoded = []
    real = results.encoding()

    class Counting:
        def __getattr__(self, name):
            return getattr(real, name)

        def encode(self, text, **kwargs):
            encoded.append(len(text))
            return real.encode(text, **kwargs)

    monkeypatch.setattr(results, "encoding", lambda: Counting())
    monkeypatch.setattr(results, "count_tokens", lambda text: encoded.append(len(text)) or count_tokens(text))

    text, was_cut = truncate_result(content, 1024)

    assert was_cut and count_tokens(text) <= 1024
    assert max(encoded) <= (1024 + 1) * 128  # never more than a bounded prefix (the longest cl100k token: 128 bytes)


def test_text_cut_never_leaves_half_a_character():
    cut, was_cut = truncate_result("Tạo chiến dịch mới 🎉 " * 500, 60)
    assert was_cut and "\ufffd" not in cut and count_tokens(cut) <= 60


def test_long_array_keeps_leading_items_and_counts_the_rest():
    rows = [{"id": n, "name": f"customer {n}", "tier": "gold"} for n in range(200)]

    text, was_cut = truncate_result(rows, 300)

    assert was_cut is True
    assert count_tokens(text) <= 300
    kept = json.loads(text)
    marker = kept.pop()
    assert kept == rows[: len(kept)]
    assert len(kept) > 10
    assert marker == f"… {200 - len(kept)} more items cut"


def test_long_string_inside_an_object_is_cut_with_a_marker_and_small_fields_stay_whole():
    page = {"url": "https://example.org/a", "status": 200, "body": "lorem ipsum dolor sit amet " * 2000}

    text, was_cut = truncate_result(page, 200)

    assert was_cut is True and count_tokens(text) <= 200
    shown = json.loads(text)
    assert shown["url"] == page["url"] and shown["status"] == 200
    kept_body, cut_chars = re.fullmatch(r"(.*)… \[cut (\d+) chars\]", shown["body"], re.DOTALL).groups()
    assert page["body"].startswith(kept_body)
    assert len(kept_body) + int(cut_chars) == len(page["body"])
    assert count_tokens(text) > 150  # the budget is used, not wasted


def test_nested_results_stay_valid_json():
    result = {
        "query": "toolhub",
        "results": [{"title": f"Result {n}", "snippet": "word " * 300, "tags": list(range(50))} for n in range(20)],
    }
    text, was_cut = truncate_result(result, 400)
    assert was_cut is True and count_tokens(text) <= 400
    shown = json.loads(text)
    assert shown["query"] == "toolhub"
    assert shown["results"][0]["title"] == "Result 0"
    assert shown["results"][-1].endswith("more items cut")


def test_json_text_is_treated_as_json():
    text, was_cut = truncate_result(json.dumps(list(range(5000))), 60)
    assert was_cut is True and count_tokens(text) <= 60
    numbers = json.loads(text)
    assert numbers[:3] == [0, 1, 2] and numbers[-1].endswith("more items cut")


def test_json_text_that_fits_is_returned_as_given():
    given_text = '{ "a": [1, 2, 3] }'
    assert truncate_result(given_text, 50) == (given_text, False)


def test_object_with_many_keys_keeps_leading_keys_and_counts_the_rest():
    mapping = {f"key{n}": n for n in range(500)}
    text, was_cut = truncate_result(mapping, 80)
    shown = json.loads(text)
    marker = shown.pop("…")
    assert list(shown) == [f"key{n}" for n in range(len(shown))]
    assert marker == f"{500 - len(shown)} more keys cut"
    assert count_tokens(text) <= 80


def test_string_of_characters_json_escapes_still_keeps_its_start():
    noisy = '\x00\x01"\\' * 5000
    text, was_cut = truncate_result({"raw": noisy}, 100)
    kept = re.fullmatch(r"(.*)… \[cut \d+ chars\]", json.loads(text)["raw"], re.DOTALL).group(1)
    assert was_cut and count_tokens(text) <= 100
    assert len(kept) >= 8 and noisy.startswith(kept)


def test_nesting_past_the_recursion_limit_is_cut_not_raised():
    deep = "[" * 5000 + "]" * 5000
    text, was_cut = truncate_result(deep, 50)
    assert was_cut and count_tokens(text) <= 50


def test_content_that_is_not_json_is_cut_as_text():
    text, was_cut = truncate_result({1, 2, 3}, 50)
    assert (text, was_cut) == ("{1, 2, 3}", False)


def test_budget_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        truncate_result("text", 0)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=30) | st.dictionaries(st.text(max_size=20), children, max_size=12),
    max_leaves=60,
)
json_containers = st.lists(json_values, max_size=30) | st.dictionaries(st.text(max_size=20), json_values, max_size=12)


@given(json_containers, st.integers(min_value=50, max_value=600), st.booleans())
def test_json_always_fits_stays_json_and_is_untouched_when_it_fits(value, limit, as_text):
    content = json.dumps(value, ensure_ascii=False) if as_text else value
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    text, was_cut = truncate_result(content, limit)

    assert count_tokens(text) <= limit
    json.loads(text)
    original = content if as_text else compact
    if count_tokens(original) <= limit:
        assert (text, was_cut) == (original, False)
    else:
        assert was_cut is True


@given(st.text(max_size=3000), st.integers(min_value=50, max_value=400))
def test_text_always_fits_and_is_untouched_when_it_fits(text, limit):
    shown, was_cut = truncate_result(text, limit)
    assert count_tokens(shown) <= limit
    assert was_cut is (count_tokens(text) > limit)
    if not was_cut:
        assert shown == text
