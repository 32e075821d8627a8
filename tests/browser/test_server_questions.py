"""An MCP server's question during a turn's tool call, answered on the conversation's page from the keyboard alone:
the card shows the server's message and a form built from its schema, and the answer reaches the tool's result, the
timeline and the model's answer live. Saves test-artifacts/screenshots/console-question-1280.png (docs/screenshots/
holds a copy)."""

import sys

from playwright.sync_api import expect

from agents.models import ModelProfile, ServerQuestion, Turn
from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer, Tool
from tests.support.builders import make_policy
from tests.support.scripted_openai import ScriptedOpenAI


def asking_server() -> None:
    server = McpServer.objects.create(name="asking", command=sys.executable,
                                      args=["-m", "tests.support.asking_mcp_server"])  # fmt: skip
    assert sync_server(server).ok
    make_policy(Tool.objects.get(name="ask"))
    Tool.objects.filter(name="ask").update(always_load=True)


def test_an_operator_answers_a_servers_question_on_the_conversation_page_by_keyboard(
    page, log_in, ask_in_console, screenshot
):
    asking_server()
    with ScriptedOpenAI() as model:
        ModelProfile.objects.create(name="scripted", upstream_model="scripted", base_url=model.base_url,
                                    context_window=8192, max_output_tokens=512, reserved_result_tokens=512)  # fmt: skip
        model.steps = [{"tool_calls": [{"name": "ask", "arguments": {"value": "Which colour should the banner be?"}}]},
                       {"content": "The banner will be teal."}]  # fmt: skip
        log_in(page, "operator")
        ask_in_console(page, "Use ask to choose the banner's colour", model="scripted")
        card = page.locator(".question-pending")
        card.wait_for()
        expect(card).to_contain_text("waiting for an answer from the operator")
        expect(card.locator(".question-message")).to_have_text("Which colour should the banner be?")
        expect(card).to_contain_text("(required)")

        card.get_by_label("Answer").focus()
        page.keyboard.type("teal")
        screenshot(page, "console-question-1280")
        page.keyboard.press("Tab")
        expect(card.get_by_role("button", name="Submit")).to_be_focused()
        page.keyboard.press("Enter")

        turn = Turn.objects.get()
        events = page.locator(f"#turn-{turn.id}-events")
        expect(events).to_contain_text('operator answered the server\'s question: {"answer": "teal"}')
        page.locator(f"#turn-{turn.id} .status-done").wait_for()
        expect(events).to_contain_text('action=accept content={"answer": "teal"}')
        expect(page.locator(f"#turn-{turn.id}-content")).to_contain_text("The banner will be teal.")
    question = ServerQuestion.objects.get()
    assert (question.status, question.answer, question.answered_by.username) == ("answered", {"answer": "teal"},
                                                                                  "operator")  # fmt: skip
