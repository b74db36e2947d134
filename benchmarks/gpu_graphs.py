"""CUDA graphs of the Titans memory for ``benchmarks/gpu.py`` (its sections 3 and 4).

One sequence (1, 4096, 384) through ``NeuralMemoryLayer`` and ``memory_scan`` eagerly (the default
path and ``capturable``) and as a CUDA graph of the capturable call replayed; and the layer as a
stream of 64-token calls, eagerly and as one captured call replayed per call. Each row says what it
was checked against. On a CPU the eager rows run and the graph rows say they need CUDA; ``capture``
takes a stand-in (a test replays by calling) to exercise the graph rows' own logic there.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from titans_agent.core.scan import memory_scan
from titans_agent.models.config import ModelConfig
from titans_agent.models.layers import LayerMemoryState, NeuralMemoryLayer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu import _scan_inputs, _sync, _timeit  # noqa: E402


def _captured(fn, device: torch.device) -> tuple:
    """``fn`` (no arguments, returns a tensor) captured in a CUDA graph: ``(replay, output, note)``,
    the output rewritten by every replay. First one call with CUDA's sync debugging on (a host read
    would otherwise only show as an invalidated capture; ``note`` gives the first one seen, else
    ""), two warm-up calls on a side stream, then the capture on that stream. A failed capture
    raises with its first cause in the message, the current stream restored.
    """
    import warnings

    with torch.cuda.device(device):
        prev = torch.cuda.current_stream(device)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            before = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode("warn")  # experimental: it may miss a sync, never invents one
            try:
                fn()
            finally:
                torch.cuda.set_sync_debug_mode(before)
        # the mode's own one-time "prototype feature" warning is not a sync
        syncs = [str(w.message) for w in seen if "called a synchronizing CUDA operation" in str(w.message)]
        note = f"{len(syncs)} host syncs, first: {syncs[0][:80]}" if syncs else ""
        side = torch.cuda.Stream(device)
        side.wait_stream(prev)
        with torch.cuda.stream(side):
            for _ in range(2):
                fn()
        prev.wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=side):
                out = fn()
        except Exception as exc:  # the capture's own error hides its cause
            torch.cuda.set_stream(prev)
            cause = exc.__context__ or exc.__cause__
            why = f"{type(exc).__name__}: {str(exc)[:80]}"
            why += f" (cause: {type(cause).__name__}: {str(cause)[:120]})" if cause is not None else ""
            raise RuntimeError(why + (f"; {note}" if note else "")) from exc
    return graph.replay, out, note


# The untrained layer is chaotic over a long input (its inner learning rate makes each chunk's
# gradient step a sensitive map): a relative change of 1e-12 in its input grows to an O(1) change
# of its outputs by token ~2,500 (float64 too), and two float32 paths that round differently
# (capturable or not) drift apart from ~1e-6 after the first chunk to 1e-4..1e-2 by token ~800.
# They are compared over the first 4 chunks, where a wrong path would already differ by O(1); a
# graph, which replays the same kernels as its eager call, is compared with that call over all.
FIRST = 256


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


def graphs(device: torch.device, quick: bool, repeats: int, capture=None) -> list[str]:
    """One sequence through the layer and the scan alone: the eager default, eager ``capturable``
    and (on CUDA) a CUDA graph of the capturable call; tokens/s, speed-up over the eager default,
    the largest difference from the eager default's outputs over the first ``FIRST`` tokens, and
    from the eager capturable call's over all of them; for the graph also after new inputs are
    copied into the captured ones (against the eager capturable call on them): a graph that baked
    one input's decisions in would differ there. ``capture``: what captures a call (default
    :func:`_captured` on CUDA, none elsewhere); a test passes a stand-in that replays by calling."""
    capture = capture or (_captured if device.type == "cuda" else None)
    length = 512 if quick else 4096
    repeats = repeats if quick else max(repeats, 5)  # the same count for every row: a best-of favours more
    gen = torch.Generator().manual_seed(2)

    def scan_inputs() -> list:
        return [t.to(device, torch.float32) if torch.is_tensor(t) else tuple(u.to(device, torch.float32) for u in t)
                for t in _scan_inputs(1, length, 384, 1536, gen)]  # fmt: skip

    scan_in, scan_next = scan_inputs(), scan_inputs()
    x, x_next = (torch.randn(1, length, 384, generator=gen).to(device) for _ in range(2))
    subjects = {}  # name: (run, the static inputs, the new values for them)
    for read in ("token", "chunk"):
        cfg = ModelConfig(
            width=384, heads=1, memory_depth=2, memory_expansion=4, chunk=64, segment=64, memory_read=read
        )
        torch.manual_seed(0)
        layer = NeuralMemoryLayer(cfg).to(device).eval()

        def run_layer(capturable: bool, layer=layer) -> torch.Tensor:
            layer.capturable = capturable
            with torch.no_grad():
                return layer(x)[0]

        subjects[f"layer, {read} reads"] = (run_layer, [x], [x_next])

    def run_scan(capturable: bool) -> torch.Tensor:
        ws, ss, k, v, theta, eta, alpha, q = scan_in
        with torch.no_grad():
            res = memory_scan(
                ws, ss, k, v, theta, eta, alpha, q, chunk_size=64, max_grad_norm=1.0, capturable=capturable
            )
        assert res.reads is not None
        return res.reads

    flat = lambda ts: [u for t in ts for u in (t if isinstance(t, tuple) else (t,))]  # noqa: E731
    subjects["scan alone, token reads"] = (run_scan, flat(scan_in), flat(scan_next))
    first = lambda t: t[:, :FIRST]  # noqa: E731
    rows = []
    for name, (run, static, fresh) in subjects.items():
        try:
            want = run(False)
            t_default = _timeit(lambda run=run: run(False), device, repeats)
            got = run(True)
            t_cap = _timeit(lambda run=run: run(True), device, repeats)
            rows.append(f"| {name} | eager | {length / t_default:,.0f} | 1.00x | 0 | |")
            rows.append(f"| {name} | eager, capturable | {length / t_cap:,.0f} | {t_default / t_cap:.2f}x | "
                        f"{_rel(first(got), first(want)):.1e} | 0 |")  # fmt: skip
        except Exception as exc:  # report and go on: one failing subject must not lose the table
            rows.append(f"| {name} | eager: {type(exc).__name__}: {str(exc)[:100]} | | | | |")
            continue
        if capture is None:
            rows.append(f"| {name} | CUDA graph, capturable | needs CUDA | | | |")
            continue
        try:
            replay, out, note = capture(lambda run=run: run(True), device)
            replay()
            _sync(device)
            diff_first, diff_all = _rel(first(out), first(want)), _rel(out, got)
            secs = _timeit(replay, device, repeats)
            saved = [t.clone() for t in static]
            for t, new in zip(static, fresh):
                t.copy_(new)
            replay()
            diff_next = _rel(out, run(True))
            for t, old in zip(static, saved):
                t.copy_(old)
            mode = "CUDA graph, capturable" + (f" ({note})" if note else "")
            rows.append(f"| {name} | {mode} | {length / secs:,.0f} | {t_default / secs:.2f}x | {diff_first:.1e} | "
                        f"{diff_all:.1e}; new inputs {diff_next:.1e} |")  # fmt: skip
        except Exception as exc:
            rows.append(f"| {name} | CUDA graph: {type(exc).__name__}: {str(exc)[:300]} | | | | |")
    return [
        f"## One sequence (1, {length}, 384) on {device}: eager and CUDA graphs (memory 384 -> 1536 -> 384, "
        f"chunk 64, float32, no gradients; best of {repeats})",
        "",
        f"| subject | mode | tokens/s | x eager | max difference from eager, first {FIRST} tokens (relative) | "
        "from eager capturable, all tokens |",
        "|---|---|---:|---:|---:|---:|",
        *rows,
    ]


def _own_state(layer: NeuralMemoryLayer, batch: int):
    """``layer.init_state(batch)`` in tensors of its own (``init_state`` gives views of M_0, which a
    call never writes in place): a state a stream may give up and a graph may hold."""
    with torch.no_grad():
        st = layer.init_state(batch)
        return LayerMemoryState(
            tuple(w.clone() for w in st.weights),
            tuple(m.clone() for m in st.dense_momentum()),
            tuple(c.clone() for c in st.conv),  # type: ignore[arg-type]
            st.pending.clone(),
        )


def _state_tensors(state) -> list[torch.Tensor]:
    return [*state.weights, *state.dense_momentum(), *state.conv, state.pending]


def graph_stream(device: torch.device, quick: bool, repeats: int, capture=None) -> list[str]:
    """The layer as a stream of 64-token calls over one (1, n, 384) sequence, the state carried and
    given up (``overwrite_state``): eagerly with the default path, eagerly capturable, and (on
    CUDA) one call captured as a CUDA graph and replayed per 64 tokens (each call's tokens copied
    into the captured input; the state the call returns copied into the captured one inside the
    graph where it is not already there). Tokens/s, against the eager default's one call over the
    same tokens; the largest difference of the outputs from the eager default stream's over the
    first ``FIRST`` tokens, and from the eager capturable stream's over all of them; for the graph
    also each of a few replays against the eager capturable call from the same state (a check the
    layer's sensitivity over a long input cannot magnify). ``capture``: as in :func:`graphs`."""
    capture = capture or (_captured if device.type == "cuda" else None)
    length, step = (512 if quick else 4096), 64
    repeats = repeats if quick else max(repeats, 5)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(1, length, 384, generator=gen).to(device)
    cfg = ModelConfig(width=384, heads=1, memory_depth=2, memory_expansion=4, chunk=64, segment=64)
    torch.manual_seed(0)
    layer = NeuralMemoryLayer(cfg).to(device).eval()
    m0 = _own_state(layer, 1)

    def eager(capturable: bool) -> torch.Tensor:
        layer.capturable = capturable
        state, outs = _own_state(layer, 1), []
        with torch.no_grad():
            for lo in range(0, length, step):
                out, state = layer(x[:, lo : lo + step], state, overwrite_state=True)
                outs.append(out)
        return torch.cat(outs, dim=1)

    def one_call() -> torch.Tensor:
        layer.capturable = False
        with torch.no_grad():
            return layer(x)[0]

    first = lambda t: t[:, :FIRST]  # noqa: E731
    rows = []
    try:
        t_one = _timeit(one_call, device, repeats)
        rows.append(f"| one call, eager | {length / t_one:,.0f} | 1.00x | | |")
        want, got = eager(False), eager(True)
        t_default = _timeit(lambda: eager(False), device, repeats)
        t_cap = _timeit(lambda: eager(True), device, repeats)
        rows.append(f"| stream64, eager | {length / t_default:,.0f} | {t_one / t_default:.2f}x | 0 | |")
        rows.append(f"| stream64, eager, capturable | {length / t_cap:,.0f} | {t_one / t_cap:.2f}x | "
                    f"{_rel(first(got), first(want)):.1e} | 0 |")  # fmt: skip
    except Exception as exc:  # report and go on
        rows.append(f"| eager: {type(exc).__name__}: {str(exc)[:200]} | | | | |")
        return _stream_table(length, device, repeats, rows)
    if capture is None:
        rows.append("| stream64, CUDA graph replays | needs CUDA | | | |")
        return _stream_table(length, device, repeats, rows)
    try:
        layer.capturable = True
        x_in = torch.empty(1, step, 384, device=device)
        state = _own_state(layer, 1)
        static = _state_tensors(state)

        def call() -> torch.Tensor:
            with torch.no_grad():
                out, new = layer(x_in, state, overwrite_state=True)
                for old, now in zip(static, _state_tensors(new)):
                    if now.data_ptr() != old.data_ptr():
                        old.copy_(now)
            return out

        x_in.copy_(x[:, :step])
        replay, out, note = capture(call, device)
        outs = torch.empty_like(x)
        calls = length // step
        checked = sorted({0, 1, calls // 2, calls - 1})
        one_step: list[float] = []

        def stream(check: bool = False) -> None:
            with torch.no_grad():
                for old, new in zip(static, _state_tensors(m0)):  # the stream starts over from M_0
                    old.copy_(new)
            for i, lo in enumerate(range(0, length, step)):
                x_in.copy_(x[:, lo : lo + step])
                if check and i in checked:  # the eager call from a copy of the same state
                    ts = [t.clone() for t in static]
                    n_w = len(state.weights)
                    snap = LayerMemoryState(tuple(ts[:n_w]), tuple(ts[n_w : 2 * n_w]), tuple(ts[2 * n_w : -1]), ts[-1])  # type: ignore[arg-type]
                    with torch.no_grad():
                        ref, ref_state = layer(x_in.clone(), snap, overwrite_state=True)
                    replay()
                    one_step.append(_rel(out, ref))
                    one_step.extend(_rel(a, b) for a, b in zip(static[: 2 * n_w], _state_tensors(ref_state)[: 2 * n_w]))
                else:
                    replay()
                outs[:, lo : lo + step].copy_(out)

        stream(check=True)
        _sync(device)
        diff_first, diff_all = _rel(first(outs), first(want)), _rel(outs, got)
        secs = _timeit(stream, device, repeats)
        mode = "stream64, CUDA graph replays" + (f" ({note})" if note else "")
        rows.append(f"| {mode} | {length / secs:,.0f} | {t_one / secs:.2f}x | {diff_first:.1e} | {diff_all:.1e}; "
                    f"calls {checked} against eager from the same state {max(one_step):.1e} |")  # fmt: skip
    except Exception as exc:
        rows.append(f"| stream64, CUDA graph: {type(exc).__name__}: {str(exc)[:300]} | | | | |")
    return _stream_table(length, device, repeats, rows)


def _stream_table(length: int, device: torch.device, repeats: int, rows: list[str]) -> list[str]:
    return [
        f"## The layer as a stream of 64-token calls, (1, {length}, 384) on {device} (state given up; best of "
        f"{repeats})",
        "",
        f"| mode | tokens/s | x one call | max difference from the eager stream, first {FIRST} tokens (relative) | "
        "from the eager capturable stream, all tokens |",
        "|---|---:|---:|---:|---:|",
        *rows,
    ]
