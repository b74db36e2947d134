"""Quickstart: the Python API on real input.

Ingests the standard library's json and email packages and two licence texts into a memory
database, asks two questions, ingests again (nothing is stored twice), and reopens the database to
show the same answers. Runs offline on the CPU in a minute or two.

    python examples/quickstart.py [DB_PATH]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from demo_inputs import QUESTIONS, codebase, legal_texts

from titans_agent import MemoryAgent


def show(agent: MemoryAgent, question: str) -> list[int]:
    print(f"\n? {question}")
    hits = agent.recall(question, k=3)
    for rank, hit in enumerate(hits, start=1):
        first = hit.text.strip().splitlines()[0][:90]
        print(f"  {rank}. {hit.score:.4f}  {hit.source}:{hit.location}  surprise={hit.surprise:.2f}")
        print(f"       {first}")
    return [h.id for h in hits]


def main() -> int:
    db = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "quickstart.db"
    inputs = codebase() + legal_texts()
    with MemoryAgent.open(db) as agent:
        report = agent.ingest(inputs)
        print(
            f"ingested {report.files} files into {report.chunks} chunks: {report.stored} stored, "
            f"{report.merged} merged, {report.repeats} repeats, {len(report.skipped)} skipped "
            f"({report.seconds:.1f} s)"
        )
        first = [show(agent, q) for q, _, _ in QUESTIONS]
        again = agent.ingest(inputs)
        print(f"\nsecond ingest: {again.unchanged} files unchanged, {again.stored} new records")
        agent.remember("The demo was run by the quickstart example.", metadata={"by": "quickstart"})
    with MemoryAgent.open(db) as agent:  # reopen: the neural state and records come back as they were
        reopened = [[h.id for h in agent.recall(q, k=3)] for q, _, _ in QUESTIONS]
        print(f"after reopening: same answers = {reopened == first}; stats: {agent.stats().records} records")
    return 0 if again.stored == 0 and reopened == first else 1


if __name__ == "__main__":
    sys.exit(main())
