"""The Titans memory on CUDA: correctness against float64 CPU, throughput, and many namespaces at once.

Issue 3, section 4. One short script for a lent GPU (an H200 here, when one is lent; it also runs
on the CPU with ``--device cpu --quick`` to check the script itself). It writes a markdown table to
benchmarks/results/gpu.md (or ``--out``) and prints it:

1. Correctness: the scan on the device (float32, and under bf16 autocast, whose inner loop must
   stay float32) against the same inputs in float64 on the CPU: max relative error of the reads
   and the final weights.
2. Throughput of store + token-level retrieve through ``NeuralMemoryLayer`` (width 384, memory
   384 -> 1536 -> 384, chunk 64) over (1, 4096, 384), (8, 1024, 384) and (64, 4096, 384): float32,
   bf16 autocast (fp32 inner loop), and the same under ``torch.compile`` when ``--compile``.
3. CUDA graphs (``benchmarks/gpu_graphs.py``) over one sequence, (1, 4096, 384): the layer
   (token-level and chunk-start reads) and the scan alone, eagerly with the default path, eagerly
   with ``capturable`` (no value read back to the host) and that call captured once in a CUDA
   graph and replayed: tokens/s and the largest difference from the eager default's outputs (on
   the CPU only the eager rows); and the layer as a stream of 64-token calls, eagerly and as one
   captured call replayed per 64 tokens.
4. Many small memories updated in one call: N namespaces (the agent's default memory, 384 ->
   768 -> 384, chunk 16), each writing 16 new units, batched along the scan's first dimension
   (one set of batched matmuls for all namespaces) against a Python loop over them.
5. With ``--reference-python`` (an interpreter with titans-pytorch 0.5.5, see
   benchmarks/memory_speed.py): ours and titans-pytorch on the device in the same run, through
   memory_speed.py's worker: (1, 4096, 384), one call and 64-token calls.
6. The agent end to end (``--agent``): the demo's corpus (examples/demo_inputs.py) ingested with
   the embedder and the memory on the device and again on the CPU, chunks/s of each; recall p50
   over fixed questions; whether each question's top 10 is the same on both (by source and lines).
   It needs the package's dependencies where it runs (SQLAlchemy, pydantic, the default
   embedder's package): on a lent machine, carry what ``benchmarks/gpu_bundle.py`` packs (the
   missing wheels, and the embedder stored as float16, given here with ``--embedder``).

Usage::

    python benchmarks/gpu.py                 # CUDA, full sizes
    python benchmarks/gpu.py --device cpu --quick --agent
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from titans_agent.core.scan import memory_scan
from titans_agent.models.config import ModelConfig
from titans_agent.models.layers import NeuralMemoryLayer

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_graphs, memory_speed
RESULTS = Path(__file__).resolve().parent / "results"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
# What the agent section asks beside the demo's two questions (each about the demo's corpus).
AGENT_QUESTIONS = [
    "how does the JSON encoder handle NaN and infinity",
    "where are email headers folded into lines",
    "how is a MIME multipart message split into parts",
    "what does the licence say about warranty and liability",
    "can I distribute modified versions of the program",
    "how are duplicate keys in a JSON object handled",
]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timeit(fn, device: torch.device, repeats: int) -> float:
    fn()
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def _scan_inputs(n_seq: int, n: int, e: int, hidden: int, gen: torch.Generator):
    k = torch.nn.functional.normalize(torch.randn(n_seq, n, e, generator=gen, dtype=torch.float64), dim=-1)
    q = torch.nn.functional.normalize(torch.randn(n_seq, n, e, generator=gen, dtype=torch.float64), dim=-1)
    v = torch.randn(n_seq, n, e, generator=gen, dtype=torch.float64)
    theta = 0.05 * torch.rand(n_seq, n, generator=gen, dtype=torch.float64)
    eta = 0.5 + 0.5 * torch.rand(n_seq, n, generator=gen, dtype=torch.float64)
    alpha = 0.01 * torch.rand(n_seq, n, generator=gen, dtype=torch.float64)
    ws = (
        torch.randn(n_seq, hidden, e, generator=gen, dtype=torch.float64) / e**0.5,
        0.1 * torch.randn(n_seq, e, hidden, generator=gen, dtype=torch.float64) / hidden**0.5,
    )
    ss = tuple(torch.zeros_like(w) for w in ws)
    return ws, ss, k, v, theta, eta, alpha, q


def correctness(device: torch.device, quick: bool) -> list[str]:
    gen = torch.Generator().manual_seed(0)
    n = 256 if quick else 2048
    inputs = _scan_inputs(2, n, 64, 256, gen)

    def on_device(t):
        return tuple(x.to(device, torch.float32) for x in t) if isinstance(t, tuple) else t.to(device, torch.float32)

    # eta in [0.5, 1): the momentum is a matrix; eta in [0.2, 0.6): m_b = prod eta over 64 tokens
    # flushes to 0 in float32 (not in float64), so the device holds the momentum as its factors
    factored = list(inputs)
    factored[5] = 0.2 + 0.4 * torch.rand(inputs[5].shape, generator=gen, dtype=torch.float64)
    rows = []
    for regime, case in (("eta 0.5-1", inputs), ("eta 0.2-0.6, factored", factored)):
        dev_inputs = [on_device(t) for t in case]
        for read in ("token", "chunk"):
            ref = memory_scan(*case[:7], case[7], chunk_size=64, max_grad_norm=1.0, read=read)
            for name, autocast in (("float32", False), ("bf16 autocast", True)):
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                    got = memory_scan(*dev_inputs[:7], dev_inputs[7], chunk_size=64, max_grad_norm=1.0, read=read)
                rel = lambda a, b: float((a.double().cpu() - b).abs().max() / b.abs().max())  # noqa: E731
                rows.append(
                    f"| {name} | {read} | {regime} | {got.reads.dtype} | {rel(got.reads, ref.reads):.1e} | "
                    f"{max(rel(a, b) for a, b in zip(got.weights + got.momentum, ref.weights + ref.momentum)):.1e} |"
                )
    return [
        f"## Correctness on {device} against float64 on the CPU ({n} tokens, 2 memories, width 64)",
        "",
        "| mode | reads | momentum decay | inner dtype | max rel. error, reads | max rel. error, state |",
        "|---|---|---|---|---:|---:|",
        *rows,
    ]


def throughput(device: torch.device, quick: bool, compile_: bool, repeats: int) -> list[str]:
    layers = {}
    for read in ("token", "chunk"):
        cfg = ModelConfig(
            width=384, heads=1, memory_depth=2, memory_expansion=4, chunk=64, segment=64, memory_read=read
        )
        layers[read] = NeuralMemoryLayer(cfg).to(device).eval()
    shapes = [(1, 512)] if quick else [(1, 4096), (8, 1024), (64, 4096)]
    variants = [("float32", False, False, "token"), ("bf16 autocast", True, False, "token")]
    variants += [("float32, chunk reads", False, False, "chunk"), ("bf16 autocast, chunk reads", True, False, "chunk")]
    if compile_:
        variants += [("float32 + compile", False, True, "token"), ("bf16 + compile", True, True, "token")]
    rows = []
    for batch, length in shapes:
        x = torch.randn(batch, length, 384, device=device)
        for name, autocast, comp, read in variants:
            layer = layers[read]
            fn = torch.compile(layer) if comp else layer

            def run(fn=fn, autocast=autocast, x=x):
                with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                    fn(x)

            try:
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(device)
                secs = _timeit(run, device, repeats)
                peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else float("nan")
                rows.append(f"| ({batch}, {length}, 384) | {name} | {batch * length / secs:,.0f} | {peak:,.0f} |")
            except Exception as exc:  # report and go on: one failing variant must not lose the table
                rows.append(f"| ({batch}, {length}, 384) | {name} | error: {type(exc).__name__}: {str(exc)[:80]} | |")
    return [
        f"## Store + retrieve on {device} (memory 384 -> 1536 -> 384, chunk 64, no gradients; reads as of each "
        "token unless marked chunk reads)",
        "",
        "| input | mode | tokens/s | peak device memory (MiB) |",
        "|---|---|---:|---:|",
        *rows,
    ]


def many_namespaces(device: torch.device, quick: bool, repeats: int) -> list[str]:
    gen = torch.Generator().manual_seed(1)
    rows = []
    for n_ns in [8, 64] if quick else [64, 1024, 4096]:
        inputs = [t.to(device, torch.float32) if torch.is_tensor(t) else tuple(u.to(device, torch.float32) for u in t)
                  for t in _scan_inputs(n_ns, 16, 384, 768, gen)]  # fmt: skip
        ws, ss, k, v, theta, eta, alpha, _ = inputs

        def batched(ws=ws, ss=ss, k=k, v=v, theta=theta, eta=eta, alpha=alpha) -> None:
            with torch.no_grad():
                memory_scan(ws, ss, k, v, theta, eta, alpha, chunk_size=16, max_grad_norm=1.0, reject_nonfinite=True)

        def looped(ws=ws, ss=ss, k=k, v=v, theta=theta, eta=eta, alpha=alpha, n_ns=n_ns) -> None:
            with torch.no_grad():
                for i in range(n_ns):
                    sl = slice(i, i + 1)
                    memory_scan(
                        tuple(w[sl] for w in ws),
                        tuple(s[sl] for s in ss),
                        k[sl],
                        v[sl],
                        theta[sl],
                        eta[sl],
                        alpha[sl],
                        chunk_size=16,
                        max_grad_norm=1.0,
                        reject_nonfinite=True,
                    )

        t_b = _timeit(batched, device, repeats)
        t_l = _timeit(looped, device, max(1, repeats // 2))
        rows.append(f"| {n_ns:,} | {n_ns * 16 / t_b:,.0f} | {n_ns * 16 / t_l:,.0f} | {t_l / t_b:.1f}x |")
    return [
        f"## Many namespaces at once on {device} (memory 384 -> 768 -> 384, 16 new units each)",
        "",
        "| namespaces | batched units/s | looped units/s | speed-up |",
        "|---:|---:|---:|---:|",
        *rows,
    ]


def reference(device: torch.device, python: str, repeats: int) -> list[str]:
    """Ours and titans-pytorch 0.5.5 on ``device`` in the same run (memory_speed.py's worker, each
    row in a fresh process; the reference in its own interpreter): (1, 4096, 384), one call and
    64-token calls."""
    from memory_speed import _spawn  # its worker, each row in a fresh process, errors reported

    plans = [
        ("ours", m, r, sys.executable) for r in ("token", "chunk") for m in ("one call", "stream64, state given up")
    ]
    plans += [("titans-pytorch 0.5.5", m, "chunk", python) for m in ("one call", "stream64")]
    results: list[tuple[str, str, float | None, str]] = []  # implementation, mode, tokens/s, error
    for impl, mode, read, exe in plans:
        spec = {"impl": "ours" if impl == "ours" else "ref", "mode": mode, "read": read, "batch": 1, "length": 4096,
                "threads": min(4, os.cpu_count() or 1), "repeats": repeats, "device": str(device)}  # fmt: skip
        label = f"{mode}{', chunk reads' if impl == 'ours' and read == 'chunk' else ''}"
        res = _spawn(exe, spec)
        results.append((impl, label, res.get("tokens_per_s"), res.get("error", "")))
    ref_best = max((v for impl, _, v, _ in results if impl != "ours" and v), default=None)
    rows = [
        f"| {impl} | {label} | {v:,.0f} | {f'{v / ref_best:.2f}' if ref_best else '-'} |"
        if v
        else f"| {impl} | {label} | error: {err} | |"
        for impl, label, v, err in results
    ]
    return [
        f"## Ours and titans-pytorch 0.5.5 on {device}, same run ((1, 4096, 384), memory 384 -> 1536 -> 384)",
        "",
        "| implementation | mode | tokens/s | x titans-pytorch's best mode |",
        "|---|---|---:|---:|",
        *rows,
    ]


def model_weights(folder: Path) -> Path | None:
    """The weights file of a model folder: ``model.safetensors``, or ``model.safetensors.gz`` as
    ``benchmarks/gpu_bundle.py`` stores it to travel; None when neither is there."""
    for name in ("model.safetensors", "model.safetensors.gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def float32_model(src: Path, dest: Path) -> bool:
    """A copy of the sentence-transformers model folder ``src`` in ``dest`` with its weights
    (``model.safetensors``, or gzip-compressed ``model.safetensors.gz``) as float32: what
    ``benchmarks/gpu_bundle.py`` stored as float16 to travel. Returns whether any weight was not
    float32 in ``src``.

    Raises:
        SystemExit: ``src`` holds no weights file, or one that cannot be read (truncated, corrupt).
    """
    import gzip
    import shutil

    from safetensors.torch import load, save_file

    found = model_weights(src)
    if found is None:
        raise SystemExit(f"--embedder {src}: not a model folder with model.safetensors (gpu_bundle.py writes one)")
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("model.safetensors*"), dirs_exist_ok=True)
    try:
        raw = gzip.decompress(found.read_bytes()) if found.suffix == ".gz" else found.read_bytes()
        weights = load(raw)
    except (OSError, EOFError, ValueError, RuntimeError) as exc:  # a truncated or corrupt copy
        raise SystemExit(f"--embedder {src}: {found.name} cannot be read ({type(exc).__name__}: {exc})") from exc
    converted = any(t.is_floating_point() and t.dtype != torch.float32 for t in weights.values())
    save_file({k: t.float() if t.is_floating_point() else t for k, t in weights.items()},
              str(dest / "model.safetensors"), metadata={"format": "pt"})  # fmt: skip
    return converted


def _agent_run(device: str, paths: list[Path], questions: list[str], repeats: int, embedder: str | None) -> dict:
    """Ingest ``paths`` into a new database with the embedder (``embedder``: a model folder, None:
    the default) and memory on ``device`` (the model loaded before the timing), then time every
    question ``repeats`` times after one untimed round (which gives each question's top 10)."""
    from titans_agent import AgentConfig, MemoryAgent

    config = AgentConfig(device=device) if embedder is None else AgentConfig(device=device, embedder=embedder)
    with tempfile.TemporaryDirectory(prefix="titans-gpu-") as tmp:
        agent = MemoryAgent.open(Path(tmp) / "agent.db", config)
        try:  # load the embedder and warm the device outside the timing (another namespace)
            agent.ingest("A first note, written before the timed ingest.", source="warm-up", namespace="warm-up")
            t0 = time.perf_counter()
            report = agent.ingest([str(p) for p in paths])
            ingest_s = time.perf_counter() - t0
            tops = {q: [(h.source, h.location, h.kind) for h in agent.recall(q, k=10)] for q in questions}
            times = []
            for _ in range(repeats):
                for q in questions:
                    t0 = time.perf_counter()
                    agent.recall(q, k=10)
                    times.append((time.perf_counter() - t0) * 1e3)
        finally:
            agent.close()
    times.sort()
    return {"chunks": report.chunks, "ingest_s": ingest_s, "p50_ms": statistics.median(times),
            "p90_ms": times[int(0.9 * (len(times) - 1))], "tops": tops}  # fmt: skip


def agent_end_to_end(device: torch.device, quick: bool, repeats: int, embedder: Path | None = None) -> list[str]:
    """The agent on ``device`` and on the CPU, the same inputs and questions: ingest speed, recall
    latency, and whether the top 10 agree (on a CPU-only check, two CPU runs: determinism).
    ``embedder``: a model folder whose weights may be float16 (``gpu_bundle.py``), made float32
    first; None: the default embedder."""
    sys.path.insert(0, str(EXAMPLES))
    from demo_inputs import QUESTIONS, codebase, legal_texts

    paths = codebase()[:1] + legal_texts()[:1] if quick else codebase() + legal_texts()
    questions = [q for q, _, _ in QUESTIONS] + AGENT_QUESTIONS
    first = str(device) if device.type != "cpu" else "cpu, first run"
    with tempfile.TemporaryDirectory(prefix="titans-model-") as tmp:
        converted = embedder is not None and float32_model(embedder, Path(tmp) / "model")
        model = None if embedder is None else str(Path(tmp) / "model")
        runs = {
            name: _agent_run(dev, paths, questions, repeats, model)
            for name, dev in ((first, str(device)), ("cpu", "cpu"))
        }
    which = "the default embedder" if embedder is None else f"the embedder in {embedder.name}/"
    which += " (float16 weights made float32)" if converted else ""
    lines = [
        f"## The agent end to end on {device} and on the CPU (the demo's corpus: {len(paths)} inputs, "
        f"{len(questions)} questions, top 10; {which})",
        "",
        "| run | chunks | ingest (s) | chunks/s | recall p50 (ms) | recall p90 (ms) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in runs.items():
        lines.append(f"| {name} | {r['chunks']:,} | {r['ingest_s']:.1f} | {r['chunks'] / r['ingest_s']:,.1f} | "
                     f"{r['p50_ms']:.1f} | {r['p90_ms']:.1f} |")  # fmt: skip
    (a, b) = runs.values()
    same_order = sum(a["tops"][q] == b["tops"][q] for q in questions)
    same_set = sum(set(a["tops"][q]) == set(b["tops"][q]) for q in questions)
    same_first = sum(a["tops"][q][:1] == b["tops"][q][:1] for q in questions)
    overlap = statistics.mean(len(set(a["tops"][q]) & set(b["tops"][q])) / 10 for q in questions)
    lines += [
        "",
        f"Top 10 identical, in order: {same_order} of {len(questions)} questions; the same ten: {same_set}; "
        f"the same rank 1: {same_first}; mean overlap of the ten: {overlap:.0%}.",
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="small sizes (to check the script on a CPU)")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile variants")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reference-python", help="an interpreter with titans-pytorch 0.5.5: time it on the device too")
    ap.add_argument("--agent", action="store_true", help="also run the agent end to end on the device and the CPU")
    ap.add_argument("--embedder", type=Path, help="--agent with this model folder (gpu_bundle.py's float16 copy)")
    ap.add_argument("--out", type=Path, default=RESULTS / "gpu.md")
    args = ap.parse_args()
    if args.embedder is not None and not args.agent:
        ap.error("--embedder is for --agent")
    if args.agent:  # fail before the device's time goes into the other parts
        import titans_agent.ingest.chunking  # noqa: F401  (the text splitter, imported only at ingest)
        from titans_agent import MemoryAgent  # noqa: F401  (what opening an agent imports)

        if args.embedder is not None and model_weights(args.embedder) is None:
            ap.error(f"--embedder {args.embedder}: not a model folder with model.safetensors")
    from gpu_graphs import graph_stream, graphs  # its helpers come from this module

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("CUDA is not available here: run with --device cpu --quick to check the script")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    lines = [f"# Titans memory on {name} (torch {torch.__version__})", ""]
    parts = [
        lambda: correctness(device, args.quick),
        lambda: graphs(device, args.quick, args.repeats),
        lambda: graph_stream(device, args.quick, args.repeats),
        lambda: throughput(device, args.quick, args.compile, args.repeats),
        lambda: many_namespaces(device, args.quick, args.repeats),
    ]
    if args.reference_python:
        parts.append(lambda: reference(device, args.reference_python, args.repeats))
    if args.agent:
        parts.append(lambda: agent_end_to_end(device, args.quick, args.repeats, args.embedder))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for make in parts:  # the table is written after each part: a run cut short keeps what it measured
        part = make()
        lines += [*part, ""]
        print("\n".join(part) + "\n", flush=True)
        args.out.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
