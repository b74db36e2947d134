"""TypeScript, JavaScript, Go and Rust cut at their definitions (tree-sitter), with symbol names.

The snippets are written for these tests. The chunker runs with the real all-MiniLM-L6-v2
tokenizer; the end-to-end tests use the fake embedder of conftest.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from conftest import query, real_tokenizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from titans_agent import AgentConfig, MemoryAgent
from titans_agent.ingest import syntax
from titans_agent.ingest.chunking import Chunk, Chunker
from titans_agent.ingest.syntax import grammar_for_path, outline

RUST = """\
//! Ledger arithmetic for the accounts service.

use std::fmt;

/// An amount of money in cents, never negative.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cents(u64);

/// The ways a transfer between accounts can fail.
pub enum TransferError {
    /// The source account holds less than the amount.
    Insufficient { wanted: Cents, held: Cents },
    /// The account is frozen by compliance.
    Frozen,
}

impl<'a> fmt::Display for Ledger<'a> {
    /// Writes one line per account: its name and balance.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, cents) in self.accounts.iter() {
            writeln!(f, "{name}: {}.{:02}", cents.0 / 100, cents.0 % 100)?;
        }
        Ok(())
    }
}

pub trait Audited {
    /// Every change made to the ledger since `since`, oldest first.
    fn history(&self, since: u64) -> Vec<String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_lists_every_account() {
        let ledger = Ledger::default();
        assert_eq!(ledger.to_string(), "");
    }
}
"""

GO = """\
// Package relay forwards webhooks to subscribers.
package relay

import (
	"net/http"
	"time"
)

// Relay holds the subscribers of each topic.
type Relay struct {
	subscribers map[string][]string
	client      *http.Client
}

type (
	// Topic names a stream of events.
	Topic string
	// Retry says how often a delivery is tried again.
	Retry = int
)

// Publish sends the payload to every subscriber of the topic and
// returns how many deliveries succeeded.
func (r *Relay) Publish(topic Topic, payload []byte) int {
	ok := 0
	for _, url := range r.subscribers[string(topic)] {
		if resp, err := r.client.Post(url, "application/json", nil); err == nil {
			resp.Body.Close()
			ok++
		}
	}
	return ok
}

func (t Topic) Valid() bool { return len(t) > 0 }

// This comment stands apart.

// NewRelay makes a relay whose client gives up after the timeout.
func NewRelay(timeout time.Duration) *Relay {
	return &Relay{subscribers: map[string][]string{}, client: &http.Client{Timeout: timeout}}
}
"""

TYPESCRIPT = """\
import { EventEmitter } from "events";

/**
 * Parses a duration such as "1h30m" into milliseconds.
 */
export function parseDuration(input: string): number {
  const match = /^(\\d+)h(\\d+)m$/.exec(input);
  return match ? (Number(match[1]) * 60 + Number(match[2])) * 60_000 : NaN;
}

export interface Clock {
  now(): number;
}

@injectable()
export class Scheduler extends EventEmitter {
  private timers = new Map<string, number>();

  /** Runs the job every `everyMs` milliseconds until it is cancelled. */
  schedule(name: string, everyMs: number, job: () => void): void {
    this.timers.set(name, setInterval(job, everyMs) as unknown as number);
  }

  cancel = (name: string): void => {
    clearInterval(this.timers.get(name));
  };
}

export const toSeconds = (ms: number): number => ms / 1000;

namespace Units {
  export function minutes(n: number) { return n * 60_000; }
}

export type Unit = "ms" | "s";
export enum Level { Low, High }
"""

JAVASCRIPT = """\
// A tiny event bus.
function Bus() {
  this.handlers = {};
}

Bus.prototype.on = function (name, fn) {
  (this.handlers[name] = this.handlers[name] || []).push(fn);
};

exports.createBus = () => new Bus();

