"""Breaker reproductions for the chat-facts work (clause-level supersession, question and reply
demotion, memory labels, tree-sitter chunking): each test states what a user or an attacker gets
wrong through the public API, and fails on the code it was written against.

Real SQLite files under tmp_path; the fake embedder (tests/conftest.py) where the cosine does not
matter, the real one (``integration``) where it does. The time bounds are 5 s on what took 8 s to
hours before the fixes (quadratic growth), so a busy CI machine does not make them flaky; speed
itself is measured by the scripts under benchmarks/."""

from __future__ import annotations

import time

import pytest

from titans_agent import MemoryAgent

T1, T2 = "2024-01-01T10:00:00Z", "2024-03-01T10:00:00Z"


def _superseded_after(agent: MemoryAgent, old: str, new: str) -> list[int]:
    """Write ``old`` then ``new`` as one user's turns; the ids that supersede ``old``, as recall shows them."""
    agent.add_turns([("s1", "user", old, T1), ("s2", "user", new, T2)])
    (hit,) = [h for h in agent.recall(old, k=5) if h.text == old]
    return hit.superseded_by


# -- false supersession: a statement about something else marks a true fact as replaced -----------


@pytest.mark.integration
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I have a dog.", "I got a cold."),  # "got" is a change cue: any acquisition replaces any fact
        ("I live in Boston.", "I moved the meeting to Friday."),  # "moved" reads as a change of residence
        pytest.param(
            "I live in a flat in Boston.",
            "I got a new flat screen TV.",
            marks=pytest.mark.xfail(strict=True, reason="known: a relation word is matched without its sense"),
        ),  # "flat" the screen, not the home
        pytest.param(
            "I work at Google.",
            "I got a new office chair.",
            marks=pytest.mark.xfail(strict=True, reason="known: a relation word is matched without its sense"),
        ),  # "office" the furniture, not the employer
        pytest.param(
            "I have a dog.",
            "I got a dog bed for Rex.",
            marks=pytest.mark.xfail(strict=True, reason="known: a relation word is matched without its sense"),
        ),  # something for the dog, not a new pet
    ],
)
def test_an_unrelated_statement_does_not_supersede_a_fact(tmp_path, old, new):
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        assert _superseded_after(agent, old, new) == []


@pytest.mark.integration
@pytest.mark.parametrize(
    "new",
    [
        "I might move to Seattle next year.",
        "I want to move to Seattle someday.",
        "If I moved to Seattle, I would be happier.",
        "Yeah right, like I'd ever move to Seattle.",
    ],
)
def test_a_wish_or_a_hypothetical_move_does_not_supersede_where_i_live(tmp_path, new):
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        assert _superseded_after(agent, "I live in Boston.", new) == []


@pytest.mark.integration
@pytest.mark.parametrize("new", ["I applied for a new job at Globex.", "I failed to get the new job at Globex."])
def test_applying_for_a_job_does_not_supersede_the_job_i_have(tmp_path, new):
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        assert _superseded_after(agent, "I work as a nurse at St. Mary's hospital.", new) == []


@pytest.mark.integration
@pytest.mark.parametrize(
    "new",
    [
        "Tom told me he moved to Seattle.",
        pytest.param(
            "I helped Sam move to Seattle last weekend.",
            marks=pytest.mark.xfail(strict=True, reason="known: a named friend as the mover is not seen"),
        ),
    ],
)
def test_a_named_friends_move_does_not_supersede_where_i_live(tmp_path, new):
    # "my sister moved" is caught (a relation word); a friend named without one is not
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        assert _superseded_after(agent, "I live in Boston.", new) == []


@pytest.mark.integration
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Customer Acme pays 1200 dollars a month.", "Customer Globex now pays 900 dollars a month."),
        ("Project Apollo deadline is March 3.", "Project Zeus deadline moved to April 10."),
        ("The staging server listens on port 8443.", "The production server now listens on port 443."),
        ("The API rate limit is 100 requests per minute.", "The new dashboard shows requests per minute."),
    ],
)
def test_a_note_about_another_entity_does_not_supersede_a_note(tmp_path, old, new):
    # notes take part in update detection by default now, and a note needs no first person: any
    # similar note with "now"/"new"/"moved" and one new word replaces it, whoever it is about
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        agent.remember(old)
        agent.remember(new)
        (hit,) = [h for h in agent.recall(old, k=5) if h.text == old]
        assert hit.superseded_by == []


# -- a current fact hidden: a statement read as a question, a question about now read as the past -


