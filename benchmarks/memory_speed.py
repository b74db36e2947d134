"""Speed and memory of the Titans memory against titans-pytorch 0.5.5 (lucidrains), same run, same inputs.

Issue 3, section 4. Both sides: width 384, chunk 64, a 2-layer memory MLP 384 -> 1536 -> 384, store
and retrieve over (1, 4096, 384) and (8, 1024, 384) float32, no gradients. Ours is
``titans_agent.models.layers.NeuralMemoryLayer`` (the section 4.4 block: projections, causal
convolutions, gates, the memory, output norm and gate) with reads at every token from the memory as
of that token; the reference's ``NeuralMemory`` reads with the weights of the previous chunk
(less work); ours is measured with those chunk-start reads too (``memory_read="chunk"``, the same
semantics and work as the reference). Reference modes: one call over the whole input; "stream64":
64-token calls with its state passed along (its best mode); "batch_size=64" (its weights
refreshed every 64 tokens, as the paper does). Peak RSS growth is measured in a fresh process per
row: the high-water mark during the run minus the resident size once torch is imported and the
module built.

The reference is installed only in its own environment, never as our dependency::

    python3 -m venv .bench-ref && .bench-ref/bin/pip install torch==2.13.0 titans-pytorch==0.5.5
    .venv/bin/python benchmarks/memory_speed.py --reference-python .bench-ref/bin/python

Without ``--reference-python`` (or ``$TITANS_PYTORCH_PYTHON``) only our rows are measured. The
ceiling: float32 matmul GFLOP/s measured here at the memory's shapes, divided by the memory's cost
per token (the speed target counts about 10 MFLOP for update and read, which is the count of
chunk-start reads; the exact counts of both our read modes are printed too). Output: a markdown table on
stdout and in benchmarks/results/memory_speed.md, a PNG next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
DIM, HIDDEN, CHUNK = 384, 1536, 64
ISSUE_MFLOP_PER_TOKEN = 10.0
SHAPES = {"1x4096": (1, 4096), "8x1024": (8, 1024)}
SCAN = "ours, scan alone"
MATMUL_REPS = (200, 15)  # products per timed loop of the ceiling's measurement: 64x384x1536, 1024^3


def _rss_mb() -> tuple[float, float]:
    """(current RSS, high-water mark) of this process in MiB, from /proc/self/status."""
    vals = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, num = line.split()[:2]
                vals[key] = int(num) / 1024
    return vals["VmRSS:"], vals["VmHWM:"]


def cpu_name() -> str:
    """The CPU's model name and its widest vector unit (the ceiling and the cost of subnormal
    numbers both depend on it), from /proc/cpuinfo; the platform's name where that is missing."""
    import platform

    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    unit = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else ""
    return ", ".join(p for p in (model or platform.machine(), unit) if p)