module.exports.render = function render(el) {
  return <div className="bus">{el}</div>;
};
"""


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    return Chunker(real_tokenizer(), max_tokens=254)


def check(text: str, chunks: list[Chunk], limit: int) -> None:
    """The chunker's guarantees: exact slices, the size limit, every character kept, in order."""
    covered = bytearray(len(text))
    for i, c in enumerate(chunks):
        assert c.index == i and c.text.strip()
        assert text[c.start_char : c.start_char + len(c.text)] == c.text
        assert c.n_tokens <= limit
        assert c.start_line == text.count("\n", 0, c.start_char) + 1
        assert c.end_line == c.start_line + c.text.count("\n")
        covered[c.start_char : c.start_char + len(c.text)] = b"\x01" * len(c.text)
    lost = [ch for ch, cov in zip(text, covered, strict=True) if not cov and not ch.isspace()]
    assert not lost
    assert [c.start_char for c in chunks] == sorted(c.start_char for c in chunks)


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def names(text: str, path: str) -> dict[str, tuple[str, int, int]]:
    """``{symbol: (kind, first line with its comments, line of the definition)}`` of a file."""
    found = outline(text, path)
    assert found is not None
    return {
        d.name: (d.kind, text.count("\n", 0, d.start) + 1, text.count("\n", 0, d.at) + 1) for d in found.definitions()
    }


# -- symbol names and where definitions start -------------------------------------------------------


def test_rust_definitions_and_their_names() -> None:
    got = names(RUST, "src/ledger.rs")
    assert set(got) == {
        "Cents",
        "TransferError",
        "impl fmt::Display for Ledger",
        "Ledger::fmt",
        "Audited",
        "Audited::history",
        "tests",
        "tests::display_lists_every_account",
    }
    # doc comments and attributes open their definition; the crate's own docs (//!) do not
    assert got["Cents"] == ("struct", line_of(RUST, "/// An amount"), line_of(RUST, "pub struct Cents"))
    assert got["tests"][1] == line_of(RUST, "#[cfg(test)]")
    assert got["tests::display_lists_every_account"][1] == line_of(RUST, "    #[test]")
    assert got["Ledger::fmt"][0:2] == ("function", line_of(RUST, "/// Writes one line"))
    assert got["impl fmt::Display for Ledger"][0] == "impl"


def test_go_definitions_receivers_and_doc_comments() -> None:
    got = names(GO, "relay/relay.go")
    assert set(got) == {"Relay", "Topic", "Retry", "(*Relay).Publish", "Topic.Valid", "NewRelay"}
    assert got["(*Relay).Publish"] == ("method", line_of(GO, "// Publish sends"), line_of(GO, "func (r *Relay)"))
    assert got["Relay"][1] == line_of(GO, "// Relay holds")
    assert got["Topic"][1] == line_of(GO, "\t// Topic names")  # one type of a group, with its comment
    # a comment a blank line above is not the function's
    assert got["NewRelay"][1] == line_of(GO, "// NewRelay makes")


def test_typescript_definitions_and_qualified_names() -> None:
    got = names(TYPESCRIPT, "src/scheduler.ts")
    assert set(got) == {
        "parseDuration",
        "Clock",
        "Clock.now",
        "Scheduler",
        "Scheduler.schedule",
        "Scheduler.cancel",
        "toSeconds",
        "Units",
        "Units.minutes",
        "Unit",
        "Level",
    }
    assert got["parseDuration"][1] == line_of(TYPESCRIPT, "/**")
    assert got["Scheduler"][0:2] == ("class", line_of(TYPESCRIPT, "@injectable()"))
    assert got["Scheduler.schedule"][1] == line_of(TYPESCRIPT, "  /** Runs the job")
    assert got["Clock"][0] == "interface"


def test_javascript_and_jsx_read_with_the_tsx_grammar() -> None:
    assert grammar_for_path("lib/bus.js") == "tsx" and grammar_for_path("x.MTS") == "typescript"
    got = names(JAVASCRIPT, "lib/bus.js")
    assert set(got) == {"Bus", "Bus.on", "createBus", "render"}
    assert got["Bus"][1] == 1  # the comment right above


