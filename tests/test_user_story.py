"""A new user's chat, end to end with the real default embedder: a nurse in Lyon moves to
Montreal, changes what she drinks and eats; six sessions, 50 turns. Each question asks what a
memory for a chatbot must get right about the user's current facts."""

from __future__ import annotations

import datetime as dt

import pytest

from titans_agent import MemoryAgent

pytestmark = pytest.mark.integration

T0 = dt.datetime(2025, 3, 3, 9, 0, tzinfo=dt.timezone.utc)
SESSIONS = [
    [
        ("user", "Hi! I'm a nurse and I live in Lyon."),
        ("assistant", "Nice to meet you! Nursing is demanding work. How long have you lived in Lyon?"),
        ("user", "About six years now. I work night shifts at the hospital."),
        ("assistant", "Night shifts are tough. How do you stay awake?"),
        ("user", "I drink a double espresso every morning, and another before my shift."),
        ("assistant", "That is a lot of caffeine! Do you eat before work?"),
        ("user", "I'm vegetarian, so usually a lentil salad or some soup."),
        ("assistant", "Sounds healthy."),
    ],
    [
        ("user", "My partner Marc works as an architect in the old town."),
        ("assistant", "An architect! Does he design houses?"),
        ("user", "Mostly libraries and schools. He loves concrete."),
        ("assistant", "Brutalism has its fans."),
        ("user", "We have a cat called Biscuit."),
        ("assistant", "Cute name. How old is Biscuit?"),
        ("user", "She's three and very lazy."),
        ("assistant", "Cats are experts at resting."),
    ],
    [
        ("user", "I've started learning the cello."),
        ("assistant", "Wonderful. Are you taking lessons?"),
        ("user", "Yes, every Thursday with a teacher from the conservatory."),
        ("assistant", "What piece are you working on?"),
        ("user", "A simple Bach minuet, badly."),
        ("assistant", "Everyone starts somewhere."),
        ("user", "My sister Claire plays the violin, so we might duet."),
        ("assistant", "That would be lovely."),
    ],
    [
        ("user", "Work has been exhausting this month."),
        ("assistant", "I'm sorry. Too many patients?"),
        ("user", "The ward is understaffed and we keep doing double shifts."),
        ("assistant", "That sounds draining. Are you getting any rest?"),
        ("user", "Not really. I'm thinking about a change."),
        ("assistant", "What kind of change?"),
        ("user", "Maybe a new city. Marc got an offer abroad."),
        ("assistant", "Exciting! Where?"),
    ],
    [
        ("user", "Marc's offer is in Canada, at a firm in Montreal."),
        ("assistant", "Montreal is beautiful. Do you speak French already?"),
        ("user", "Of course, I'm French! The winters scare me though."),
        ("assistant", "They are cold, but the city is cosy."),
        ("user", "I'd need my nursing licence recognised in Quebec."),
        ("assistant", "There is a process with the Quebec order of nurses."),
        ("user", "I'll look into it next week."),
        ("assistant", "Good luck!"),
    ],
    [
        ("user", "Big news: I moved to Montreal last month."),
        ("assistant", "Congratulations! How is it going?"),
        ("user", "Great. My licence came through and I work at a hospital downtown."),
        ("assistant", "Fantastic."),
        ("user", "I switched from double espresso to green tea, my stomach thanks me."),
        ("assistant", "A gentler start to the day."),
        ("user", "Also I'm no longer vegetarian; I eat fish and chicken now."),
        ("assistant", "Big change! What made you switch?"),
        ("user", "Mostly the cold, honestly. I needed heartier food."),
        ("assistant", "Makes sense in a Montreal winter."),
    ],
]


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    turns = [
        {
            "session_id": f"s{i + 1}",
            "role": role,
            "content": text,
            "timestamp": T0 + dt.timedelta(days=30 * i, minutes=j),
        }
        for i, session in enumerate(SESSIONS)
        for j, (role, text) in enumerate(session)
    ]
    assert len(turns) == 50
    with MemoryAgent.open(tmp_path_factory.mktemp("story") / "memory.db") as agent:
        agent.add_turns(turns)
        yield agent


