"""verifyAgreement and settle, exactly as the research file states them (§2), with its
tested examples (§5): both sides reach the same verdict from the same task."""

from __future__ import annotations

import pytest

from app.db.states import (
    CANCELED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    REJECTED,
    SUBMITTED,
    WORKING,
)
from app.negotiation.decision import Decision
from app.negotiation.settlement import (
    BASIS_ORDER,
    amounts_in,
    canonical,
    same_terms,
    settle,
    verify_agreement,
)
from app.negotiation.vocabulary import Vocabulary

VOCAB = Vocabulary.build()


def both(state: str, history: list[Decision]):  # type: ignore[no-untyped-def]
    """(initiator's settlement, responder's settlement) after the last round trip."""
    sent, reply = history[-2], history[-1]
    mine = settle(state, history, sent, reply, mine_first=True, is_terminal=VOCAB.is_terminal)
    theirs = settle(state, history, reply, sent, mine_first=False, is_terminal=VOCAB.is_terminal)
    return mine, theirs


@pytest.mark.parametrize(
    ("state", "word"),
    [(SUBMITTED, "submitted"), (WORKING, "working"), (INPUT_REQUIRED, "input-required")],
)
def test_an_open_task_is_open(state: str, word: str) -> None:
    verdict = verify_agreement(state, [Decision("accept", "yes")])
    assert (verdict.status, verdict.basis, verdict.reason) == (
        "open",
        "state",
        f"task is still {word}",
    )


@pytest.mark.parametrize(
    ("state", "word"), [(REJECTED, "rejected"), (CANCELED, "canceled"), (FAILED, "failed")]
)
def test_any_other_end_than_completed_is_declined(state: str, word: str) -> None:
    verdict = verify_agreement(state, [Decision("accept", "yes", {"amount": 1}, "o1")])
    assert (verdict.status, verdict.basis, verdict.reason) == (
        "declined",
        "state",
        f"task ended as {word}",
    )


def test_completed_without_decisions_is_unconfirmed() -> None:
    verdict = verify_agreement(COMPLETED, [])
    assert (verdict.status, verdict.reason) == (
        "unconfirmed",
        "task completed with no readable decisions",
    )


def test_accepting_the_named_offer_is_agreed_by_reference_on_both_sides() -> None:
    offer = Decision("propose", "460 on Wednesday", {"amount": 460, "day": "Wednesday"}, "o-1")
    accept = Decision("accept", "Deal.", {"day": "Wednesday", "amount": 460}, "o-2", "o-1")
    mine, theirs = both(COMPLETED, [offer, accept])
    for s in (mine, theirs):
        assert s is not None
        assert (s.outcome, s.basis) == ("agreed", "reference")
        assert s.terms == {"amount": 460, "day": "Wednesday"}
        assert s.reason == "Both sides closed on the same terms."
        assert s.binds_irreversibly


def test_accepting_an_offer_never_made_is_a_conflict_naming_it() -> None:
    verdict = verify_agreement(
        COMPLETED,
        [Decision("propose", "x", {"a": 1}, "o-1"), Decision("accept", "y", None, None, "o-9")],
    )
    assert (verdict.status, verdict.basis) == ("conflict", "reference")
    assert verdict.reason == 'closing move accepted offer "o-9", which appears nowhere in this task'


def test_accepting_with_other_terms_than_the_named_offer_is_a_conflict() -> None:
    verdict = verify_agreement(
        COMPLETED,
        [
            Decision("propose", "x", {"a": 1}, "o-1"),
            Decision("accept", "y", {"a": 2}, "o-2", "o-1"),
        ],
    )
    assert (verdict.status, verdict.basis, verdict.reason) == (
        "conflict",
        "reference",
        "closing move's own terms differ from the offer it accepted",
    )


def test_same_price_different_day_is_a_conflict_on_terms() -> None:
    history = [
        Decision("accept", "460 Wednesday", {"amount": 460, "pickupDay": "Wednesday"}, "o-1"),
        Decision("accept", "460 Saturday", {"amount": 460, "pickupDay": "Saturday"}, "o-2"),
    ]
    mine, theirs = both(COMPLETED, history)
    for s in (mine, theirs):
        assert s is not None and (s.outcome, s.basis) == ("conflict", "terms")
        assert s.reason == (
            "the two closing moves name different terms and neither references the other's offer"
        )
        assert not s.binds_irreversibly