def test_other_files_have_no_outline() -> None:
    assert outline("def f():\n    pass\n", "a.py") is None
    assert outline("fn main() {}", None) is None
    assert grammar_for_path(None) is None


# -- chunk boundaries --------------------------------------------------------------------------------


def test_each_definition_opens_a_chunk_when_two_do_not_fit_together() -> None:
    small = Chunker(real_tokenizer(), max_tokens=64)
    chunks = small.split(GO, path="relay/relay.go")
    check(GO, chunks, 64)
    starts = {c.start_line: c.symbols for c in chunks}
    assert starts[line_of(GO, "// Publish sends")] == ("(*Relay).Publish",)
    assert starts[line_of(GO, "// NewRelay makes")] == ("NewRelay",)
    assert chunks[0].symbols == ("Relay",)  # packed with the package clause and imports
    # a chunk starts at a definition (its comments, or the group holding it); only Publish, too
    # large for one chunk, is cut inside
    firsts = [line for _, line, _ in names(GO, "r.go").values()]
    opens = {1, line_of(GO, "type ("), line_of(GO, "func (t Topic)"), *firsts}
    publish = range(line_of(GO, "// Publish sends") + 1, line_of(GO, "func (t Topic)"))
    inside = [c.start_line for c in chunks if c.start_line not in opens]
    assert inside and all(line in publish for line in inside)


def test_small_definitions_are_packed_and_all_named(chunker: Chunker) -> None:
    chunks = chunker.split(TYPESCRIPT, path="src/scheduler.ts")
    check(TYPESCRIPT, chunks, 254)
    assert len(chunks) == 2
    assert chunks[0].symbols[:2] == ("parseDuration", "Clock")
    assert "Scheduler.schedule" in chunks[0].symbols + chunks[1].symbols
    assert chunks[-1].symbols[-1] == "Level"


def test_a_large_impl_is_cut_at_its_methods_which_keep_the_impl_name() -> None:
    methods = "\n".join(
        f"    /// Returns the balance of account number {i} after applying every pending entry.\n"
        f"    pub fn balance_{i}(&self) -> Cents {{\n"
        f"        self.entries.iter().filter(|e| e.account == {i}).map(|e| e.amount).sum()\n"
        "    }\n"
        for i in range(12)
    )
    text = f"/// The books.\nimpl Ledger {{\n{methods}}}\n"
    small = Chunker(real_tokenizer(), max_tokens=120)
    chunks = small.split(text, path="books.rs")
    check(text, chunks, 120)
    assert len(chunks) > 3
    for c in chunks:
        assert c.symbols[0] == "impl Ledger"
        assert c.text.lstrip().startswith(("/// Returns", "/// The books"))  # at a method's doc comment
    assert chunks[-1].text.endswith("}\n}") or chunks[-1].text.endswith("}")
    held = [s for c in chunks for s in c.symbols[1:]]
    assert held == [f"Ledger::balance_{i}" for i in range(12)]


def test_a_huge_function_is_cut_generically_and_every_piece_names_it() -> None:
    body = "\n".join(f"    total += weights[{i}] * values[{i}] // term {i}" for i in range(300))
    head = "package calc\n\n// Dot is long.\nfunc Dot(weights, values []float64) float64 {\n    total := 0.0\n"
    text = f"{head}{body}\n    return total\n}}\n"
    chunks = Chunker(real_tokenizer(), max_tokens=100, overlap_tokens=10).split(text, path="calc.go")
    check(text, chunks, 100)
    assert len(chunks) > 5
    assert chunks[0].symbols == ("Dot",)
    assert "// Dot is long.\nfunc Dot(" in chunks[0].text  # its doc comment stays with its first lines
    assert all(c.symbols == ("Dot",) for c in chunks[1:])  # enclosed by it


def test_offsets_stay_exact_with_non_ascii_text(chunker: Chunker) -> None:
    text = (
        '// Grüße, 日本語 and an emoji 🚀 before the code.\nconst café = "naïve";\n\n'
        "/** Größe: the size 📏 */\nexport function größe(x: string): number {\n  return x.length;\n}\n"
    )
    found = outline(text, "i18n.ts")
    assert found is not None
    (d,) = found.definitions()
    assert (d.name, text[d.start : d.start + 3], text[d.at : d.at + 6]) == ("größe", "/**", "export")
    assert text[: d.end].endswith("}")
    check(text, chunker.split(text, path="i18n.ts"), 254)


