"""A request of several steps: each step gets its tool before any step gets a second one."""

import functools

import pytest

from agents.router import analyze
from agents.router.fusion import segments
from bench.evaluation import bench_context, tool_documents
from catalog.search import embeddings
from catalog.search.index import ToolSearchIndex
from tests.catalog.search.test_search import bag_of_words_embedder


def tool(name, description):
    return {"name": name, "description": description, "parameters": {"type": "object", "properties": {}}}


CATALOG = [
    tool("get_weather", "Weather forecast for a city."),
    tool("get_weather_alerts", "Severe weather alerts and storm warnings for a city."),
    tool("get_weather_history", "Past weather observations for a city."),
    tool("book_flight", "Book a flight ticket between two airports."),
    tool("convert_currency", "Convert an amount of money from one currency to another."),
    tool("send_email", "Send an email message to a recipient."),
]


@pytest.fixture
def context(monkeypatch):
    monkeypatch.setattr(embeddings, "embed_texts", bag_of_words_embedder)
    index = ToolSearchIndex(tool_documents(CATALOG), embedder=functools.partial(bag_of_words_embedder))
    return bench_context(CATALOG, index, routing=index)


@pytest.mark.parametrize(
    "text",
    [
        "Check the weather forecast and storm alerts in Paris. Then book a flight to Rome, after that convert "
        "200 dollars to euro currency. Lastly, send an email to Bob.",
        "Xem weather forecast Paris, sau đó book a flight to Rome, tiếp theo convert 200 dollars currency, "
        "cuối cùng send an email to Bob",
    ],
)
def test_every_step_gets_its_tool_before_near_duplicates_of_the_first(context, text):
    assert len(segments(text)) >= 4
    picks = analyze(text, context=context, mode="rules", max_tools=5, min_tools=5).recommended_tools
    assert {"book_flight", "convert_currency", "send_email"} <= set(picks), picks


def test_the_fill_takes_each_steps_next_candidate_in_turn(context):
    text = "weather in Paris, then send an email to Bob"
    picks = analyze(text, context=context, mode="rules", max_tools=6, min_tools=6).recommended_tools
    first_two = set(picks[:2])
    assert "send_email" in first_two and first_two & {"get_weather", "get_weather_alerts", "get_weather_history"}


def test_a_connective_inside_a_clause_does_not_split_it():
    assert segments("I finally got the next invoice, show it") == []
    assert segments("Then, find the stock price of Apple") == []


def test_near_duplicates_of_a_strong_step_do_not_crowd_out_a_later_one(context):
    text = "weather forecast, weather alerts, weather history for Paris, then send an email to Bob"
    picks = analyze(text, context=context, mode="rules", max_tools=3, min_tools=0).recommended_tools
    assert "send_email" in picks, picks
