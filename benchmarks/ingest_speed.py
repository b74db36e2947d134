"""Ingest throughput: the whole MemoryAgent.ingest next to the bare embedder, in the same run.

Inputs: the standard library's json and email packages and two licence texts (the demo's inputs).
Measured, on whatever machine runs it:

- chunking: the token-aware splitter alone (chunks/s);
- bare embedding: the embedder alone on exactly the chunks ingest produces (chunks/s);
- whole ingest: reading, chunking, embedding, surprise, memory update and SQLite commits into a
  fresh database (chunks/s), and its ratio to bare embedding (target >= 0.70);
- memory update: tokens/s of NeuralMemory.update alone at d = 384 (default config, and the
  configuration docs/titans.md section 6 measured lucidrains/titans-pytorch with: chunk 64, a
  384 -> 1536 -> 384 memory).

Prints a table and writes benchmarks/results/ingest_speed.md and .png.

    python benchmarks/ingest_speed.py [--repeats 1]
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))

from demo_inputs import codebase, legal_texts  # noqa: E402

from titans_agent import AgentConfig, MemoryAgent, MemoryConfig  # noqa: E402
from titans_agent.core.memory import NeuralMemory  # noqa: E402
from titans_agent.embeddings import load_embedder  # noqa: E402
from titans_agent.ingest.files import SourceFile, discover  # noqa: E402


def memory_tokens_per_s(cfg: MemoryConfig, n_tokens: int = 4096, call: int = 64) -> float:
    mem = NeuralMemory(cfg)
    mem.requires_grad_(False)
    x = torch.nn.functional.normalize(
        torch.randn(n_tokens, cfg.dim, generator=torch.Generator().manual_seed(0)), dim=-1
    )
    with torch.no_grad():
        state = mem.init_state()
        state = mem.update(state, x[:call]).state  # warm-up
        t0 = time.perf_counter()
        for i in range(0, n_tokens, call):
            state = mem.update(state, x[i : i + call]).state
        return n_tokens / (time.perf_counter() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    inputs = codebase() + legal_texts()
    cfg = AgentConfig()
    emb = load_embedder(cfg.embedder, device="cpu")

    with MemoryAgent.open(Path(tempfile.mkdtemp()) / "probe.db", cfg, embedder=emb) as probe:
        chunker = probe.chunker
    files = [f for f in discover(inputs, max_file_bytes=cfg.max_file_bytes) if isinstance(f, SourceFile)]
    t0 = time.perf_counter()
    chunks = [c.text for f in files for c in chunker.split(f.text, path=f.path)]
    t_chunk = time.perf_counter() - t0

    emb.embed(chunks[:32])  # warm-up
    t0 = time.perf_counter()
    for i in range(0, len(chunks), cfg.batch_size):
        emb.embed(chunks[i : i + cfg.batch_size])
    t_embed = time.perf_counter() - t0

    db = Path(tempfile.mkdtemp()) / "bench.db"
    with MemoryAgent.open(db, cfg, embedder=emb) as agent:
        t0 = time.perf_counter()
        report = agent.ingest(inputs)
        t_ingest = time.perf_counter() - t0
    assert report.chunks == len(chunks), (report.chunks, len(chunks))

    default_mem = cfg.memory
    peer_mem = MemoryConfig(chunk_size=64, expansion=4)
    mem_default = memory_tokens_per_s(default_mem)
    mem_peer_cfg = memory_tokens_per_s(peer_mem)

    n = len(chunks)
    rows = [
        ("chunking (splitter alone)", n / t_chunk, "chunks/s", ""),
        ("bare embedding (all-MiniLM-L6-v2)", n / t_embed, "chunks/s", "1.00"),
        ("whole ingest (MemoryAgent.ingest)", n / t_ingest, "chunks/s", f"{t_embed / t_ingest:.2f}"),
        (
            f"memory update, default (d=384, L=2, e={default_mem.expansion}, b={default_mem.chunk_size})",
            mem_default,
            "tokens/s",
            "",
        ),
        ("memory update, d=384, L=2, e=4, b=64 (docs/titans.md section 6 setting)", mem_peer_cfg, "tokens/s", ""),
    ]
    head = (
        f"{n} chunks from {len(files)} files; torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{platform.processor() or platform.machine()}"
    )
    lines = [head, "", "| measure | rate | unit | ratio to bare embedding |", "|---|---:|---|---:|"]
    lines += [f"| {name} | {rate:,.0f} | {unit} | {ratio} |" for name, rate, unit, ratio in rows]
    text = "\n".join(lines)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ingest_speed.md").write_text(text + "\n", encoding="utf-8")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3))
    names = ["bare embedding", "whole ingest"]
    vals = [n / t_embed, n / t_ingest]
    ax.barh(names, vals, color=["#888888", "#2a6fdb"])
    ax.axvline(0.7 * n / t_embed, color="red", linestyle="--", label="70% of bare embedding (target)")
    ax.set_xlabel("chunks per second")
    ax.set_title("titans-agent ingest vs the bare embedder (same run)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(args.out / "ingest_speed.png", dpi=120)
    print(f"\nwrote {args.out / 'ingest_speed.md'} and {args.out / 'ingest_speed.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
