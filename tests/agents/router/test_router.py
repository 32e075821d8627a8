"""The router on the demo catalog with the real multilingual model: wordings, languages, intents, fail-closed.

Every request here is worded apart from the demo's examples and from the bench's
routing cases: the router must understand them, not recognise them.
"""

import json

import numpy as np
import pytest

from agents.models import ActionWord, IntentExample
from agents.router import ConversationState, StewardContext, analyze, calibration
from agents.router import rules as steward
from agents.router.fusion import Evidence, fuse, segments
from agents.router.lexicon import Hits
from agents.router.nearest_examples import ExampleIndex, Label
from catalog.models import Action
from catalog.policies.bundle import allowed_names, build_bundle
from catalog.policies.decision import RoutingDecision, load_catalog
from catalog.search import embeddings

pytestmark = pytest.mark.django_db

WRITES = {Action.CREATE, Action.UPDATE, Action.DELETE, Action.EXECUTE}


@pytest.fixture(autouse=True)
def demo(demo_catalog):
    return demo_catalog


def recommended(text, state=None):
    return list(analyze(text, state).recommended_tools)


@pytest.mark.parametrize(
    "text",
    ["multiply thirty-six by eleven please", "what is the square root of 196", "chia hóa đơn 750 nghìn cho 3 người"],
)
def test_arithmetic_in_words_recommends_the_calculator(text):
    result = analyze(text)
    assert result.recommended_tools[0] == "calculate"
    assert result.intent == "math"


@pytest.mark.parametrize("text", ["is it the weekend yet", "hôm nay là ngày mấy rồi"])
def test_a_date_question_without_the_word_time_gets_a_clock_tool_and_the_time_injected(text):
    result = analyze(text)
    assert {"get_current_time", "get_current_date"} & set(result.recommended_tools)
    assert result.silent and result.context.startswith("Current date and time: ")


@pytest.mark.parametrize(
    "text",
    [
        "will there be a storm in Da Nang tomorrow",
        "giá bitcoin bây giờ là bao nhiêu",
        "who is the president of the US right now",
    ],
)
def test_real_time_facts_get_web_search_without_trigger_words(text):
    assert recommended(text)[0] == "web_search"


@pytest.mark.parametrize(
    "text",
    [
        "explain why the moon has phases",
        "viết một đoạn giới thiệu ngắn về Hà Nội",
        "Who was the first president of the United States?",
        "Ai là tổng thống đầu tiên của Hoa Kỳ?",
    ],
)
def test_general_knowledge_gets_no_tools(text):
    result = analyze(text)
    assert result.recommended_tools == ()
    assert result.decision.action == Action.ANSWER and result.intent == "general"


@pytest.mark.parametrize(
    "text,tool",
    [
        ("thành viên M-812 đang có bao nhiêu điểm vậy", "get_member_balance"),
        ("tạm ngưng chiến dịch Black Friday giùm mình", "pause_campaign"),
        ("tặng thêm 300 điểm cho hội viên M-77", "award_points"),
    ],
)
def test_vietnamese_requests_reach_their_tool_and_domain(text, tool):
    result = analyze(text)
    assert tool in result.recommended_tools
    assert result.decision.domains & {"loyalty", "campaigns", "members"}


def test_a_confident_write_is_exposed_by_the_bundle(settings):
    result = analyze("please give member M-91 a hundred goodwill points")
    assert result.decision.action == Action.EXECUTE
    assert result.decision.confidence >= settings.TOOLHUB_MIN_CONFIDENCE
    assert result.recommended_tools[0] == "award_points"
    bundle = build_bundle(result.decision, load_catalog(), recommended=result.recommended_tools)
    assert "award_points" in bundle.loaded_names


def test_two_intents_in_one_request_get_the_tools_of_each():
    tools = recommended("show me the campaigns that are live right now and also what's 12% of 4,500")
    assert {"list_campaigns", "search_campaigns"} & set(tools)
    assert "calculate" in tools


