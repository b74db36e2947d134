"""The document signal: a chunk is found by the document it belongs to (its name and title)."""

from __future__ import annotations

import pytest

from titans_agent import AgentConfig, MemoryAgent, RetrievalConfig
from titans_agent.ingest.headers import chunk_context, document_header, enclosing_scopes, title_lines
from titans_agent.retrieval import DocumentIndex, header_words
from titans_agent.text import name_words

CLAUSE = (
    "The Receiving Party shall hold the Confidential Information in confidence and shall not disclose "
    "it to any third party. These obligations survive the termination of this Agreement for {n} years."
)


def test_name_words_decode_escapes_and_split_compounds():
    assert name_words("DBT%20Mutual%20NDA.txt") == "DBT Mutual NDA txt"
    assert (
        name_words("EFCAConfidentialityAgreement.txt")
        == "EFCAConfidentialityAgreement EFCA Confidentiality Agreement txt"
    )
    assert name_words("src/click/_termui_impl.py") == "src click termui impl py"
    assert name_words("GPL-3") == "GPL 3"
    assert name_words("bad%zz%") == "bad zz"  # a broken escape is left as text
    assert name_words("") == ""


def test_title_lines_stop_at_body_text():
    text = "GNU GENERAL PUBLIC LICENSE\n   Version 3, 29 June 2007\n\n" + "x " * 100 + "\nNot this."
    assert title_lines(text) == ["GNU GENERAL PUBLIC LICENSE", "Version 3, 29 June 2007"]
    assert title_lines("A body line that runs on " * 10) == []
    wrapped = "GNU LESSER GENERAL PUBLIC LICENSE\nVersion 2.1, February 1999\n\nCopyright (C) 1991\nAll may copy\n"
    assert title_lines(wrapped) == ["GNU LESSER GENERAL PUBLIC LICENSE", "Version 2.1, February 1999"]
    assert document_header("licenses/GPL-3", text, code=False) == (
        "licenses GPL 3",
        "GNU GENERAL PUBLIC LICENSE Version 3, 29 June 2007",
    )
    assert document_header("pkg/mod.py", "import os\n", code=True) == ("pkg mod py", "")
    assert chunk_context(("a b", "T"), ["Cls", "meth"]) == "a b T Cls meth"


def test_enclosing_scopes_of_a_method_chunk():
    lines = [
        "import os",
        "",
        "class ProgressBar:",
        '    """A bar."""',
        "",
        "    def render(self):",
        "        x = 1",
        "",
        "        return x",
        "",
        "def top():",
        "    pass",
    ]
    assert enclosing_scopes(lines, 6) == ["ProgressBar"]
    assert enclosing_scopes(lines, 9) == ["ProgressBar", "render"]
    assert enclosing_scopes(lines, 11) == []
    assert enclosing_scopes(lines, 12) == ["top"]
    assert enclosing_scopes(lines, 99) == []  # past the end: nothing, no error


def test_header_words_drop_single_letters_keep_digits():
    assert header_words("N o n- d i s c Epsteen's GPL 3") == ["epsteen", "gpl", "3"]


def test_a_name_one_document_carries_outweighs_words_many_titles_share():
    headers = {
        1: ("contracts Epsteen nda txt", "NON-DISCLOSURE AGREEMENT"),
        2: ("contracts velco nda txt", "CONFIDENTIAL INFORMATION NON-DISCLOSURE AGREEMENT"),
        3: ("contracts acme nda txt", "CONFIDENTIAL INFORMATION AGREEMENT"),
        4: ("contracts globex nda txt", "CONFIDENTIAL INFORMATION NON-DISCLOSURE"),
    }
    index = DocumentIndex.build(headers, [(10, 1), (11, 1), (20, 2), (30, 3), (40, 4), (11, 2)])
    q = "Consider Epsteen's Non-Disclosure Agreement; does the Receiving Party keep Confidential Information?"
    scores = index.scores(q)
    assert max(scores, key=scores.get) == 1
    common = index.scores("txt contracts nda")  # words every header holds weigh next to nothing
    assert set(common) == {1, 2, 3, 4} and max(common.values()) < 0.05 * scores[1]
    signal, chunks = index.signal(q, top=1)
    assert chunks == [10, 11]
    assert signal.values[11] == max(scores[1], scores[2])  # a chunk in two documents takes the better
    assert 30 not in signal.values or signal.values[30] == scores[3]
    assert index.signal("nothing here matches", top=3) == (None, [])