def test_closing_terms_alone_are_agreed_on_terms() -> None:
    verdict = verify_agreement(
        COMPLETED, [Decision("counter", "450?"), Decision("accept", "ok", {"amount": 450}, "o")]
    )
    assert (verdict.status, verdict.basis, verdict.terms) == ("agreed", "terms", {"amount": 450})


def test_prose_acceptance_is_unconfirmed_from_both_ends() -> None:
    history = [
        Decision("counter", "I can do $450 if you pick it up Wednesday."),
        Decision("accept", "$450 works. Wednesday it is."),
    ]
    mine, theirs = both(COMPLETED, history)
    for s in (mine, theirs):
        assert s is not None and (s.outcome, s.basis) == ("unconfirmed", "state")
        assert s.reason.startswith("task completed, but no decision carried structured terms")


def test_accepts_naming_different_amounts_are_a_prose_conflict() -> None:
    history = [Decision("accept", "Fine, $460 it is."), Decision("accept", "Great — 450 dollars.")]
    mine, theirs = both(COMPLETED, history)
    assert mine is not None and (mine.outcome, mine.basis) == ("conflict", "prose")
    assert mine.disputed == ((460.0,), (450.0,))
    assert mine.reason == (
        "You closed on 460 and they closed on 450. Both of you said yes, to different numbers "
        "— this is not an agreement. Reopen it and settle on one."
    )
    assert theirs is not None and theirs.disputed == ((450.0,), (460.0,))
    assert mine.to_json()["disputed"] == {"mine": [460.0], "theirs": [450.0]}


def test_accept_into_a_reject_is_declined() -> None:
    mine, theirs = both(REJECTED, [Decision("accept", "yes"), Decision("reject", "no")])
    assert mine is not None and (mine.outcome, mine.basis) == ("declined", "state")
    assert mine.mine.action == "accept"
    assert mine.reason == "task ended as rejected"
    assert theirs is not None and theirs.outcome == "declined"


def test_two_rejects_are_declined() -> None:
    mine, _ = both(REJECTED, [Decision("reject", "no"), Decision("reject", "no either")])
    assert mine is not None and mine.outcome == "declined"


def test_closing_into_a_counter_is_unanswered_from_both_ends() -> None:
    history = [Decision("accept", "ok 450"), Decision("counter", "actually 470")]
    mine, theirs = both(INPUT_REQUIRED, history)
    assert mine is not None and (mine.outcome, mine.basis) == ("unanswered", "state")
    assert mine.reason == (
        'You closed with "accept", but they replied with "counter" rather than closing too. '
        "Nothing is agreed until they do."
    )
    assert theirs is not None and theirs.reason == (
        'They closed with "accept", but you replied with "counter" rather than closing too. '
        "Nothing is agreed until you do."
    )


def test_a_close_without_readable_reply_is_unanswered() -> None:
    s = settle(
        INPUT_REQUIRED,
        [Decision("accept", "ok")],
        Decision("accept", "ok"),
        None,
        mine_first=True,
        is_terminal=VOCAB.is_terminal,
    )
    assert s is not None and s.reason == (
        'You closed with "accept", but they sent no readable reply. Nothing is agreed.'
    )


def test_nothing_settles_while_nobody_closed() -> None:
    mine, theirs = both(INPUT_REQUIRED, [Decision("propose", "400"), Decision("counter", "450")])
    assert mine is None and theirs is None


def test_terms_compare_as_canonical_json() -> None:
    assert same_terms({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1.0})
    assert not same_terms({"b": [1, 2]}, {"b": [2, 1]})
    assert canonical({"z": {"y": 1, "x": 2}}) == '{"z":{"x":2,"y":1}}'


def test_amounts_follow_the_prose_rule() -> None:
    assert amounts_in("$1,250.50 or 300 euros, £ 7, 8 USD, 9 eur, 10 GBP, $1,250.50") == (
        1250.5,
        300.0,
        7.0,
        8.0,
        9.0,
        10.0,
    )
    assert amounts_in("450 on Wednesday at 5pm") == ()


def test_the_basis_runs_from_weakest_to_strongest() -> None:
    assert BASIS_ORDER == ("prose", "state", "terms", "reference")