def test_a_multi_clause_request_embeds_each_clause_once_and_never_the_whole_request(monkeypatch):
    asked = []
    real = embeddings.embed_texts

    def counting(texts, **kwargs):
        asked.append((kwargs.get("model"), sorted(texts)))
        return real(texts, **kwargs)

    monkeypatch.setattr(embeddings, "embed_texts", counting)
    context = StewardContext.current()
    analyze("list the campaigns", context=context)  # the indexes are built
    asked.clear()
    result = analyze("how many points does M-214 have and what time is it in Lisbon", context=context)
    assert {"get_member_balance", "get_current_time"} <= set(result.recommended_tools)
    clauses = ["how many points does M-214 have", "what time is it in Lisbon"]
    # One call a model, the whole request read by neither: the routing model reads the clauses as written and in
    # their generic form, the search model (the candidates' second ranking) the clauses as written.
    assert sorted(asked) == sorted(
        [
            (embeddings.routing_model(), sorted([*clauses, "how many points does X have", "what time is it in X"])),
            (embeddings.search_model(), sorted(clauses)),
        ]
    )


def test_a_read_question_inside_a_workflow_is_a_side_query_with_read_tools_only():
    state = ConversationState("loyalty_rule", "rule_formula", Action.CREATE)
    result = analyze("có chiến dịch nào đang active không?", state)
    assert result.decision.side_query and result.decision.phase == "rule_formula"
    bundle = build_bundle(result.decision, load_catalog(), recommended=result.recommended_tools)
    catalog = {entry.name: entry for entry in load_catalog()}
    side_tools = [n for n in bundle.loaded_names if not catalog[n].policy.workflow_phases and n != "tool_search"]
    assert side_tools and all(catalog[n].policy.operation in {"read", "list", "search"} for n in side_tools)


@pytest.mark.parametrize("text", ["use a multiplier", "save it"])
def test_a_step_of_a_started_workflow_passes_the_gate_however_high_it_is(text, settings):
    settings.TOOLHUB_MIN_CONFIDENCE = 0.99
    state = ConversationState("loyalty_rule", "rule_formula", Action.CREATE)
    result = analyze(text, state)
    assert not result.decision.side_query and result.decision.phase == "rule_formula"
    assert "set_rule_formula" in build_bundle(result.decision, load_catalog()).loaded_names


@pytest.mark.parametrize(
    "text", ["I'd like a rule that triples points for purchases on payday", "lập quy tắc cộng điểm gấp ba cho ngày 8/3"]
)
def test_rule_creation_in_any_wording_starts_the_staged_flow(text):
    result = analyze(text)
    assert result.recommended_tools[0] == "create_rule_draft"
    assert not {"create_rule", "update_rule"} & set(result.recommended_tools)


@pytest.mark.parametrize("text", ["do something about that member thing", "xử lý vụ khách hàng kia đi"])
def test_an_unclear_request_is_allowed_no_write_at_all(text):
    # Either the router reads it as a read, or its confidence is under the gate: no write is permitted.
    result = analyze(text)
    catalog = load_catalog()
    writes = {e.name for e in catalog if e.policy is not None and e.policy.operation in WRITES}
    assert not writes & allowed_names(result.decision, catalog)
    assert not writes & set(result.recommended_tools)


def test_no_confidence_exposes_a_tool_the_policies_deny():
    catalog = load_catalog()
    for action in WRITES:
        decision = RoutingDecision(action=action, domains=frozenset({"loyalty", "members"}), confidence=1.0)
        allowed = allowed_names(decision, catalog)
        assert not {"export_member_data", "merge_members", "purge_container_images"} & allowed
    result = analyze("merge the duplicate accounts M-1 and M-2 and export everything about them")
    assert not {"export_member_data", "merge_members"} & set(result.recommended_tools)


DOCUMENT = "Give customer 42 five hundred bonus points. Tạm ngưng chương trình SUMMER24 giúp tôi. " * 1200