# -- files that do not parse ---------------------------------------------------------------------------


def test_a_broken_file_falls_back_to_generic_chunks_with_a_logged_reason(chunker: Chunker, caplog) -> None:
    text = "fn main( {{{ let x = ;; }} impl for for {\n" * 40 + "struct Ok;\n"
    with caplog.at_level(logging.WARNING, logger="titans_agent.ingest.syntax"):
        assert outline(text, "broken.rs") is None
        chunks = chunker.split(text, path="broken.rs")
    assert "broken.rs: rust syntax errors" in caplog.text and "chunked without its definitions" in caplog.text
    check(text, chunks, 254)
    assert chunks and all(c.symbols == () for c in chunks)


def test_one_local_error_keeps_the_other_definitions(caplog) -> None:
    text = RUST.replace("Ok(())", "Ok(()) try!(x)")  # pre-2018 `try!`: an error inside one body
    with caplog.at_level(logging.WARNING, logger="titans_agent.ingest.syntax"):
        found = outline(text, "ledger.rs")
    assert found is not None and not caplog.text
    assert {"Cents", "Audited::history", "tests::display_lists_every_account"} <= {d.name for d in found.definitions()}


def test_a_missing_grammar_falls_back_with_a_logged_reason(monkeypatch, chunker: Chunker, caplog) -> None:
    def missing(grammar: str):
        raise ImportError(f"No module named 'tree_sitter_{grammar}'")

    monkeypatch.setattr(syntax, "_grammar", missing)
    with caplog.at_level(logging.WARNING, logger="titans_agent.ingest.syntax"):
        chunks = chunker.split(GO, path="relay.go")
    assert "relay.go: no go grammar (ImportError" in caplog.text
    check(GO, chunks, 254)
    assert all(c.symbols == () for c in chunks)