@pytest.mark.integration
@pytest.mark.parametrize(
    ("statement", "query"),
    [
        ("I live in Seattle, what about you?", "Where do I live?"),  # a statement that asks back
        ("When I turned 30 I moved to Seattle for good.", "Where do I live?"),  # opens with "when"
        ("Which is why I live in Seattle now.", "Where do I live?"),  # opens with "which"
    ],
)
def test_a_statement_shaped_like_a_question_still_answers(tmp_path, statement, query):
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        agent.add_turns(
            [
                ("s0", "user", "The job market is rough this year, everyone says so."),
                ("s0", "user", "Seattle and Boston are both rainy cities, people say."),
                ("s0", "user", "Work was busy today, lots of meetings."),
                ("s1", "user", statement),
            ]
        )
        # the only record that answers ranks last: it is demoted as a stored question
        assert agent.recall(query, k=4)[0].text == statement


@pytest.mark.integration
@pytest.mark.parametrize(
    ("old", "new", "query"),
    [
        ("My dentist appointment is on Monday at 9.", "I moved my dentist appointment to Friday at 3.",
         "When is my dentist appointment?"),
        ("My shift starts at 7am.", "My shift now starts at 10am.", "When does my shift start?"),
    ],
)  # fmt: skip
def test_a_when_question_about_now_ranks_the_current_fact_first(tmp_path, old, new, query):
    # "when" makes asks_about_past true, so the superseded record is not demoted and ranks first
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        agent.add_turns([("s1", "user", old, T1), ("s2", "user", new, T2)])
        assert agent.recall(query, k=2)[0].text == new


@pytest.mark.integration
@pytest.mark.parametrize(
    ("turns", "query"),
    [
        (
            [
                ("s1", "user", "Any idea what to cook tonight? Something with lentils."),
                ("s1", "assistant", "Try a red lentil dal: onions, garlic, cumin, turmeric, simmer 20 minutes."),
                ("s2", "user", "I bought lentils and rice at the market yesterday."),
            ],
            "What was the lentil recipe I was given?",
        ),
        pytest.param(
            [
                ("s1", "user", "Can you suggest a name for my new bakery?"),
                ("s1", "assistant", "How about 'Crumb & Co.'? It is short and memorable."),
                ("s2", "user", "My bakery opens in June downtown."),
            ],
            "What name was suggested for my bakery?",
            marks=pytest.mark.xfail(strict=True, reason="known: the user's statement of the bakery still ranks first"),
        ),
    ],
)
def test_a_question_about_what_the_assistant_said_without_you_finds_the_reply(tmp_path, turns, query):
    # addresses_assistant() looks only for "you"/"your": a passive question ("was suggested",
    # "I was given") is read as about the user's own facts and the reply that answers it is demoted
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        agent.add_turns(turns)
        assert agent.recall(query, k=3)[0].text == turns[1][2]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("request_", "reply", "query"),
    [
        (
            "Can you recommend a science fiction book to read on my flight? I loved The Martian.",
            "Try 'Project Hail Mary' by Andy Weir.",
            "What science fiction book did you recommend?",
        ),
        (
            "What podcast would you recommend for learning Spanish on my commute?",
            "Coffee Break Spanish is great: short episodes, clear explanations, and it builds up slowly.",
            "Which podcast for learning Spanish did you recommend?",
        ),
        (
            "Any restaurant recommendations for a birthday dinner in Lisbon?",
            "Book a table at Cervejaria Ramiro for seafood, or Taberna da Rua das Flores for small plates.",
            "What restaurant did you recommend for the birthday dinner in Lisbon?",
        ),
    ],
)
def test_a_question_about_what_the_assistant_recommended_finds_the_reply(tmp_path, request_, reply, query):
    # the request repeats the question's words, the reply names the answer: without demoting the
    # user's side for such a question the request ranked first (3.0 against 2.0 for the reply)
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        agent.add_turns([("s1", "user", request_), ("s1", "assistant", reply)])
        assert agent.recall(query, k=2)[0].text == reply


# -- a partly superseded record shown to a model as wholly superseded ------------------------------

MULTI = ("s1", "user", "Hi! I'm a nurse and I live in Lyon.", T1)
MOVE = ("s2", "user", "Big news: I moved to Montreal last month.", T2)
BOTH = "Where do I live now, and am I still a nurse?"


def test_the_recall_tool_does_not_mark_a_partly_current_memory_superseded_as_a_whole(agent):
    from titans_agent.adapters.langchain import memory_tools

    agent.add_turns([MULTI, MOVE], namespace="u")
    hit = {h.text: h for h in agent.recall(BOTH, k=5, namespace="u")}[MULTI[2]]
    assert hit.stale_clauses == ["I live in Lyon."]  # recall knows only the residence is stale
    _, recall = memory_tools(agent, namespace="u", k=5)
    (line,) = [ln for ln in recall.invoke({"query": BOTH}).splitlines() if MULTI[2] in ln]
    # shown as "- [2024-01-01, superseded] Hi! I'm a nurse and I live in Lyon.": the model is told
    # the nurse fact is replaced too; the label must name what is stale
    assert "I live in Lyon." in line.split("]", 1)[0], line