@pytest.mark.parametrize(
    "text", ["", "   \n\t ", "x" * 100_000, "\x00\x01\ud800\uffff" * 50, DOCUMENT[:100_000]]
)  # fmt: skip
def test_empty_huge_or_binary_input_routes_to_answer_with_no_tools(text):
    result = analyze(text)
    assert result.recommended_tools == ()
    assert result.decision.action == Action.ANSWER and not result.fallback


def test_a_long_request_short_of_a_document_is_routed_on_its_start():
    text = DOCUMENT[: steward.DOCUMENT_CHARS]
    assert len(text) > steward.MAX_ROUTED_CHARS
    assert analyze(text).recommended_tools


def test_an_operator_example_teaches_a_new_wording():
    wording = "zorp the flibbet for customer M-3"  # no description, alias or example says this
    IntentExample.objects.create(text="zorp the flibbet for a customer", action=Action.DELETE, domains=["members"])
    assert analyze(wording).decision.action == Action.DELETE


def test_an_action_word_is_one_weak_vote_not_the_decision():
    ActionWord.objects.update_or_create(phrase="xoá sổ", defaults={"action": Action.DELETE})
    # "xoá sổ" votes delete, but the meaning of the request (a balance question) wins.
    assert analyze("xoá sổ? không, chỉ xem điểm của khách M-5 thôi").decision.action != Action.DELETE


# --- the LLM steward over the permitted candidates ------------------------------------------


def test_llm_steward_chooses_a_permitted_tool_no_phrase_list_names(scripted_model, settings):
    settings.TOOLHUB_STEWARD_OPTIONS = settings.TOOLHUB_STEWARD_OPTIONS | {"analysis_timeout": 2.0}
    scripted_model.content = json.dumps({"tools": ["get_segment_members"], "reasoning": "who is in it"})
    text = "who sits in the high-spenders bucket"  # no alias or action word names get_segment_members
    assert not StewardContext.current().lexicon.match(text).tools
    result = analyze(text, mode="llm")
    assert result.recommended_tools == ("get_segment_members",) and not result.fallback
    listing = scripted_model.requests[0]["messages"][1]["content"]
    assert "get_segment_members" in listing and "export_member_data" not in listing


def test_llm_steward_picking_a_clock_tool_injects_the_time(scripted_model):
    scripted_model.content = json.dumps({"tools": ["get_current_date"], "reasoning": "date"})
    result = analyze("is it a holiday today in Vietnam", mode="llm")
    assert result.recommended_tools == ("get_current_date",)
    assert result.silent and result.intent == "time"


# --- pure parts ------------------------------------------------------------------------------


def test_segments_split_on_connectives_not_on_commas():
    assert segments("list paused campaigns and tell me the time in Hanoi") == [
        "list paused campaigns",
        "tell me the time in Hanoi",
    ]
    assert segments("a bag costs 189k, add 10% VAT, total?") == []
    assert segments("chiến dịch nào đang chạy, và giá vàng hôm nay") == ["chiến dịch nào đang chạy", "giá vàng hôm nay"]


def test_and_between_two_names_or_ids_joins_them_it_does_not_start_a_clause():
    assert segments("merge members M-10 and M-11 into one account") == []
    assert segments("compare SUMMER24 and TET25 by points issued") == []
    assert segments("so sánh SUMMER24 và TET25 giúp tôi") == []
    assert segments("what time is it in Tokyo and Paris") == []
    # A name before the connective and a clause after it still split.
    assert segments("how many points does M-300 have and what time is it in Tokyo") == [
        "how many points does M-300 have",
        "what time is it in Tokyo",
    ]
    assert segments("pause SUMMER24 and list the active campaigns") == ["pause SUMMER24", "list the active campaigns"]


def test_nearest_answer_examples_mean_no_tool():
    vectors = np.eye(3, dtype=np.float32)
    index = ExampleIndex([Label(Action.ANSWER, frozenset()), Label(Action.GET, frozenset({"web"}), "web_search"),
                          Label(Action.GET, frozenset({"web"}), "web_search")], vectors)  # fmt: skip
    evidence = Evidence("q", index.nearest(vectors[0]), [("web_search", 0.5)], Hits(), {"web_search": "search"},
                        {"web_search": frozenset({"web"})})  # fmt: skip
    routed = fuse(evidence, ConversationState())
    assert not routed.needs_tool and routed.decision.action == Action.ANSWER
    evidence.neighbours = index.nearest(vectors[1])
    routed = fuse(evidence, ConversationState())
    assert routed.needs_tool and routed.decision.domains == {"web"}


