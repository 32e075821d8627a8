"""The router's two rankings: the routing model's decides the request, both models' order its candidate tools."""

import numpy as np

from agents.router import ConversationState
from agents.router.fusion import Evidence, fuse
from agents.router.lexicon import Hits, Lexicon
from agents.router.nearest_examples import Neighbours
from agents.router.rules import StewardContext, gather, whole_and_clauses
from catalog.models import Action, Operation

OPERATIONS = {"get_member_points": Operation.READ, "award_points": Operation.CREATE, "list_members": Operation.LIST}
DOMAINS = {name: frozenset({"loyalty"}) for name in OPERATIONS}


def evidence(ranking, tool_ranking=None):
    return Evidence("q", Neighbours(), ranking, Hits(), OPERATIONS, DOMAINS, tool_ranking=tool_ranking)


ROUTING = [("get_member_points", 0.86), ("list_members", 0.85), ("award_points", 0.84)]
BOTH = [("list_members", 0.61), ("get_member_points", 0.58), ("award_points", 0.40)]


def test_candidates_are_scored_by_both_models_when_their_ranking_is_given():
    routed = fuse(evidence(ROUTING, BOTH), ConversationState())
    assert max(routed.tool_scores, key=routed.tool_scores.get) == "list_members"
    assert routed.tool_scores == dict(BOTH)


def test_the_decision_is_the_routing_models_whatever_the_candidates_ranking():
    alone = fuse(evidence(ROUTING), ConversationState())
    both = fuse(evidence(ROUTING, BOTH), ConversationState())
    assert alone.tool_scores == dict(ROUTING)
    assert both.decision == alone.decision
    assert both.raw_confidence == alone.raw_confidence
    assert both.decision.action == Action.GET


def test_the_second_models_vectors_of_a_request_and_its_clauses_come_from_one_call_of_the_clauses():
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)[: len(texts)]

    vectors = whole_and_clauses(["list members and award points", "list members", "award three points"], embed)
    assert calls == [["list members", "award three points"]]
    # The request's vector: its clauses' summed, weighted by their words (2 and 3), unit length.
    np.testing.assert_allclose(vectors[0], np.array([2.0, 3.0]) / np.hypot(2.0, 3.0), rtol=1e-6)
    np.testing.assert_allclose(vectors[1:], [[1.0, 0.0], [0.0, 1.0]])
    assert whole_and_clauses(["list members"], embed).shape == (1, 2)


def test_with_no_examples_to_compare_with_the_clauses_are_read_as_written_only():
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return np.eye(len(texts), 4, dtype=np.float32)

    context = StewardContext(entries=(), search=lambda *args: [], lexicon=Lexicon({}, {}, {}), embed=embed)
    evidence = gather(["list members and award three points", "list members", "award three points"], context)
    assert calls == [["list members", "award three points"]]  # no generic forms: only example neighbours use them
    assert len(evidence) == 3
