"""What a rebuild of the memory costs: ``rebuild_memory`` (and ``forget(..., unlearn=True)``) replays
every remaining unit from M_0, so its time grows with the namespace.

Writes ``--units`` conversation turns into a fresh SQLite namespace with ``add_turns`` (batches of
``batch_size``, 64 by default: one write each), at the default memory size (dimension 384, a
2-layer memory 384 -> 768 -> 384, chunks of 16), then times ``rebuild_memory`` and a
``forget(..., unlearn=True)`` of one session (its delete, the replay of what remains, the FTS5
optimisation, one commit), and checks that the rebuild reproduced the state bit for bit. The
embedder is a deterministic hashed bag of words in 384 dimensions (defined here, so it runs offline
and what is timed is the memory, not a sentence model: a rebuild never embeds, it replays the
stored embeddings).

    python benchmarks/rebuild.py --units 2000     # writes benchmarks/results/rebuild.md
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from crash import WORDS, TinyEmbedder  # noqa: E402  (the crash harness's word tokenizer and hashing)


class HashEmbedder(TinyEmbedder):
    """The crash harness's deterministic hashed bag of words, at all-MiniLM-L6-v2's width."""

    name = "rebuild-hash-384"
    dim = 384
    max_tokens = 254


def turns(n: int, seed: int = 0) -> list[tuple[str, str, str]]:
    """``n`` turns of random sentences over 20 sessions."""
    rng = np.random.default_rng(seed)
    return [
        (f"s{i % 20}", "user" if i % 2 else "assistant", " ".join(rng.choice(WORDS, size=12)) + f" (turn {i}).")
        for i in range(n)
    ]


def run(units: int, threads: int) -> dict[str, float]:
    from titans_agent import AgentConfig, MemoryAgent

    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as tmp:
        with MemoryAgent.open(Path(tmp) / "m.db", AgentConfig(device="cpu"), embedder=HashEmbedder()) as agent:
            t0 = time.perf_counter()
            agent.add_turns(turns(units))
            write_s = time.perf_counter() - t0
            written = agent.memory_state()
            t0 = time.perf_counter()
            replayed = agent.rebuild_memory()
            rebuild_s = time.perf_counter() - t0
            state = agent.memory_state()
            pairs = zip((*state.weights, *state.momentum), (*written.weights, *written.momentum))
            exact = torch.equal(state.pending, written.pending) and all(torch.equal(a, b) for a, b in pairs)
            t0 = time.perf_counter()
            gone = agent.forget(source="session:s0", unlearn=True)
            unlearn_s = time.perf_counter() - t0
    assert replayed == units and exact, "the rebuild did not reproduce the written state"
    return {"write_s": write_s, "rebuild_s": rebuild_s, "unlearn_s": unlearn_s, "forgotten": gone, "exact": exact}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--units", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "rebuild.md")
    args = parser.parse_args()
    r = run(args.units, args.threads)
    rate = args.units / r["rebuild_s"]
    lines = [
        "# Rebuilding the memory (benchmarks/rebuild.py)",
        "",
        f"{args.units} turns written with `add_turns` (batches of 64) into one SQLite namespace, default memory "
        f"(dim 384, depth 2, expansion 2, chunk 16), CPU, {args.threads} torch threads, "
        f"{platform.processor() or platform.machine()}, Python {sys.version.split()[0]}, torch {torch.__version__}.",
        "",
        "| | seconds | units/s |",
        "|---|---:|---:|",
        f"| writing them (hash embedder, gate, commits) | {r['write_s']:.2f} | {args.units / r['write_s']:.0f} |",
        f"| `rebuild_memory` (replay from M_0, one commit) | {r['rebuild_s']:.2f} | {rate:.0f} |",
        f"| `forget(source=..., unlearn=True)` of {r['forgotten']} turns | {r['unlearn_s']:.2f} | |",
        "",
        f"The rebuilt state equals the written one bit for bit: {r['exact']}.",
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