def _reset_hwm() -> bool:
    """Reset the high-water mark to the current RSS (Linux: write 5 to clear_refs); False when the
    kernel refuses, and then the growth measured is an upper bound (it includes earlier peaks)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


# ---------------------------------------------------------------------------------------------- workers
def _worker(spec: dict) -> dict:
    """Run one row in this process; returns tokens/s, seconds and RSS figures."""
    import torch

    torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    batch, length = spec["batch"], spec["length"]
    mode = spec["mode"]
    run_one = None  # ours, stream64: one call of the same part, for a ratio measured in one process
    if spec["impl"] == "ours":
        from titans_agent.models.config import ModelConfig
        from titans_agent.models.layers import NeuralMemoryLayer

        cfg = ModelConfig(
            width=DIM,
            heads=1,
            memory_depth=2,
            memory_expansion=HIDDEN // DIM,
            chunk=CHUNK,
            segment=CHUNK,
            memory_read=spec.get("read", "token"),
        )
        module = NeuralMemoryLayer(cfg).eval()

        def run(x):
            if mode == "one call":
                out, state = module(x)
                return out, state
            state, outs = None, []
            given_up = mode.endswith("given up")  # each call gives the previous state up: no copy
            for lo in range(0, x.shape[1], CHUNK):
                out, state = module(x[:, lo : lo + CHUNK], state, overwrite_state=given_up)
                outs.append(out)
            return torch.cat(outs, 1), state

        if spec.get("part") == "scan":
            run = _scan_alone(module, mode)
        if mode.startswith("stream64"):  # one call of the same part, timed between the stream's runs
            run_one = _scan_alone(module, "one call") if spec.get("part") == "scan" else module

        def state_bytes(state) -> int:  # a layer's state or a ScanResult; the momentum maybe as factors
            momentum = getattr(state, "momentum_factors", None) or state.momentum
            momentum = momentum.tensors() if hasattr(momentum, "tensors") else momentum
            # what is handed on (not .weights, which would apply a deferred update to count it)
            carried = state.next_weights if hasattr(state, "next_weights") else state.carried_weights
            return sum(t.numel() * t.element_size() for t in (*carried, *momentum))
    else:
        from titans_pytorch import NeuralMemory

        kwargs = {"batch_size": CHUNK} if mode == "batch_size=64" else {}
        module = NeuralMemory(dim=DIM, chunk_size=CHUNK, **kwargs).eval()

        def run(x):
            if mode in ("one call", "batch_size=64"):
                return module(x)
            state, outs = None, []
            for lo in range(0, x.shape[1], CHUNK):
                out, state = module(x[:, lo : lo + CHUNK], state=state)
                outs.append(out)
            return torch.cat(outs, 1), state

        def state_bytes(state) -> int:
            total = 0
            for part in (state.weights, state.states[0] if state.states else None):
                if part is not None:
                    total += sum(t.numel() * t.element_size() for t in part.values())
            return total

    # a GPU (benchmarks/gpu.py runs this worker there): the module and inputs on it, each timing
    # synchronised; the CPU-only figures (matmul ceiling, GEMM bound, RSS) are left out
    device = torch.device(spec.get("device", "cpu"))
    cpu = device.type == "cpu"
    module = module.to(device)
    sync = (lambda: None) if cpu else (lambda: torch.cuda.synchronize(device))
    x = torch.randn(batch, length, DIM).to(device)
    small = torch.randn(batch, 2 * CHUNK, DIM).to(device)
    if spec.get("part") == "scan":  # the scan's inputs, made before the timings and the RSS baseline
        with torch.no_grad():
            run.prepare(x), run.prepare(small)
            if run_one is not None:
                run_one.prepare(x)
    with torch.no_grad():
        if not cpu:  # warm: CUDA context, kernels, allocator
            run(small), sync()
        rss0, _ = _rss_mb()
        hwm_reset = _reset_hwm()
        t0 = time.perf_counter()
        out, state = run(x)  # first run: the RSS measurement (and a timing)
        sync()
        first = time.perf_counter() - t0
        _, hwm = _rss_mb()
        finite = bool(torch.isfinite(out).all())
        run(small)
        # the machine's matmul rate next to this row's timings (this VM's speed drifts by up to 30%
        # over minutes): the run's ceiling is the best rate seen anywhere in it
        peaks = [_matmul_gflops(spec["threads"], trials=2)] if cpu else []
        times, one_times = [first], []
        for i in range(spec["repeats"] - 1 + (run_one is not None)):
            if run_one is not None:  # the ratio stream / one call from one process, interleaved: the
                sync()  # machine's speed drifts between processes by more than the gap measured
                t0 = time.perf_counter()
                run_one(x)
                sync()
                one_times.append(time.perf_counter() - t0)
            if i == spec["repeats"] - 1:
                break
            sync()
            t0 = time.perf_counter()
            run(x)
            sync()
            times.append(time.perf_counter() - t0)
        if cpu:
            peaks.append(_matmul_gflops(spec["threads"], trials=2))
    best = min(times)
    extra = {"factored": factored_share(module, x)} if spec["impl"] == "ours" else {}
    if one_times:
        extra["one_call_same_process_s"] = min(one_times)
    if spec["impl"] == "ours" and cpu:
        extra["gemm_bound"] = gemm_bound(spec.get("read", "token"), spec["threads"], chunks=16, trials=2)
    if peaks:
        extra["gflops"] = {key: max(p[key] for p in peaks) for key in peaks[0]}
    return {
        **extra,
        "tokens_per_s": batch * length / best,
        "median_s": statistics.median(times),
        "best_s": best,
        "rss_base_mb": rss0,
        "rss_growth_mb": max(0.0, hwm - rss0),
        "rss_growth_exact": hwm_reset,
        "state_mb": state_bytes(state) / 2**20,
        "finite": finite,
    }


def _scan_alone(module, mode: str):
    """``run(x)`` for the scan alone (``memory_scan``) on the inputs the layer gives it for ``x``:
    its keys, values, queries and gates, made once per input (not timed). "one call": every token
    in one call; "stream64": 64 tokens a call, each passing the previous call's state on
    (``keep_factors``, ``defer_update``: ``next_state``, each call's last weight update applied
    by the next; the caller keeps its state, so each call copies the weights it updates);
    "stream64, state given up": the same with ``overwrite_state`` (no copy)."""
    import torch

    import titans_agent.models.layers as layers

    made: dict = {}

    def inputs(x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in made:
            seen: list = []
            original = layers.memory_scan

            def record(*args, **kwargs):
                seen.append((args, kwargs))
                return original(*args, **kwargs)

            layers.memory_scan, block = record, module.block_tokens
            module.block_tokens = x.shape[1]
            try:
                module(x)
            finally:
                layers.memory_scan, module.block_tokens = original, block
            made[key] = seen[0]
        return made[key]

    def run(x):
        (ws, ss, *rest), kwargs = inputs(x)
        if mode == "one call":
            res = layers.memory_scan(ws, ss, *rest, **kwargs)
            return res.reads, res
        given_up = mode.endswith("given up")
        if given_up:  # the caller's own copy, which it gives up to the first call
            ws, ss = tuple(w.clone() for w in ws), tuple(s.clone() for s in ss)
        outs = []
        kwargs = {**kwargs, "keep_factors": True, "defer_update": True, "overwrite_state": given_up}
        for lo in range(0, rest[0].shape[1], CHUNK):
            res = layers.memory_scan(ws, ss, *(t[:, lo : lo + CHUNK] for t in rest), **kwargs)
            ws, ss = res.next_state
            outs.append(res.reads)
        return torch.cat(outs, 1), res

    run.prepare = inputs  # type: ignore[attr-defined]
    return run


def _matmul_gflops(threads: int, trials: int = 5) -> dict:
    """float32 matmul GFLOP/s at the memory's shapes (64 x 384 @ 384 x 1536) and at 1024^3: the
    best of ``trials`` timed loops (the machine's peak, not a moment's dip)."""
    import torch

    torch.set_num_threads(threads)
    out = {}
    for name, (m, k, n), reps in (
        ("chunk", (CHUNK, DIM, HIDDEN), MATMUL_REPS[0]),
        ("1024", (1024,) * 3, MATMUL_REPS[1]),
    ):
        a, b = torch.randn(m, k), torch.randn(k, n)
        for _ in range(5):
            a @ b
        rates = []
        for _ in range(trials):
            t0 = time.perf_counter()
            for _ in range(reps):
                a @ b
            rates.append(2 * m * k * n * reps / (time.perf_counter() - t0) / 1e9)
        out[name] = max(rates)
    return out


def gemm_bound(read: str, threads: int, chunks: int = 32, trials: int = 3) -> float:
    """Tokens/s of the matrix products alone of one memory's chunk step (batch 1), no element-wise
    work: the most any implementation that does these products through torch's BLAS can reach here.

    The products per chunk of c = 64 tokens, as the scan does them with its momentum factored and
    the weights held ahead (the benchmark's gates flush m_b to 0 in every chunk:
    ``factored_share``): the first layer's forward for keys and queries (2c rows), the last layer's
    forward (c rows, 2c with chunk-start reads), the error back-propagated through the last layer,
    each with its skinny correction (the rows' scores against the previous chunk's inputs A',
    (rows x in) @ (in x c), times its errors Y', (rows x c) @ (c x out); token-level reads fold it
    into the momentum's term), the two in-place weight updates of c rows (GEMM ``beta`` 1, as the
    scan runs them: the decay's scaling is element-wise work and left out), and for token-level
    reads the dual-form scores and the momentum's S_0 r through its factors.
    """
    import torch

    torch.set_num_threads(threads)
    c = CHUNK
    g = torch.Generator().manual_seed(0)
    w1 = torch.randn(HIDDEN, DIM, generator=g) * 0.02
    w2 = torch.randn(DIM, HIDDEN, generator=g) * 0.02
    kq = torch.randn(2 * c, DIM, generator=g)  # keys over queries; the previous keys A'_1 below
    a2 = torch.randn(2 * c, HIDDEN, generator=g)
    err = torch.randn(c, DIM, generator=g)
    x1, x2 = torch.randn(2 * c, HIDDEN, generator=g), torch.randn(2 * c, DIM, generator=g)
    addend = torch.randn(2 * c, DIM, generator=g)
    small, small2 = torch.randn(c, c, generator=g), torch.randn(2 * c, c, generator=g)
    rows = 2 * c if read == "chunk" else c  # rows corrected in each forward

    def step() -> None:
        z1 = kq @ w1.t()
        z1[:rows].addmm_(kq[:rows] @ kq[c:].t(), x1[c:])  # correction: scores vs A'_1, times Y'_1
        if read == "chunk":
            z2 = torch.addmm(addend, a2, w2.t())
        else:
            z2 = torch.addmm(err, a2[:c], w2.t())
        z2[:rows].addmm_(a2[:rows] @ a2[c:].t(), x2[c:])
        (err @ w2).addmm_(err @ x2[c:].t(), a2[c:])  # back-propagation and its correction
        if read == "token":
            kq[c:] @ kq[:c].t(), kq[c:] @ kq[c:].t()  # scores: this chunk's keys, the factors' A
            torch.addmm(a2[c:], small, x1[:c]).addmm_(small, x1[c:])
            a2[c:] @ a2[:c].t(), a2[c:] @ a2[c:].t()
            torch.addmm(kq[c:], a2[c:], w2.t()).addmm_(small, err).addmm_(small2[:c], x2[:c])
        for w, x, a in ((w1, x1[:c], kq[:c]), (w2, x2[:c], a2[:c])):
            w.addmm_(x.t(), a, alpha=-1e-6)

    for _ in range(4):
        step()
    best = 0.0
    for _ in range(trials):
        t0 = time.perf_counter()
        for _ in range(chunks):
            step()
        best = max(best, chunks * c / (time.perf_counter() - t0))
    return best


def our_mflop_per_token(read: str = "token", length_chunk: int = CHUNK, factored: bool = True) -> float:
    """Exact multiply-adds x 2 per token of our store + read, memory part only.

    Per chunk of c tokens and per memory layer (out x in = P): the forward at the chunk start (P
    for the keys; with chunk-start reads P more for the queries), back-propagation through the
    layers above the first (P), the updates, and for token-level reads the W_0 product (P) and the
    dual-form terms c (in + out). With ``factored`` (the momentum held as its factors and the
    weights held ahead, as in the benchmark's runs): one weight update of c rows (P), no momentum
    update, S_0 r through the factors (c (in + out), token-level reads), and a skinny correction
    c (in + out) per corrected row of every forward and back-propagation product. Without: the
    weight and momentum updates (2P) and S_0 r as a matrix product (P). (The last full chunk of a
    call, whose next chunk is not in it, defers its update to the next call, ``defer_update``.)
    """
    layers = [(HIDDEN, DIM), (DIM, HIDDEN)]
    c = length_chunk
    total = 0
    for i, (o, n) in enumerate(layers):
        p, skinny = o * n, c * (o + n)
        fwd = 2 * p if read == "chunk" else p
        bwd = p if i > 0 else 0
        reads = p + skinny if read == "token" else 0  # W_0 r (token-level) and the dual form
        if factored:
            corrected_rows = (2 if read == "chunk" else 1) + (1 if i > 0 else 0)  # forward, back-prop
            total += fwd + bwd + p + reads + corrected_rows * skinny + (skinny if read == "token" else 0)
        else:
            total += fwd + bwd + 2 * p + reads + (p if read == "token" else 0)
    return 2 * total / 1e6


def factored_share(module, x) -> float:
    """Share of the (memory, chunk) pairs of ``module(x)`` whose momentum decay over the chunk,
    ``m_b = prod eta``, flushed to 0, so that the scan holds the momentum as its factors (one extra
    run, not timed; it watches the scan's coefficients)."""
    import torch

    from titans_agent.core import scan, scan_phases

    seen: list = []
    original = scan.chunk_coefficients
    callers = (scan, scan_phases)  # per-channel gates' scan, the MLP memory's phases

    def watch(*gates):
        out = original(*gates)
        seen.append(out[3].flatten())
        return out

    for module_ in callers:
        module_.chunk_coefficients = watch
    try:
        with torch.no_grad():
            module(x)
    finally:
        for module_ in callers:
            module_.chunk_coefficients = original
    m_b = torch.cat(seen)
    return float((m_b == 0).float().mean()) if m_b.numel() else 0.0


# ---------------------------------------------------------------------------------------------- driver
def _best_rounds(rows: list[dict]) -> list[dict]:
    """One row per (input, implementation, mode, read), in first-seen order: the round with the
    most tokens/s (with the matmul rate measured in that round), and the largest RSS growth of
    all its rounds (the conservative figure)."""
    merged: dict[tuple, dict] = {}
    for r in rows:
        key = (r["shape"], r["impl"], r["mode"], r["read"])
        if key not in merged:
            merged[key] = dict(r)
            continue
        old = merged[key]
        best = r if r.get("tokens_per_s", -1.0) > old.get("tokens_per_s", -1.0) else old
        new = dict(best)
        if "rss_growth_mb" in old and "rss_growth_mb" in r:
            new["rss_growth_mb"] = max(old["rss_growth_mb"], r["rss_growth_mb"])
        new["rounds"] = old.get("rounds", 1) + 1
        merged[key] = new
    return list(merged.values())


def _spawn(python: str, spec: dict) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(spec["threads"]), MKL_NUM_THREADS=str(spec["threads"]))
    cmd = [python, __file__, "--worker", json.dumps(spec)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:  # a missing interpreter, a hung row: report it
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--reference-python", default=os.environ.get("TITANS_PYTORCH_PYTHON"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="run every row this many times, round-robin over all rows (a slow spell of the machine "
        "then hits one round of a row, not all of it); each row keeps its best round",
    )
    ap.add_argument("--growth", action="store_true", help="also measure RSS growth at 1k/4k/16k tokens")
    ap.add_argument("--out", type=Path, default=RESULTS / "memory_speed.md")
    args = ap.parse_args()
    if args.repeats < 1 or args.rounds < 1 or args.threads < 1:
        ap.error("--repeats, --rounds and --threads must be at least 1")
    if args.worker:
        print(json.dumps(_worker(json.loads(args.worker))))
        return

    load = os.getloadavg()[0]
    rows = []
    # (implementation, mode, read): ours with reads as of each token and as of the chunk start, the
    # whole layer and the scan alone (``memory_scan`` on the layer's own inputs)
    ours_modes = ("one call", "stream64", "stream64, state given up")
    plans = [(impl, m, r) for impl in ("ours", SCAN) for r in ("token", "chunk") for m in ours_modes]
    if args.reference_python:
        plans += [("titans-pytorch 0.5.5", m, "chunk") for m in ("one call", "stream64", "batch_size=64")]
    for _ in range(args.rounds):
        for shape, (batch, length) in SHAPES.items():
            for impl, mode, read in plans:
                ours = impl in ("ours", SCAN)
                python = sys.executable if ours else args.reference_python
                repeats = args.repeats if ours else max(1, args.repeats - 1)
                spec = {"impl": "ours" if ours else "ref", "mode": mode, "read": read, "batch": batch,
                        "length": length, "threads": args.threads, "repeats": repeats,
                        "part": "scan" if impl == SCAN else "layer"}  # fmt: skip
                res = _spawn(python, spec)
                label = f"{mode}, chunk reads" if ours and read == "chunk" else mode
                rows.append({"shape": shape, "impl": impl, "mode": label, "read": read, **res})
                print(shape, impl, mode, res, file=sys.stderr, flush=True)
    every_round = list(rows)
    rows = _best_rounds(rows)
    growth = []
    if args.growth:
        for length in (1024, 4096, 16384):
            spec = {
                "impl": "ours",
                "mode": "one call",
                "batch": 1,
                "length": length,
                "threads": args.threads,
                "repeats": 1,
            }
            growth.append((length, _spawn(sys.executable, spec)))
    # The ceiling and the GEMM-only bounds: the best rates seen in the whole run (measured here and
    # next to every row), so that a fraction is never flattered by a moment the machine ran slow.
    samples = [_matmul_gflops(args.threads)]
    samples += [r["gflops"] for r in every_round + [g for _, g in growth] if "gflops" in r]
    gf = {key: max(smp[key] for smp in samples) for key in samples[0]}
    bound = {}
    for read in ("token", "chunk"):
        seen = [r["gemm_bound"] for r in every_round if r.get("read") == read and "gemm_bound" in r]
        bound[read] = max([gemm_bound(read, args.threads), *seen])
    ceiling = gf["chunk"] * 1e3 / ISSUE_MFLOP_PER_TOKEN  # tokens/s at the issue's 10 MFLOP/token
    ceiling_big = gf["1024"] * 1e3 / ISSUE_MFLOP_PER_TOKEN  # the same at the 1024^3 rate

    def best(shape: str, impl: str, mode: str | None = None, read: str | None = None) -> float | None:
        vals = [r.get("tokens_per_s") for r in rows if r["shape"] == shape and r["impl"] == impl
                and (mode is None or r["mode"] == mode) and (read is None or r["read"] == read)
                and "tokens_per_s" in r]  # fmt: skip
        return max(vals) if vals else None

    def same_process_ratio(shape: str, impl: str, mode: str, read: str) -> float | None:
        """The stream row's ratio to one call timed in its own process, interleaved (the median of
        the rounds: the rounds' best would pick the noisiest)."""
        vals = [r["one_call_same_process_s"] / r["best_s"] for r in every_round
                if r["shape"] == shape and r["impl"] == impl and r["mode"] == mode and r["read"] == read
                and "one_call_same_process_s" in r and "best_s" in r]  # fmt: skip
        return statistics.median(vals) if vals else None

    lines = [
        "# Titans memory speed: titans-agent vs titans-pytorch 0.5.5",
        "",
        f"Width {DIM}, chunk {CHUNK}, memory MLP {DIM} -> {HIDDEN} -> {DIM}, float32, no gradients, "
        f"{args.threads} threads of {cpu_name()}, load average {load:.2f} at the start. "
        f"Best of {args.repeats} runs in each of {args.rounds} rounds "
        f"(reference: {max(1, args.repeats - 1)}); RSS growth: first run, fresh process per row, the largest "
        "of the rounds.",
        "",
        "| input | implementation | mode | tokens/s | x reference best mode | x reference one call |"
        " peak RSS growth (MiB) | state (MiB) | finite |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['shape']} | {r['impl']} | {r['mode']} | error: {r['error']} | | | | | |")
            continue
        ref_best = best(r["shape"], "titans-pytorch 0.5.5")
        ref_one = best(r["shape"], "titans-pytorch 0.5.5", "one call")
        x_best = f"{r['tokens_per_s'] / ref_best:.2f}" if ref_best else "-"
        x_one = f"{r['tokens_per_s'] / ref_one:.2f}" if ref_one else "-"
        # the scan alone's inputs were made by a run of the layer in the same process: no clean baseline
        rss = "-" if r["impl"] == SCAN else f"{r['rss_growth_mb']:.0f}"
        lines.append(
            f"| {r['shape']} | {r['impl']} | {r['mode']} | {r['tokens_per_s']:,.0f} | {x_best} | {x_one} | "
            f"{rss}{'' if r.get('rss_growth_exact', True) or rss == '-' else ' (upper bound)'} | "
            f"{r['state_mb']:.1f} | {r['finite']} |"
        )
    lines += [
        "",
        f"Ceiling: float32 matmul here {gf['chunk']:.0f} GFLOP/s at the memory's shape (64x384 @ 384x1536) "
        f"/ {ISSUE_MFLOP_PER_TOKEN:.0f} MFLOP per token (the target's count) = **{ceiling:,.0f} tokens/s**; at the "
        f"1024^3 rate ({gf['1024']:.0f} GFLOP/s, about this CPU's peak) the stricter {ceiling_big:,.0f} tokens/s. "
        f"Both rates are the best of {len(samples)} measurements spread over the run.",
        "",
        "| input | ours | reads | one call (tokens/s) | fraction of the ceiling | at the row's own matmul rate |"
        " of the 1024^3 ceiling | stream64 (tokens/s) | stream64 / one call | the same, in one process |"
        " exact MFLOP/token | achieved GFLOP/s | its GEMMs alone (tokens/s, fraction of the ceiling) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for shape in SHAPES:
        for impl, part in (("ours", "layer"), (SCAN, "scan alone")):
            for read, label in (("token", "as of each token"), ("chunk", "as of the chunk start")):
                tag = ", chunk reads" if read == "chunk" else ""
                one = best(shape, impl, f"one call{tag}", read)
                streams = [
                    best(shape, impl, f"stream64{tag}", read),
                    best(shape, impl, f"stream64, state given up{tag}", read),
                ]
                shares = [r["factored"] for r in rows if r["shape"] == shape and r["impl"] == impl and "factored" in r]
                mflop = our_mflop_per_token(read, factored=bool(shares) and min(shares) == 1.0)
                if not one:
                    continue
                row = next(r for r in rows if r["shape"] == shape and r["impl"] == impl and r["read"] == read
                           and r.get("tokens_per_s") == one)  # fmt: skip
                own = row["gflops"]["chunk"] * 1e3 / ISSUE_MFLOP_PER_TOKEN if "gflops" in row else None
                stream_cells = " / ".join(f"{x:,.0f}" for x in streams if x)
                ratio_cells = " / ".join(f"{x / one:.0%}" for x in streams if x)
                same = [same_process_ratio(shape, impl, f"stream64{t}{tag}", read) for t in ("", ", state given up")]
                same_cells = " / ".join(f"{x:.0%}" for x in same if x)
                lines.append(
                    f"| {shape} | {part} | {label} | {one:,.0f} | {one / ceiling:.0%} | "
                    f"{f'{one / own:.0%}' if own else '-'} | {one / ceiling_big:.0%} | {stream_cells or '-'} | "
                    f"{ratio_cells or '-'} | {same_cells or '-'} | {mflop:.1f} | {one * mflop / 1e3:.0f} | "
                    f"{bound[read]:,.0f} ({bound[read] / ceiling:.0%}) |"
                )
    lines += [
        "",
        "The layer: `NeuralMemoryLayer` (projections, convolutions, gates, the scan, output norm and gate). "
        "The scan alone: `memory_scan` on the keys, values, queries and gates the layer gives it (made before "
        "the timing), the part the FLOP count and the ceiling describe. stream64: 64 tokens a call, each "
        "passing the previous call's state on (the momentum as its rank-c factors); the caller keeps its "
        "state, so each call copies the weights it updates. After the slash, the same with the state "
        "given up to each call (`overwrite_state`: no copy); the layer and the scan alone (on the layer's "
        "arguments) defer each call's last weight update to the next (`defer_update`; the scan alone's "
        "stream passes `next_state` on). In one process: one call "
        "of the same part timed between the stream's runs in the stream row's own process, the ratio of the "
        "two best times, the median over the rounds (the machine's speed drifts between processes by more "
        "than the gap measured). "
        "The row's own matmul rate: the best of the measurements taken in that row's process, between and "
        "after its timed runs (the machine's speed when the row ran; the whole-run ceiling is the strict figure). "
        "GEMMs alone: the chunk step's matrix products and nothing else (one memory, `gemm_bound`), the "
        "most an implementation doing these products through torch's BLAS could reach here. Momentum held "
        "as its factors (m_b = prod eta over a chunk flushed to 0; `factored_share`): "
        + ", ".join(
            f"{shape} {min(r['factored'] for r in rows if r['shape'] == shape and 'factored' in r):.0%} of the chunks"
            for shape in SHAPES
            if any(r["shape"] == shape and "factored" in r for r in rows)
        )
        + "; the exact MFLOP/token counts it where every chunk has it.",
    ]
    if growth:
        lines += ["", "Peak RSS growth against input length (ours, one call, batch 1):", "",
                  "| tokens | peak RSS growth (MiB) | the output itself (MiB) | growth less the output (MiB) |"
                  " state (MiB) |", "|---:|---:|---:|---:|---:|"]  # fmt: skip
        for length, res in growth:
            if "error" not in res:
                out_mb = length * DIM * 4 / 2**20  # the (1, n, 384) float32 result the caller gets
                lines.append(
                    f"| {length:,} | {res['rss_growth_mb']:.0f} | {out_mb:.1f} | {res['rss_growth_mb'] - out_mb:.0f} | "
                    f"{res['state_mb']:.1f} |"
                )
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    _plot(rows, args.out.with_suffix(".png"))


def _plot(rows: list[dict], path: Path) -> None:
    """Horizontal bars, one per row (tokens/s and peak RSS growth, log scale for the memory), with
    readable labels; the layer in blue, the scan alone in light blue, the reference in grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if "tokens_per_s" in r]
    if not ok:
        return
    names = [f"{r['shape']}  {r['impl'].replace(' 0.5.5', '')}, {r['mode']}" for r in ok]
    colors = ["tab:blue" if r["impl"] == "ours" else "lightskyblue" if r["impl"] == SCAN else "tab:gray" for r in ok]
    fig, axes = plt.subplots(1, 2, figsize=(13, 0.38 * len(ok) + 1.6), sharey=True)
    for ax, key, label in ((axes[0], "tokens_per_s", "tokens/s (higher is better)"),
                           (axes[1], "rss_growth_mb", "peak RSS growth, MiB, log scale (lower: better)")):  # fmt: skip
        # the scan alone has no RSS figure of its own (its inputs were made in the same process)
        values = [float("nan") if key == "rss_growth_mb" and r["impl"] == SCAN else r[key] for r in ok]
        ax.barh(range(len(ok)), values, color=colors)
        for y, val in enumerate(values):
            if val == val:
                ax.text(val, y, f" {val:,.0f}", va="center", fontsize=7)
        ax.set_xlabel(label)
        ax.grid(axis="x", alpha=0.3)
    if any(r.get("rss_growth_mb", 0) > 0 for r in ok):  # a log axis needs a positive value
        axes[1].set_xscale("log")
    axes[0].set_yticks(range(len(ok)), names, fontsize=8)
    axes[0].invert_yaxis()
    fig.suptitle(
        "Titans memory store + retrieve: titans-agent (blue; the scan alone light blue) vs titans-pytorch 0.5.5 (grey)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