FRAGMENTS = {
    "x.ts": ["/** doc */\n", "export function f(a: number) {\n", "  return a;\n", "}\n", "class C {\n", "  m() {}\n",
             "interface I { x: string }\n", "const g = () => 1;\n", "{", "}", "\n\n", "é 🚀 ", "x".join("ab" * 40)],
    "x.go": ["// doc\n", "func F() int {\n", "\treturn 1\n", "}\n", "type T struct{}\n", "func (t *T) M() {}\n",
             "package p\n", "{", "}", "\n\n", "é 🚀 ", "y" * 300],
    "x.rs": ["/// doc\n", "#[test]\n", "fn f() -> u8 {\n", "    1\n", "}\n", "impl T for U {\n", "mod m {\n",
             "struct S;\n", "{", "}", "\n\n", "é 🚀 ", "z" * 300],
}  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(sorted(FRAGMENTS)), data=st.data(), size=st.sampled_from([16, 40, 254]))
def test_any_mix_of_code_keeps_the_chunker_guarantees(path: str, data, size: int) -> None:
    parts = data.draw(st.lists(st.sampled_from(FRAGMENTS[path]), max_size=60))
    text = "".join(parts)
    chunker = Chunker(real_tokenizer(), max_tokens=size, overlap_tokens=size // 8)
    check(text, chunker.split(text, path=path), size)


# -- end to end: ingest a project, recall a function -------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "web").mkdir(parents=True)
    (root / "relay").mkdir()
    (root / "ledger" / "src").mkdir(parents=True)
    (root / "web" / "scheduler.ts").write_text(TYPESCRIPT, encoding="utf-8")
    (root / "web" / "bus.js").write_text(JAVASCRIPT, encoding="utf-8")
    (root / "relay" / "relay.go").write_text(GO, encoding="utf-8")
    (root / "ledger" / "src" / "lib.rs").write_text(RUST, encoding="utf-8")
    (root / "ledger" / "src" / "broken.rs").write_text("fn main( {{{ ;; impl for {\n" * 30, encoding="utf-8")
    return root


def test_ingest_a_project_and_recall_functions_by_name_and_description(tmp_path, fake_embedder, project) -> None:
    config = AgentConfig(chunk_tokens=64)  # small chunks: one definition each
    with MemoryAgent.open(tmp_path / "memory.db", embedder=fake_embedder, config=config) as agent:
        report = agent.ingest(project)
        assert report.files == 5 and not report.skipped
        contexts = dict(query(agent, "SELECT text, context FROM records"))
        publish = next(t for t in contexts if "func (r *Relay) Publish" in t)
        assert contexts[publish].endswith("(*Relay).Publish")
        fmt = next(t for t in contexts if "fn fmt(" in t)
        assert "impl fmt::Display for Ledger Ledger::fmt" in contexts[fmt]
        cases = [
            ("parseDuration", "web/scheduler.ts", "export function parseDuration"),
            ("NewRelay", "relay/relay.go", "func NewRelay"),
            ("display_lists_every_account", "ledger/src/lib.rs", "fn display_lists_every_account"),
            ("how is a duration like 1h30m turned into milliseconds", "web/scheduler.ts", "parseDuration"),
            ("send the payload to every subscriber of a topic", "relay/relay.go", "Publish"),
            ("which ways can a transfer between accounts fail", "ledger/src/lib.rs", "enum TransferError"),
            ("Scheduler cancel", "web/scheduler.ts", "cancel = (name"),  # by its class's name
        ]
        for question, path, needle in cases:
            hit = agent.recall(question, k=3, kinds=["chunk"])[0]
            assert hit.source is not None and hit.source.endswith(path), (question, hit.source)
            assert needle in hit.text, (question, hit.text)
        broken = [h for h in agent.recall("fn main impl", k=10, kinds=["chunk"]) if h.source.endswith("broken.rs")]
        assert broken  # the file that does not parse is ingested all the same


def test_factory_constants_and_test_blocks_are_definitions() -> None:
    text = (
        'export const $Email = /*@__PURE__*/ make("$Email", (inst, def) => {\n  inst.check = def.check;\n});\n\n'
        'describe("email", () => {\n  it.only("rejects a missing domain", () => {\n    expect(1).toBe(1);\n  });\n'
        '  test(`not a title`, () => {});\n  helper("x", () => {});\n});\n'
    )
    got = names(text, "email.test.ts")
    assert set(got) == {"$Email", "describe email", "it rejects a missing domain"}
    assert got["describe email"][0] == "test"


def test_forgetting_a_definition_takes_its_name_out_of_the_other_chunks(tmp_path, fake_embedder) -> None:
    methods = "\n".join(
        f"    /// Step {i} of the rotation.\n    fn step_{i}(&mut self) {{\n"
        f"        self.state = self.state.wrapping_mul({i + 3}).rotate_left({i});\n    }}\n"
        for i in range(8)
    )
    text = f"/// Keeps the vault's rotation.\nimpl Rotation for Quokkavault {{\n{methods}}}\n"
    (tmp_path / "vault.rs").write_text(text, encoding="utf-8")
    with MemoryAgent.open(tmp_path / "m.db", embedder=fake_embedder, config=AgentConfig(chunk_tokens=48)) as agent:
        agent.ingest(tmp_path / "vault.rs")
        rows = query(agent, "SELECT id, text, context FROM records")
        header = [rid for rid, t, _ in rows if "impl Rotation for Quokkavault" in t]
        assert len(header) == 1 and len(rows) > 3
        others = [c for rid, t, c in rows if rid != header[0]]
        assert all("Quokkavault" in c for c in others)  # every method chunk is found by its type
        agent.forget(record_id=header[0])
        left = [c for (c,) in query(agent, "SELECT context FROM records")]
        # the qualified names went with it (the rule of words: each one named the type)
        assert len(left) == len(others) and not [c for c in left if "quokkavault" in c.lower()]
