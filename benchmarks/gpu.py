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
3. Many small memories updated in one call: N namespaces (the agent's default memory, 384 ->
   768 -> 384, chunk 16), each writing 16 new units, batched along the scan's first dimension
   (one set of batched matmuls for all namespaces) against a Python loop over them.

Usage::

    python benchmarks/gpu.py                 # CUDA, full sizes
    python benchmarks/gpu.py --device cpu --quick
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from titans_agent.core.scan import memory_scan
from titans_agent.models.config import ModelConfig
from titans_agent.models.layers import NeuralMemoryLayer

RESULTS = Path(__file__).resolve().parent / "results"


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="small sizes (to check the script on a CPU)")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile variants")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS / "gpu.md")
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("CUDA is not available here: run with --device cpu --quick to check the script")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    lines = [f"# Titans memory on {name} (torch {torch.__version__})", ""]
    for part in (
        correctness(device, args.quick),
        throughput(device, args.quick, args.compile, args.repeats),
        many_namespaces(device, args.quick, args.repeats),
    ):
        lines += [*part, ""]
        print("\n".join(part) + "\n", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