def _texts(agent, query, k=10, **kw):
    return [h.text for h in agent.recall(query, k=k, **kw)]


def _hit(agent, query, text):
    return next(h for h in agent.recall(query, k=50) if h.text == text)


ESPRESSO = "I drink a double espresso every morning, and another before my shift."
GREEN_TEA = "I switched from double espresso to green tea, my stomach thanks me."
VEGETARIAN = "I'm vegetarian, so usually a lentil salad or some soup."
NOT_VEGETARIAN = "Also I'm no longer vegetarian; I eat fish and chicken now."
NURSE_IN_LYON = "Hi! I'm a nurse and I live in Lyon."
MOVED = "Big news: I moved to Montreal last month."


def test_a_switch_supersedes_the_old_habit_and_ranks_first(agent):
    texts = _texts(agent, "What do I drink in the morning?")
    assert texts[0] == GREEN_TEA
    assert _hit(agent, "What do I drink in the morning?", ESPRESSO).superseded_by
    # "... before my shift" also speaks of work: the record is superseded in its drink clause only,
    # so leaving superseded records out keeps it, below the switch
    kept = _texts(agent, "What do I drink in the morning?", include_superseded=False)
    assert kept[0] == GREEN_TEA and _hit(agent, "What do I drink in the morning?", ESPRESSO).stale_clauses


def test_no_longer_supersedes_even_after_a_discourse_also(agent):
    """ "Also I'm no longer vegetarian" is a change, not an added fact: the opening "Also" is a
    discourse marker."""
    assert _texts(agent, "Am I vegetarian?")[0] == NOT_VEGETARIAN
    assert _hit(agent, "Am I vegetarian?", VEGETARIAN).superseded_by


def test_facts_of_the_user_are_found(agent):
    assert _texts(agent, "What instrument am I learning?", k=1) == ["I've started learning the cello."]
    assert _texts(agent, "What is my cat called?", k=1) == ["We have a cat called Biscuit."]
    assert MOVED in _texts(agent, "Where did I move to?", k=3)


def test_the_current_city_ranks_first(agent):
    assert _texts(agent, "What city do I live in now?", k=1) == [MOVED]


def test_the_job_is_found_in_the_top_10(agent):
    assert NURSE_IN_LYON in _texts(agent, "What is my job?")


def test_the_still_true_fact_survives_dropping_superseded_records(agent):
    """The move to Montreal must not hide that she is a nurse: "I'm a nurse and I live in Lyon"
    is superseded in its clause about the city alone, so for a question about her job dropping
    superseded records keeps it."""
    assert _hit(agent, "Am I a nurse?", NURSE_IN_LYON).stale_clauses == ["I live in Lyon."]  # only that
    assert NURSE_IN_LYON in _texts(agent, "Am I a nurse?", k=3, include_superseded=False)


def test_a_move_ranks_above_the_statement_it_supersedes_despite_its_session(tmp_path):
    """The old city's session holds two turns that match "live", so the session bonus lifts the
    superseded "I live in Boston." above the move unless the successor is put above it last."""
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        agent.add_turns(
            [
                ("s1", "user", "I live in Boston and I work as a nurse.", "2024-01-01T10:00:00Z"),
                ("s1", "user", "I live in Boston.", "2024-01-01T10:01:00Z"),
                ("s2", "user", "I moved from Boston to Seattle last month.", "2024-03-01T10:00:00Z"),
            ],
            namespace="u",
        )
        hits = agent.recall("Where do I live?", k=3, namespace="u")
        old = next(h for h in hits if h.text == "I live in Boston.")
        assert old.superseded_by, "the move must supersede the old statement"
        order = [h.text for h in hits]
        assert order.index("I moved from Boston to Seattle last month.") < order.index("I live in Boston.")
