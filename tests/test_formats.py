"""Real document formats (PDF, DOCX, HTML, Markdown, legal text), each written by the test, read by
discover/read_text_file, chunked, ingested through a real MemoryAgent (fake embedder, real SQLite),
and recalled with its location: page, heading path, section, file and line range."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from conftest import real_tokenizer

from titans_agent.ingest.chunking import Chunker
from titans_agent.ingest.files import SkippedFile, SourceFile, discover, read_text_file
from titans_agent.ingest.formats import DocumentFormatError, extract, sniff
from titans_agent.types import Location

# -- documents written by the tests ----------------------------------------------------------------


def make_pdf(pages: list[list[str]]) -> bytes:
    """A minimal valid PDF: one page per list, one Helvetica text line per string (cp1252)."""

    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    n = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n))
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for i, lines in enumerate(pages):
        content = "BT /F1 11 Tf 14 TL 72 740 Td " + " ".join(f"({esc(t)}) Tj T*" for t in lines) + " ET"
        data = content.encode("cp1252")
        objs.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            + f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>".encode()
        )
        objs.append(f"<< /Length {len(data)} >>\nstream\n".encode() + data + b"\nendstream")
    out = b"%PDF-1.4\n"
    offsets = []
    for i, obj in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + obj + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


CONTRACT_PAGES = [
    ["MASTER SERVICES AGREEMENT", "1. Definitions. The Customer is Acme GmbH and the Supplier is Bolt Ltd."],
    ["2. Services. The Supplier hosts the archive platform for the Customer."],
    ["3. Fees.", "Section 3.1 Invoices. The Supplier invoices every quarter."],
    [
        "Section 4.2 Payment. The Customer shall pay each invoice within thirty days of receipt.",
        "Section 4.2 applies to credit notes as well.",
    ],
    ["\u00a7 12 Liability. Neither party is liable for indirect damages."],
]


@pytest.fixture
def contract_pdf(tmp_path: Path) -> Path:
    path = tmp_path / "contract.pdf"
    path.write_bytes(make_pdf(CONTRACT_PAGES))
    return path


def make_docx(path: Path) -> Path:
    import docx

    d = docx.Document()
    d.add_heading("Employee Handbook", level=0)  # style "Title"
    d.add_heading("Leave", level=1)
    d.add_heading("Parental leave", level=2)
    d.add_paragraph("Parents receive sixteen weeks of paid parental leave after a birth or adoption.")
    d.add_heading("Sick leave", level=2)
    d.add_paragraph("Sick days need a doctor's note from the third day on.")
    d.add_paragraph("# this paragraph only starts with a hash sign")
    d.add_heading("Equipment", level=1)
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Laptop", "replaced every three years"
    table.cell(1, 0).text, table.cell(1, 1).text = "Phone", "on request"
    d.save(str(path))
    return path


HTML = """<!doctype html><html><head><title>ignored</title><style>h1 {color: red}</style></head>
<body><nav>Home | About</nav>
<h1>Operations guide</h1>
<p>General   notes about <b>operations</b>.</p>
<h2>Backups</h2>
<p>Backups run nightly at <code>02:00</code> UTC and are kept for 35 days.</p>
<script>var secret = "should never be stored";</script>
<h2>Restores</h2>
<ul><li>Open a ticket.</li><li>Wait for the on-call engineer.</li></ul>
<p># a paragraph that starts with a hash</p>
<table><tr><th>Tier</th><th>RTO</th></tr><tr><td>gold</td><td>1 hour</td></tr></table>
</body></html>
"""


def chunker_for(agent) -> Chunker:
    return agent.chunker


def hit_for(agent, query: str, text: str, **kw):
    """The first recalled hit whose text contains ``text`` (the recall must find it in its top 5)."""
    hits = agent.recall(query, k=5, **kw)
    found = [h for h in hits if text in h.text]
    assert found, f"{text!r} not in the top 5 for {query!r}: {[h.text[:60] for h in hits]}"
    return found[0]


# -- PDF -------------------------------------------------------------------------------------------


def test_pdf_text_is_read_per_page(contract_pdf: Path) -> None:
    result = read_text_file(contract_pdf)
    assert isinstance(result, SourceFile)
    assert result.format == "pdf" and result.encoding == "pdf"
    pages = result.text.split("\n\f\n")
    assert len(pages) == 5
    assert pages[3].startswith("Section 4.2 Payment.")
    assert pages[4] == "\u00a7 12 Liability. Neither party is liable for indirect damages."


@pytest.mark.backends()
def test_pdf_chunks_carry_page_and_section(agent, contract_pdf: Path) -> None:
    result = read_text_file(contract_pdf)
    assert isinstance(result, SourceFile)
    chunker = Chunker(agent.chunker.tokenizer, max_tokens=24)  # small: about one page per chunk
    chunks = chunker.split(result.text, path=result.path)
    by_text = {c.text.split("\n")[0]: c.location for c in chunks}
    payment = by_text["Section 4.2 Payment. The Customer shall pay each invoice within thirty days of receipt."]
    assert payment.page == 4 and payment.section == "4.2"
    assert payment.citation == "section 4.2, page 4"
    liability = by_text["\u00a7 12 Liability. Neither party is liable for indirect damages."]
    assert (liability.page, liability.section) == (5, "\u00a7 12")
    # every chunk knows its page; a chunk's pages are those its text lies on
    for c in chunks:
        first = result.text.count("\f", 0, c.start_char) + 1
        last = result.text.count("\f", 0, c.start_char + len(c.text)) + 1
        assert c.location.page == first
        assert (c.location.end_page or first) == last
    assert chunker.split(result.text, path=result.path, format=result.format) == chunks


@pytest.mark.backends()
def test_pdf_recall_cites_section_and_page(agent, contract_pdf: Path) -> None:
    report = agent.ingest(contract_pdf)
    assert report.files == 1 and report.skipped == []
    hit = hit_for(agent, "within how many days must the customer pay an invoice", "thirty days")
    assert hit.source == str(contract_pdf.resolve())
    assert hit.doc_location is not None
    assert hit.doc_location.page == 4
    assert hit.doc_location.section == "4.2"
    assert "section 4.2" in hit.doc_location.citation and "page" in hit.doc_location.citation
    assert hit.start_line is not None and hit.end_line is not None
    assert not {"page", "section", "citation", "headings"} & hit.metadata.keys()  # never mixed in


def test_hostile_pdfs_are_skipped_with_a_reason(tmp_path: Path) -> None:
    from pypdf import PdfWriter

    good = make_pdf(CONTRACT_PAGES)
    (tmp_path / "truncated.pdf").write_bytes(good[: len(good) // 3])
    (tmp_path / "scanned.pdf").write_bytes(make_pdf([[], []]))
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    writer.encrypt(user_password="secret", owner_password="owner")
    buf = io.BytesIO()
    writer.write(buf)
    (tmp_path / "locked.pdf").write_bytes(buf.getvalue())
    (tmp_path / "renamed.txt").write_bytes(good)  # a PDF is read by content, whatever its name

    reasons = {p.name: read_text_file(p) for p in sorted(tmp_path.iterdir())}
    assert reasons["locked.pdf"] == SkippedFile(str(tmp_path / "locked.pdf"), "encrypted pdf")
    assert reasons["scanned.pdf"].reason == "pdf without a text layer (scanned?)"
    assert reasons["truncated.pdf"].reason.startswith("unreadable pdf (")
    assert isinstance(reasons["renamed.txt"], SourceFile) and reasons["renamed.txt"].format == "pdf"


def test_extracted_text_is_bounded(tmp_path: Path) -> None:
    data = make_pdf([["word " * 200]] * 3)
    with pytest.raises(DocumentFormatError, match="too large"):
        extract(data, "pdf", max_expanded_bytes=1000)
    assert len(extract(data, "pdf", max_expanded_bytes=10_000).text) > 2000


# -- DOCX ------------------------------------------------------------------------------------------


def test_docx_headings_become_the_heading_path(agent, tmp_path: Path) -> None:
    path = make_docx(tmp_path / "handbook.docx")
    result = read_text_file(path)
    assert isinstance(result, SourceFile) and result.format == "docx"
    assert result.text.startswith("# Employee Handbook\n\n## Leave\n\n### Parental leave\n\n")
    assert "\\# this paragraph only starts with a hash sign" in result.text  # not a heading
    assert "Laptop | replaced every three years\nPhone | on request" in result.text

    chunks = Chunker(agent.chunker.tokenizer, max_tokens=200).split(result.text, path=result.path)
    sick = next(c for c in chunks if "doctor's note" in c.text)
    assert sick.location.headings == ["Employee Handbook", "Leave", "Sick leave"]
    assert "Parents receive" not in sick.text  # a chunk never spans two headings

    agent.ingest(path)
    hit = hit_for(agent, "how many weeks of parental leave do parents get", "sixteen weeks")
    assert hit.doc_location == Location(
        headings=["Employee Handbook", "Leave", "Parental leave"],
        citation="Employee Handbook > Leave > Parental leave",
    )
    table = hit_for(agent, "how often is a laptop replaced", "Laptop")
    assert table.doc_location is not None and table.doc_location.headings == ["Employee Handbook", "Equipment"]


def test_hostile_docx_files_are_skipped(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", "<w:document/>" + " " * 2_000_000)  # 2 MB of spaces
    assert bomb.stat().st_size < 20_000
    skipped = read_text_file(bomb, max_file_bytes=50_000)
    assert isinstance(skipped, SkippedFile) and skipped.reason.startswith("too large (2,000,")

    broken = tmp_path / "broken.docx"
    with zipfile.ZipFile(broken, "w") as zf:
        zf.writestr("word/document.xml", "<not xml")
    assert read_text_file(broken).reason.startswith("unreadable docx (")

    plain_zip = tmp_path / "archive.zip"
    with zipfile.ZipFile(plain_zip, "w") as zf:
        zf.writestr("a.txt", "hello")
    assert read_text_file(plain_zip).reason == "binary (application/zip)"
    assert sniff(plain_zip.read_bytes(), ".zip") is None


# -- the format detected by content, whatever the file is called -----------------------------------


def test_documents_without_their_suffix_keep_pages_and_headings(tmp_path: Path) -> None:
    named, bare = tmp_path / "named", tmp_path / "bare"
    named.mkdir()
    bare.mkdir()
    (named / "contract.pdf").write_bytes(make_pdf(CONTRACT_PAGES))
    make_docx(named / "handbook.docx")
    (named / "summary.pdf").write_bytes(make_pdf(CONTRACT_PAGES[3:4]))  # one page: no form feed
    (bare / "report").write_bytes(make_pdf(CONTRACT_PAGES))  # no suffix at all
    (bare / "summary").write_bytes(make_pdf(CONTRACT_PAGES[3:4]))
    make_docx(bare / "memo.bin")  # a suffix that says nothing

    def found(folder: Path) -> dict[str, SourceFile]:
        items = list(discover([folder]))
        assert all(isinstance(i, SourceFile) for i in items), items
        return {i.path.name: i for i in items if isinstance(i, SourceFile)}

    with_suffix, without = found(named), found(bare)
    assert {n: i.format for n, i in without.items()} == {"memo.bin": "docx", "report": "pdf", "summary": "pdf"}
    chunker = Chunker(real_tokenizer(), max_tokens=24, overlap_tokens=4)  # small: several chunks per page

    def chunks(item: SourceFile) -> list[tuple[str, Location]]:
        return [(c.text, c.location) for c in chunker.split(item.text, path=item.path, format=item.format)]

    pdf, one, docx = chunks(without["report"]), chunks(without["summary"]), chunks(without["memo.bin"])
    assert pdf == chunks(with_suffix["contract.pdf"])
    assert one == chunks(with_suffix["summary.pdf"])
    assert docx == chunks(with_suffix["handbook.docx"])
    pages = [loc.page for _, loc in pdf]
    assert pages == sorted(pages) and set(pages) == {1, 2, 3, 4, 5}  # every page, in order
    payment = next(loc for text, loc in pdf if text.startswith("Section 4.2 Payment."))
    assert payment == Location(page=4, section="4.2", citation="section 4.2, page 4")
    assert one[0][1] == Location(page=1, section="4.2", citation="section 4.2, page 1")
    assert all(loc.page == 1 for _, loc in one)
    sick = next(loc for text, loc in docx if "doctor's note" in text)
    assert sick.headings == ["Employee Handbook", "Leave", "Sick leave"]
    assert all(loc.page is None for _, loc in docx)  # a DOCX has no pages
    # what the suffix alone gave (the old behaviour): a one-page PDF without its page, a DOCX
    # without headings ("# Employee Handbook" read as prose)
    guessed = chunker.split(without["summary"].text, path=without["summary"].path)
    assert all(c.location.page is None for c in guessed)
    guessed = chunker.split(without["memo.bin"].text, path=without["memo.bin"].path)
    assert all(not c.location.headings for c in guessed)


@pytest.mark.backends()
def test_a_caller_key_named_like_a_location_field_is_kept(agent, tmp_path: Path) -> None:
    path = tmp_path / "report"  # a PDF without its suffix
    path.write_bytes(make_pdf(CONTRACT_PAGES))
    report = agent.ingest(path, metadata={"page": "cover", "section": "legal", "citation": 7})
    assert report.files == 1 and report.skipped == []
    hit = hit_for(agent, "within how many days must the customer pay an invoice", "thirty days")
    assert {k: hit.metadata[k] for k in ("page", "section", "citation")} == {
        "page": "cover",
        "section": "legal",
        "citation": 7,
    }
    assert hit.doc_location == Location(page=4, section="4.2", citation="section 4.2, page 4")
    note = agent.remember("A note has no place in a document.")
    (found,) = [h for h in agent.recall("a note in a document", k=5) if h.id == note.record_id]
    assert found.doc_location is None


# -- HTML and Markdown -----------------------------------------------------------------------------


def test_html_is_reduced_to_text_with_headings(agent, tmp_path: Path) -> None:
    path = tmp_path / "ops.html"
    path.write_text(HTML, encoding="utf-8")
    result = read_text_file(path)
    assert isinstance(result, SourceFile) and result.format == "html"
    assert "secret" not in result.text and "color" not in result.text and "ignored" not in result.text
    assert "# Operations guide\n\nGeneral notes about operations." in result.text
    assert "\\# a paragraph that starts with a hash" in result.text
    assert "Tier | RTO\ngold | 1 hour" in result.text

    agent.ingest(path)
    hit = hit_for(agent, "how long are backups kept", "35 days")
    assert hit.doc_location is not None and hit.doc_location.headings == ["Operations guide", "Backups"]
    assert "Restores" not in hit.text
    hit = hit_for(agent, "who handles a restore ticket", "on-call engineer")
    assert hit.doc_location is not None and hit.doc_location.headings == ["Operations guide", "Restores"]


def test_hostile_html_is_read_in_linear_time() -> None:
    import time

    t0 = time.perf_counter()
    markup = "<div>" * 20_000 + "<h2>Deep <b>title</b></h2>core" + "</div>" * 20_000
    deep = extract(markup, "html", max_expanded_bytes=10**6)
    unclosed = extract("<table><tr><td>cell" * 5_000, "html", max_expanded_bytes=10**6)
    elapsed = time.perf_counter() - t0
    assert deep.text == "## Deep title\n\ncore"
    assert unclosed.text.count("cell") == 5_000
    assert elapsed < 15, f"{elapsed:.1f} s: quadratic in the nesting depth?"  # tree edits took ~45 s
    with pytest.raises(DocumentFormatError, match="too large"):
        extract("<p>word</p>" * 1000, "html", max_expanded_bytes=100)


def test_markdown_headings_skip_code_fences(agent, tmp_path: Path) -> None:
    text = (
        "# Deploy\n\nIntro.\n\n## Staging\n\nThe staging server listens on port 8443.\n\n"
        "```bash\n# not a heading: a shell comment\ncurl localhost:8443\n```\n\n"
        "## Production\n\nProduction listens on port 443.\n"
    )
    path = tmp_path / "deploy.md"
    path.write_text(text)
    agent.ingest(path)
    hit = hit_for(agent, "which port does the staging server listen on", "8443")
    assert hit.doc_location is not None and hit.doc_location.headings == ["Deploy", "Staging"]
    assert "shell comment" in hit.text  # the fence stays in its section
    assert (hit.start_line, hit.end_line) == (1, 12)  # "# Deploy / Intro." is too small alone
    prod = hit_for(agent, "production port", "port 443.")
    assert prod.doc_location is not None and prod.doc_location.headings == ["Deploy", "Production"]
    assert (prod.start_line, prod.end_line) == (14, 16)


# -- legal plain text ------------------------------------------------------------------------------


LEGAL = """LICENCE AGREEMENT