def test_calibration_is_monotone_and_derives_the_write_gate():
    samples = [(0.35, False, True)] * 3 + [(0.5, True, True)] * 9 + [(0.5, False, True)] + [(0.95, True, True)] * 10
    fitted = calibration.fit(samples)
    values = [point[1] for point in fitted["points"]]
    assert values == sorted(values)
    # Writes from the 0.45 bin up are right 19 of 20 times (>= 0.9): the gate is that bin's calibrated value.
    assert fitted["min_confidence"] == pytest.approx(0.9, abs=0.001)
    assert calibration.fit([(0.9, False, True)])["min_confidence"] == 1.0


def test_a_full_top_bin_does_not_carry_the_wrong_writes_of_a_low_one():
    # Pooled from the lowest bin, 20 right writes out of 22 would pass 0.9 and open the gate at 0.
    samples = [(0.1, False, True), (0.35, False, True)] + [(0.95, True, True)] * 20
    fitted = calibration.fit(samples)
    assert fitted["min_confidence"] == fitted["bins"][-1]["calibrated"]


@pytest.mark.parametrize(
    "text",
    [
        "does member M-300 still have any vouchers left?",
        "voucher của khách M-300 còn hạn không",
        "is the weekend bonus campaign paused?",
    ],
)
def test_a_question_that_asks_for_no_action_never_decides_a_write(text):
    result = analyze(text)
    assert result.decision.action not in WRITES
    assert result.recommended_tools
    assert not set(result.recommended_tools) - set(allowed_names(result.decision, load_catalog()))


def test_a_request_cue_keeps_a_write_that_is_phrased_as_a_question():
    result = analyze("bạn tạm dừng chiến dịch SUMMER24 giúp mình được không?")
    assert result.decision.action == Action.EXECUTE
    assert "pause_campaign" in result.recommended_tools


def test_a_request_that_opens_with_a_read_verb_reads_whatever_it_names():
    result = analyze("liệt kê giúp mình những chiến dịch đã bị tạm dừng")
    assert result.decision.action in {Action.LIST, Action.SEARCH, Action.GET}
    assert "pause_campaign" not in result.recommended_tools


def test_mood_cues_come_from_data():
    from agents.models import MoodWord

    text = "M-300 vouchers lah"
    before = StewardContext.current().lexicon.match(text)
    assert not before.question
    MoodWord.objects.create(phrase="lah", mood=MoodWord.Mood.QUESTION, position=MoodWord.Position.END)
    assert StewardContext.current().lexicon.match(text).question


def test_vietnamese_typed_without_diacritics_reads_like_with_them():
    lexicon = StewardContext.current().lexicon
    assert lexicon.match("tam dung campaign SUMMER24").actions == lexicon.match("tạm dừng campaign SUMMER24").actions
    # One-word forms are not folded: English "them" is not Vietnamese "thêm" (add).
    assert not lexicon.match("send them the report").actions.get(Action.CREATE)
    assert recommended("khach M-205 con bao nhieu diem")[0] == "get_member_balance"
    assert recommended("liet ke cac chien dich dang chay")[0] == "list_campaigns"


@pytest.mark.parametrize(
    "text",
    [
        "create a campaign 'Back to School' running Aug 1-31",
        "tạo chiến dịch 'Mừng 8/3' chạy từ 1/3 đến 10/3",
        "show the points earned by order ORD-2024-11",
    ],
)
def test_dates_quoted_names_and_ids_are_not_arithmetic(text):
    assert "calculate" not in recommended(text)


def test_a_request_reads_the_catalog_state_once(django_assert_max_num_queries):
    analyze("list the active campaigns")  # warm: indexes built
    with django_assert_max_num_queries(1):
        analyze("how many points does M-100 have")


