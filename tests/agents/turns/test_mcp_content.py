"""Full MCP content in chat turns: the model reads a line about each non-text block; the turn keeps them whole."""

import json
import sys

import pytest

from agents.models import Conversation, Message, TurnEvent
from agents.turns import runtime
from agents.turns.start import create_turn
from catalog.mcp_client import client as mcp_client
from catalog.mcp_client.content import model_text, summary
from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer, Tool
from tests.support.builders import make_policy, make_user
from tests.support.generated_mcp_server import CONTENT_TOOLS, PNG, WAV

pytestmark = pytest.mark.django_db

IMAGE = {"type": "image", "data": PNG, "mimeType": "image/png"}
CONTENT_SERVER = ["-m", "tests.support.generated_mcp_server", "--tools", "0", "--content"]


@pytest.fixture(autouse=True)
def _close_connections():
    yield
    mcp_client.close_all()


def test_the_model_reads_text_whole_and_one_line_for_each_other_kind_of_block():
    blocks = [
        {"type": "text", "text": "Here it is:"},
        IMAGE,
        {"type": "audio", "data": WAV, "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "gen://docs/readme", "name": "readme", "mimeType": "text/markdown",
         "description": "The readme"},
        {"type": "resource", "resource": {"uri": "gen://notes/1", "mimeType": "text/plain", "text": "Note one."}},
        {"type": "resource", "resource": {"uri": "gen://files/p.png", "mimeType": "image/png", "blob": PNG}},
    ]  # fmt: skip

    assert model_text(blocks).splitlines() == [
        "Here it is:",
        "[image image/png, 66 bytes, shown to the user]",
        "[audio audio/wav, 52 bytes, shown to the user]",
        "[resource link readme <gen://docs/readme>, text/markdown: The readme]",
        "[resource <gen://notes/1>, text/plain]",
        "Note one.",
        "[resource <gen://files/p.png>, image/png, 66 bytes of binary data]",
    ]
    assert PNG not in model_text(blocks) and WAV not in model_text(blocks)


def test_structured_content_alone_is_read_as_json():
    assert json.loads(model_text([], {"temperature": 31.5})) == {"temperature": 31.5}
    assert summary({"type": "hologram"}) == "[hologram content]"


@pytest.fixture
def content_turn(demo_catalog, scripted_model):
    """A chat turn whose model calls each content tool of the generated server once, then answers."""
    server = McpServer.objects.create(name="gen", command=sys.executable, args=CONTENT_SERVER)
    assert sync_server(server).ok
    for tool in Tool.objects.filter(name__startswith="gen_"):
        make_policy(tool)
    Tool.objects.filter(name__startswith="gen_").update(always_load=True)
    calls = [{"name": name, "arguments": {}} for name in CONTENT_TOOLS] + [
        {"name": "gen_weather", "arguments": {"city": "Hanoi"}}
    ]
    scripted_model.steps = [{"tool_calls": calls}, {"content": "Done."}]
    turn = create_turn(Conversation.objects.create(owner=make_user()), "show me the generated things")
    runtime.run_turn(turn.id)
    return turn, scripted_model


def test_a_turn_gives_the_model_summaries_and_keeps_every_block_whole_in_the_stored_result(content_turn):
    turn, model = content_turn

    stored = [m.result for m in Message.objects.filter(turn=turn, role="tool").order_by("id")]
    assert len(stored) == len(CONTENT_TOOLS) + 1
    expected = [[block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in blocks]
                for blocks in CONTENT_TOOLS.values()]  # fmt: skip
    assert [result["content"] for result in stored[:-1]] == expected
    assert stored[-1]["structuredContent"] == {"temperature": 31.5, "conditions": "Sunny in Hanoi"}
    sent = json.dumps(model.requests[-1]["messages"])
    assert PNG not in sent and WAV not in sent
    assert "[image image/png, 66 bytes, shown to the user]" in sent
    assert "Note one." in sent and "[resource link readme <gen://docs/readme>" in sent


def test_the_console_shows_images_and_audio_and_resources_whole(content_turn, client):
    turn, _ = content_turn
    results = [e.payload for e in TurnEvent.objects.filter(turn=turn, type=TurnEvent.Type.TOOL_RESULT)]
    assert results[0]["blocks"] == [IMAGE]  # the text block stays in the result preview
    client.force_login(make_user(username="viewer", role="viewer"))

    page = client.get(f"/console/{turn.conversation_id}/").content.decode()

    assert f'<img class="result-image" src="data:image/png;base64,{PNG}"' in page
    assert f'<audio controls src="data:audio/wav;base64,{WAV}"></audio>' in page
    assert "Resource link <strong>readme</strong> <code>gen://docs/readme</code>" in page
    assert ">Note one.</pre>" in page
    assert f'href="data:application/octet-stream;base64,{PNG}" download' in page


def test_a_block_that_could_run_in_the_page_is_not_shown_as_media():
    from agents.console.fragments import shown_block

    hostile = {"type": "image", "mimeType": "text/html", "data": "PHNjcmlwdD4="}
    assert shown_block(hostile)["kind"] == "unshown"
    assert shown_block({"type": "image", "mimeType": "image/png", "data": '" onerror="alert(1)'})["kind"] == "unshown"


def test_a_five_megabyte_result_is_cut_for_the_model_and_stored_whole(demo_catalog, scripted_model):
    server = McpServer.objects.create(name="gen", command=sys.executable, args=CONTENT_SERVER)
    sync_server(server)
    make_policy(Tool.objects.get(name="gen_big"))
    Tool.objects.filter(name="gen_big").update(always_load=True)
    scripted_model.steps = [{"tool_calls": [{"name": "gen_big", "arguments": {"bytes": 5_000_000}}]},
                            {"content": "Big."}]  # fmt: skip
    turn = create_turn(Conversation.objects.create(owner=make_user()), "get the big thing")

    runtime.run_turn(turn.id)

    message = Message.objects.get(turn=turn, role="tool")
    assert len(message.result["content"][0]["text"]) == 5_000_000
    assert message.content.endswith("chars]") and message.tokens <= 1024 + 20