def test_mcp_recall_says_which_clauses_of_a_memory_are_stale(agent):
    from titans_agent.adapters.mcp import MemoryTools

    agent.add_turns([MULTI, MOVE], namespace="u")
    (hit,) = [h for h in MemoryTools(agent, namespace="u").recall(BOTH, k=5)["hits"] if h["text"] == MULTI[2]]
    assert hit["superseded"] is True
    assert hit.get("stale_clauses") == ["I live in Lyon."], hit  # absent: the whole memory reads as replaced


def test_leaving_superseded_out_keeps_the_current_part_of_a_multi_fact_record(agent):
    agent.add_turns([MULTI, MOVE])
    kept = [h.text for h in agent.recall(BOTH, k=5, include_superseded=False)]
    # the only record saying the user is a nurse is dropped because its residence clause is stale
    assert MULTI[2] in kept


# -- super-linear text analysis: one hostile (or unlucky) message stalls writes and every recall ---


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def test_a_stored_turn_with_a_run_of_spaces_does_not_stall_every_recall(agent):
    # facts.clauses() splits with r"\s+(?:and|but|...)\s+": quadratic in a run of whitespace that
    # no punctuation precedes; a 12k-space turn made each recall take 8-30 s (write 12 s)
    agent.add_turn("s1", "user", "I live in Boston" + " " * 4000 + "ok")
    agent.add_turn("s1", "user", "I moved to Seattle" + " " * 4000 + "ok")
    agent.recall("warm up", k=1)
    assert _seconds(lambda: agent.recall("Where do I live?", k=3)) < 5.0


def test_a_long_query_of_repeated_where_is_answered_quickly(agent):
    # facts._QUERY_RELATIONS["residence"] is r"where\b.*\b(live|...)": quadratic in the query;
    # a query at max_text_chars (100,000) of "where " took about 40 s
    agent.remember("I live in Boston.")
    agent.recall("warm up", k=1)
    assert _seconds(lambda: agent.recall("where " * 5000, k=1)) < 5.0


def test_two_long_first_person_messages_are_compared_in_reasonable_time(agent):
    # updates.clause_change compares every clause of the new record with every clause of each
    # candidate (regexes and token sets per pair, nothing cached per clause): 800 clauses each
    # took 10 s for one pair; a 100k-character turn can state thousands
    n = 500
    agent.add_turn("s1", "user", " ".join(f"I live in city{i} with a house." for i in range(n)))
    new = " ".join(f"I moved to town{i} and a house." for i in range(n))
    assert _seconds(lambda: agent.add_turn("s2", "user", new)) < 5.0


# -- tree-sitter outlines: quadratic in nesting depth and in definitions per level ----------------


@pytest.mark.xfail(strict=True, reason="known: climbing from a deep capture costs its depth")
def test_a_deeply_nested_javascript_file_is_outlined_in_linear_time():
    # outline() climbs (_climb, _before: node.parent and prev_sibling, each O(depth) in
    # tree-sitter) for every captured definition before MAX_NESTING drops the deep ones: quadratic;
    # 16,000 nested functions (325 KB, far under the 4 MB file limit) took 35 s, 4 MB would take hours
    from titans_agent.ingest import syntax

    n = 4000
    text = "function f0(){\n" + "".join(f"function f{i}(){{\n" for i in range(1, n)) + "return 1;\n" + "}\n" * n
    syntax.outline("function warm() {}\n", "warm.js")
    assert _seconds(lambda: syntax.outline(text, "deep.js")) < 0.5


def test_naming_the_chunks_of_a_class_with_many_methods_is_not_quadratic():
    # Outline.symbols() rebuilds [d.start for d in level] at every call: chunks x methods; a 2.4 MB
    # TypeScript class of 100,000 one-line methods took 131 s to chunk (the same text as .txt: ~25 s)
    from titans_agent.ingest import syntax

    n = 20000
    text = "class C {\n" + "".join(f"  m{i}() {{ return {i} }}\n" for i in range(n)) + "}\n"
    code = syntax.outline(text, "big.ts")
    assert code is not None
    starts = range(10, len(text), len(text) // 2000)  # about one chunk per 10 methods, as the chunker cuts
    assert _seconds(lambda: [code.symbols(s, s + 200) for s in starts]) < 5.0


# -- many updates of one fact: links grow as n^2, and recall with them ----------------------------


def test_recall_stays_fast_when_one_fact_was_updated_many_times(agent):
    # every clause-level change links to EVERY older record stating the relation, so n updates of
    # where one lives make n(n-1)/2 links, and recall re-derives each link's scope (link_change,
    # an lru_cache of 16,384 that then thrashes): 1,000 such turns took 17 s per recall (39 s to
    # write) against 15 ms for 1,000 turns without links
    n = 200
    text = "Hi! I'm a nurse, I have a dog and I now live in City{} near the hospital."
    agent.add_turns([(f"s{i // 20}", "user", text.format(i)) for i in range(n)])
    agent.recall("Where do I live now?", k=5)
    assert _seconds(lambda: agent.recall("Where do I live now?", k=5)) < 5.0