@pytest.mark.parametrize("text", ["5318 x 27 = ?", "what's 72 X 15"])
def test_an_x_between_numbers_is_multiplication(text):
    # A written-out expression is the calculator's alone (the examples alone would add other tools).
    assert recommended(text) == ["calculate"]


def test_an_x_after_a_number_is_still_a_multiplier_not_arithmetic():
    assert "calculate" not in recommended("create a campaign with 2x points on weekends")


@pytest.mark.parametrize(
    "text",
    [
        "make this friendlier: 'Your voucher expires tomorrow, redeem your points now'",
        'dịch sang tiếng Anh: "Quý khách được cộng 500 điểm thưởng vào tài khoản"',
    ],
)
def test_quoted_text_is_content_to_work_on_not_the_request(text):
    # The quote talks about vouchers and points; the request around it asks for writing help.
    assert recommended(text) == []


def test_one_wrong_write_between_full_bins_does_not_shut_the_gate_above_them():
    # Writes: 0.60 bin 5/5, 0.70 bin 8/8, 0.80 bin 7/8, 0.90 bin 18/18. Bin by bin the 0.80 bin (0.875)
    # would push the gate to the top bin; the monotone fit pools it with the two below (20/21 = 0.95).
    samples = (
        [(0.35, False, True)] * 2
        + [(0.65, True, True)] * 5
        + [(0.75, True, True)] * 8
        + [(0.85, True, True)] * 7
        + [(0.85, False, True)]
        + [(0.95, True, True)] * 18
    )
    fitted = calibration.fit(samples)
    gate_bin = next(b for b in fitted["bins"] if b["calibrated"] == fitted["min_confidence"])
    assert gate_bin["raw_from"] == 0.6
    assert fitted["bins"][1]["calibrated"] < fitted["min_confidence"]  # the 0.30 bin's wrong writes stay out


def test_a_bin_with_wrong_writes_pooled_with_a_good_one_stays_below_the_gate():
    # The 0.45 bin's writes are right 1 of 2; the 0.60 bin is less accurate overall, so the monotone
    # fit pools the two into one value. The gate must still shut out the 0.45 bin.
    samples = (
        [(0.5, False, True), (0.5, True, True)]
        + [(0.5, True, False)] * 9
        + [(0.65, True, True), (0.65, False, False)]
        + [(0.95, True, True)] * 10
    )
    fitted = calibration.fit(samples)
    failing = [b for b in fitted["bins"] if b["writes"] and b["writes_right"] / b["writes"] < 0.9]
    assert failing
    assert all(b["calibrated"] < fitted["min_confidence"] for b in failing)


def test_a_process_starting_later_embeds_no_example_again(monkeypatch, settings):
    from agents.router.nearest_examples import load_examples
    from catalog.search import embeddings

    settings.TOOLHUB_VECTOR_CACHE = ""  # the database alone must hold them

    load_examples()  # the first process: every form of every example is stored
    embeddings.forget_memo()  # a new process remembers nothing in memory
    forwarded = []
    real = embeddings._forward_e5
    monkeypatch.setattr(embeddings, "_forward_e5", lambda texts: forwarded.extend(texts) or real(texts))
    index = load_examples()
    assert len(index) > 800 and forwarded == []


@pytest.mark.parametrize(
    "text",
    ["delete it", "xóa nó đi", "remove that one", "go ahead and do it", "xoá hết đi", "cancel it", "hủy cái đó luôn"],
)
def test_a_destructive_request_with_no_object_exposes_no_write_tool(text):
    result = analyze(text)
    catalog = load_catalog()
    writes = {e.name for e in catalog if e.policy is not None and e.policy.operation in WRITES}
    assert not writes & allowed_names(result.decision, catalog), result.decision
    assert not writes & set(result.recommended_tools)


def test_the_same_verb_with_its_object_still_reaches_the_write():
    result = analyze("delete the rule WEEKEND_BONUS")
    assert "delete_rule" in allowed_names(result.decision, load_catalog())