ARTICLE I
Definitions

1.1 "Software" means the programs listed in Schedule A.

ARTICLE IV
Payment

4.1 Fees. The Licensee pays a yearly fee.

4.2 Late payment. Interest of 8 percent above the base rate accrues on any late payment.

Section 4.2 applies to every invoice, including credit notes.

\u00a7 12 Governing law. This agreement is governed by the laws of Ireland.
"""


def test_legal_sections_are_found_and_cited(agent, tmp_path: Path) -> None:
    path = tmp_path / "licence.txt"
    path.write_text(LEGAL)
    chunks = Chunker(agent.chunker.tokenizer, max_tokens=20).split(LEGAL, path=path)
    labels = {label for c in chunks for label in c.location.sections or [c.location.section]}
    assert {"Article I", "1.1", "Article IV", "4.1", "4.2", "\u00a7 12"} <= labels
    reference = next(c for c in chunks if c.text.startswith("Section 4.2 applies"))
    assert reference.location.section == "4.2"  # a reference: still inside 4.2, not a new section
    assert reference.location.page is None  # a text file has no pages

    agent.ingest(path)
    hit = hit_for(agent, "what interest accrues on late payment", "8 percent")
    assert hit.doc_location is not None and hit.doc_location.section == "4.2"
    assert hit.doc_location.citation.startswith("section 4.2")
    law = hit_for(agent, "which law governs the agreement", "Ireland")
    assert law.doc_location is not None and law.doc_location.section == "\u00a7 12"
    assert (law.start_line, law.end_line) == (17, 17)


# -- repositories and odd paths through the agent --------------------------------------------------


def test_repository_ingest_honours_gitignore_and_cites_file_and_lines(agent, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    files = {
        ".gitignore": "*.secret\nbuildcache/\n",
        "src/rates.py": (
            "import math\n\n\n"
            "def compound_interest(principal, rate, years):\n"
            '    """Grow a principal at a yearly rate, compounded once a year."""\n'
            "    return principal * math.pow(1 + rate, years)\n"
        ),
        "api.secret": "the zebra password is hunter2\n",
        "buildcache/zebra.txt": "zebra cache entry\n",
        "node_modules/zebra/index.js": "module.exports = 'zebra';\n",
        "dist/zebra.py": "ZEBRA = 1\n",
    }
    (repo / ".git").mkdir(parents=True)
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)

    report = agent.ingest(repo)
    skipped = {s.path: s.reason for s in report.skipped}
    assert skipped == {
        "repo/.git": "excluded (.git)",
        "repo/api.secret": "ignored (.gitignore)",
        "repo/buildcache": "ignored (.gitignore)",
        "repo/dist": "excluded (dist)",
        "repo/node_modules": "excluded (node_modules)",
    }
    assert report.files == 2  # .gitignore and src/rates.py
    stored = agent.records()
    assert len(stored) >= 2 and not [h.text for h in stored if "zebra" in h.text.lower()]
    hit = hit_for(agent, "compound interest on a principal", "def compound_interest")
    assert hit.source == str((repo / "src" / "rates.py").resolve())
    assert hit.metadata["path"] == "repo/src/rates.py"
    assert (hit.start_line, hit.end_line) == (1, 6)
    assert hit.doc_location == Location()  # code has lines only
    assert "page" not in hit.metadata and "headings" not in hit.metadata


def test_odd_file_names_are_ingested_and_recalled(agent, tmp_path: Path) -> None:
    folder = tmp_path / "odd dir \u00e9\u65e5"
    folder.mkdir()
    names = ["spaced name.md", "-dash.txt", "quote'\"s.txt", "#hash%pct.txt", "emoji-\U0001f600.txt"]
    animals = ["otter", "falcon", "badger", "heron", "lynx"]
    for name, animal in zip(names, animals, strict=True):
        (folder / name).write_text(f"The {animal} lives in the northern valley.\n")
    report = agent.ingest(folder)
    assert report.files == len(names) and report.skipped == []
    for name, animal in zip(names, animals, strict=True):
        hit = hit_for(agent, f"where does the {animal} live", animal)
        assert hit.source == str((folder / name).resolve())
        assert (hit.start_line, hit.end_line) == (1, 1)