def _contracts(agent: MemoryAgent) -> None:
    for i, party in enumerate(("Acme", "Globex", "Initech", "Umbrella")):
        agent.ingest(f"MUTUAL NON-DISCLOSURE AGREEMENT\n\n{CLAUSE.format(n=i + 2)}", source=f"{party}-NDA.txt")


@pytest.mark.parametrize("fusion", ["score", "rank"])
def test_a_query_naming_a_document_finds_its_clause(db_url, fake_embedder, fusion):
    config = AgentConfig(retrieval=RetrievalConfig(fusion=fusion))
    with MemoryAgent.open(db_url, config, embedder=fake_embedder) as agent:
        _contracts(agent)
        hits = agent.recall("Consider Initech's NDA; do the obligations survive termination?", k=3)
        assert hits[0].source == "Initech-NDA.txt" and "document" in hits[0].signals
        off = AgentConfig(retrieval=RetrievalConfig(fusion=fusion, document_weight=0))
    with MemoryAgent.open(db_url, off, embedder=fake_embedder) as agent:
        hits = agent.recall("Consider Initech's NDA; do the obligations survive termination?", k=3)
        assert all("document" not in h.signals for h in hits)


def test_the_index_follows_new_documents_and_chat_namespaces_skip_it(db_url, fake_embedder):
    with MemoryAgent.open(db_url, embedder=fake_embedder) as agent:
        _contracts(agent)
        assert agent.recall("Consider Initech's NDA; survive termination?", k=1)[0].source == "Initech-NDA.txt"
        agent.ingest(f"NON-DISCLOSURE AGREEMENT\n\n{CLAUSE.format(n=9)}", source="Hooli-NDA.txt")
        assert agent.recall("Consider Hooli's NDA; survive termination?", k=1)[0].source == "Hooli-NDA.txt"
        agent.forget(source="Hooli-NDA.txt")
        assert all(h.source != "Hooli-NDA.txt" for h in agent.recall("Consider Hooli's NDA; survive termination?", k=5))
        agent.add_turn("s1", "user", "Hooli is where I work now.", namespace="chat")
        hits = agent.recall("Where do I work, Hooli?", k=3, namespace="chat")
        assert hits and all("document" not in h.signals for h in hits)


def test_source_code_takes_no_part_in_the_document_signal(db_url, fake_embedder):
    with MemoryAgent.open(db_url, embedder=fake_embedder) as agent:
        agent.ingest("def render(bar):\n    return bar.eta\n", source="click/progressbar.py")
        agent.ingest("# Progressbar\n\nThe progress bar shows an ETA.\n", source="docs/progressbar.md")
        hits = agent.recall("how does the progressbar compute its eta", k=5)
        by_source = {h.source: h for h in hits}
        assert "document" not in by_source["click/progressbar.py"].signals
        assert "document" in by_source["docs/progressbar.md"].signals


def test_a_long_query_keeps_its_late_words_for_full_text_search(agent):
    from titans_agent.text import MAX_QUERY_TERMS, query_terms

    agent.remember("KeyError raised in termui_impl render_progress when the length is unknown")
    agent.remember("The weather in Lyon was mild all week")
    preamble = " ".join(f"word{i}" for i in range(300))  # an issue's long description first
    query = f"{preamble} Traceback: termui_impl render_progress KeyError"
    assert "render_progress" in query_terms(query) and len(query_terms(query)) <= MAX_QUERY_TERMS
    hit = agent.recall(query, k=1)[0]
    assert "termui_impl" in hit.text and "lexical" in hit.signals
