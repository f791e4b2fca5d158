"""The decision data part, offer ids and the action vocabulary (research §1.2-§1.4)."""

from __future__ import annotations

import pytest

from app.db.states import CANCELED, COMPLETED, INPUT_REQUIRED, REJECTED
from app.negotiation.decision import (
    MEDIA_TYPE,
    Decision,
    DecisionError,
    decision_from_data,
    decision_of,
    decisions_of,
    intent_of,
)
from app.negotiation.vocabulary import Action, Vocabulary


def test_a_decision_travels_as_one_json_data_part() -> None:
    d = Decision("propose", "400?", {"amount": 400}, "o-1")
    part = d.to_part()
    assert part == {
        "data": {
            "action": "propose",
            "message": "400?",
            "terms": {"amount": 400},
            "offerId": "o-1",
        },
        "mediaType": MEDIA_TYPE,
    }
    assert decision_of({"parts": [{"text": "hello"}, part]}) == d


def test_the_edge_mints_offer_ids_only_for_moves_with_terms() -> None:
    written = Decision("accept", "ok", {"amount": 1}, offer_id="model-made", accepts_offer_id="o-1")
    minted = written.with_offer_id(lambda: "edge-1")
    assert minted.offer_id == "edge-1" and minted.accepts_offer_id == "o-1"
    assert Decision("counter", "no", offer_id="model-made").with_offer_id().offer_id is None


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"message": "x"},
        {"action": "", "message": "x"},
        {"action": "a", "message": 3},
        {"action": "a", "message": "x", "terms": [1]},
        {"action": "a", "message": "x", "acceptsOfferId": 5},
    ],
)
def test_a_malformed_decision_is_refused(data: object) -> None:
    with pytest.raises(DecisionError):
        decision_from_data(data)


def test_a_counterpartys_odd_optional_field_is_dropped_when_reading_history() -> None:
    history = [
        {"parts": [{"data": {"action": "propose", "message": "x", "terms": "400"}}]},
        {"parts": [{"text": "prose only"}]},
        {"parts": [{"data": {"action": "accept", "message": "y"}}]},
    ]
    assert decisions_of(history) == [Decision("propose", "x"), Decision("accept", "y")]


def test_the_intent_rides_in_the_first_messages_metadata() -> None:
    assert intent_of({"metadata": {"io.looping.negotiation": {"intent": "sell the bike"}}}) == (
        "sell the bike"
    )
    assert intent_of({"metadata": {"io.looping.negotiation": "x"}}) is None
    assert intent_of({}) is None


def test_default_vocabulary_and_terminal_states() -> None:
    v = Vocabulary.build()
    assert v.names() == ("propose", "counter", "accept", "reject")
    assert v.task_state("propose") == INPUT_REQUIRED
    assert v.task_state("accept") == COMPLETED
    assert v.task_state("reject") == REJECTED
    assert v.task_state("withdraw") == CANCELED


def test_configured_actions_join_the_vocabulary_with_their_flags() -> None:
    v = Vocabulary.build(
        [
            Action("resolve", "the issue is fixed", terminal=True, state="completed"),
            Action("escalate", "hand to a human", terminal=True, state="canceled"),
            Action("triage", "ask a detail"),
        ]
    )
    assert v.names()[-3:] == ("resolve", "escalate", "triage")
    assert v.task_state("resolve") == COMPLETED
    assert v.task_state("escalate") == CANCELED
    assert v.task_state("triage") == INPUT_REQUIRED
    assert "resolve, escalate, triage." in v.skill_description()
    assert [a.shown() for a in v.offered(with_ask=True)][-1].startswith("ask (use only when")
