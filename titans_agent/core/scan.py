"""The chunked Titans memory update with token-level reads: one implementation for the agent's
memory (:mod:`titans_agent.core.memory`) and the sequence models (:mod:`titans_agent.models`).

Source: Behrouz, Zhong, Mirrokni, "Titans: Learning to Memorize at Test Time" (arXiv 2501.00663),
eq. 12-15 and section 3.2; docs/titans.md sections 1-2.

The memory is an MLP with ``L >= 1`` layers per sequence and head, ``W_1 (h, e) ... W_L (e, h)``
(``(e, e)`` for ``L = 1``), read as ``M(x) = W_L act(... act(W_1 x))``, plus ``x`` when ``L >= 2``
(the residual MLP). Every token t writes one gradient step with momentum and a forgetting gate on
``l(M; k_t, v_t) = ||M(k_t) - v_t||^2`` (eq. 12-14)::

    S_t = eta_t S_{t-1} - theta_t grad l(M_{t'}; k_t, v_t)
    M_t = (1 - alpha_t) M_{t-1} + S_t

where, for chunks of ``b`` tokens, every gradient of a chunk is taken at its start ``t'`` (3.2).
Each per-token gradient of layer l is an outer product ``u_{t,l} = delta_{t,l} a_{t,l-1}^T`` (the
back-propagated error times the layer's input), so with ``beta_t``, ``m_t`` the cumulative products
of ``1 - alpha`` and ``eta`` inside the chunk, ``n_{i,k} = theta_i prod_{j=i+1..k} eta_j``,
``f_t = sum_{k<=t} (beta_t / beta_k) m_k`` and ``G_{t,i} = sum_{k=i..t} (beta_t / beta_k) n_{i,k}``::

    M_t = beta_t M_0 + f_t S_0 - sum_{i<=t} G_{t,i} u_i          S_b = m_b S_0 - sum_i n_{i,b} u_i

A read at token t sees the memory as of token t ("dual form", the TTT trick, layer by layer)::

    z_{t,l} = beta_t W0_l r + f_t S0_l r - sum_{i<=t} G_{t,i} (a_{i,l-1} . r) delta_{i,l}

with ``r`` the read's input to layer l: a chunk is a few batched matmuls and no per-token weights
are ever materialised, so memory use does not grow with the input. Every cumulative product is a
segment sum in log space (``log 0 = -inf`` gives exact zeros). The scan runs in float32 (float64
when given float64) even under reduced-precision autocast.

Speed: coefficients, back-propagated errors and update terms below 2^-60 (float32) are set to
exactly 0, so no subnormal number (computed in microcode, tens of times slower) reaches a GEMM or
the state (see ``kernels.flush_tiny`` for what that costs at extreme scales); the reads' three
terms are accumulated by the GEMMs themselves; without autograd (and, with ``reject_nonfinite``,
when ``max_grad_norm`` bounds each step) the state is cloned once and updated in place, each
chunk's decay a pass of its own before its update GEMM (whose own ``beta`` stays 1: other values
cost MKL 1.28x at one of the memory's shapes, ``kernels.minus_product_``); and there, after a
chunk whose momentum decay ``m_b = prod eta`` flushed to 0 (eta around 0.5 over 64 tokens), the
momentum ``S_b = -Y^T A`` is kept as its rank-c factors: the next chunk reads ``f_t S_b r``
through two skinny GEMMs and skips the momentum GEMM, and ``f_b S_b``, which the weights receive
at the next chunk's end, is added one chunk early in this chunk's own update GEMM (the weights
held ahead, ``W + gamma S``, with skinny corrections where the next chunk multiplies by them), so
each weight update is one GEMM of c rows; a stream of one-chunk calls too, with ``defer_update``
(each call's last update is left to the next, which applies it with the lookahead).
The scan of an MLP memory runs in named phases (:mod:`titans_agent.core.scan_phases`: prepare;
per chunk start, forward, backward, read, update; finish) over the pure tensor functions of
:mod:`titans_agent.core.kernels`.
``benchmarks/memory_speed.py`` measures it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from titans_agent.core.kernels import (
    EPS,
    MomentumFactors,
    ScanResult,
    activation_fns,
    chunk_coefficients,
    keep_finite,
    mlp_forward,
    scan_result,
    segsum,
)
from titans_agent.core.scan_phases import MlpScan

__all__ = ["MomentumFactors", "ScanResult", "activation_fns", "memory_scan", "mlp_forward", "segsum"]


def memory_scan(
    weights: tuple[Tensor, ...],
    momentum: tuple[Tensor, ...] | MomentumFactors,
    k: Tensor,
    v: Tensor,
    theta: Tensor,
    eta: Tensor,
    alpha: Tensor,
    q: Tensor | None = None,
    *,
    chunk_size: int,
    activation: str = "gelu",
    max_grad_norm: float | None = None,
    reject_nonfinite: bool = False,
    read: str = "token",
    overwrite_state: bool = False,
    keep_factors: bool = False,
    capturable: bool = False,
    defer_update: bool = False,
) -> ScanResult:
    """Write ``n`` tokens into ``N`` independent memories and, optionally, read at every token.

    Chunks start at token 0 of ``k`` (the caller aligns them with global positions). The update is
    differentiable in every input (keys, values, queries, gates, initial weights), which is what
    meta-learning the outer parameters needs (docs/titans.md section 5, oracle 6).

    Args:
        weights: per layer ``(N, out, in)``: the memory at the start (a chunk boundary).
        momentum: the momentum S at the same point, same shapes; or, from the previous call's
            ``ScanResult.next_momentum``, its rank-c factors (:class:`MomentumFactors`); or, with
            ``weights`` from the same call's ``ScanResult.next_state``, factors that also carry the
            weights' deferred last update (applied here first).
        k: keys ``(N, n, e)``; v: values ``(N, n, e)``.
        theta: inner learning rates ``(N, n)``, ``>= 0`` (eq. 13).
        eta: momentum decays ``(N, n)`` in ``[0, 1]`` (eq. 13).
        alpha: forgetting gates ``(N, n)`` in ``[0, 1]`` (eq. 14).
            For a matrix memory (one layer) the three gates may instead be per channel,
            ``(N, n, out)``: each output channel (row of M and S) has its own learning rate, momentum
            decay and forgetting (MIRAS's per-channel gates); the coefficients then carry a channel
            axis and the reads use ``einsum`` over it.
        q: optional queries ``(N, n, e)``: ``reads[:, t]`` is ``M_t(q_t)``, the memory after token t
            (``read="token"``), or ``M_{t'}(q_t)`` with ``t'`` the start of t's chunk (``"chunk"``).
        chunk_size: b, tokens whose gradients share their chunk's starting weights.
        activation: ``"gelu"`` or ``"silu"`` between the memory MLP's layers.
        max_grad_norm: clamp of each token's gradient norm (all layers together); None: no clamp.
        reject_nonfinite: skip (per memory) a chunk whose update is non-finite, keeping the state
            before it, and count it in ``rejected``.
        read: ``"token"`` (default): every read sees the memory as of its own token, the tokens
            before it in its chunk included (the dual form above; eq. 15 with ``M_t``).
            ``"chunk"``: every read sees the memory as of its chunk's start, before any of the
            chunk's tokens is written: what titans-pytorch's ``NeuralMemory`` computes (its reads
            lag by one chunk) and the cheaper choice: no momentum product and no dual-form terms,
            about 10.6 instead of 13.5 MFLOP per token for a 384 -> 1536 -> 384 memory. Causal
            either way; the state after each chunk is the same.
        overwrite_state: the caller gives ``weights`` and ``momentum`` up: without autograd they
            may be updated in place (no copy of the state) and must not be used afterwards. They
            must be the caller's own outright, not views of parameters (an ``expand`` of a
            ``(1, out, in)`` parameter is contiguous and would be overwritten); tensors sharing
            storage with one another, non-contiguous ones and ``reject_nonfinite`` fall back to a
            copy. Meant for a caller that carries the state from one call to the next (the models'
            layer between the blocks of a long input). Default: the inputs are never modified.
        keep_factors: when the call ends with the momentum held as its rank-c factors (the last
            full chunk's ``m_b`` flushed to 0 for every memory, no unfinished chunk, no autograd),
            return them as ``ScanResult.momentum_factors`` (``momentum`` is then ``()``) instead of
            writing the matrices: for a caller that passes ``next_momentum`` to its next call (a
            stream of short calls), which then skips the momentum's GEMMs and its copy.
        defer_update: with ``keep_factors``, also leave the last chunk's update of the weights to
            the next call, inside the factors (:class:`MomentumFactors` ``deferred``), for a caller
            that passes ``ScanResult.next_state`` on: the next call applies it in the GEMM that
            opens it, with its first chunk's share of the momentum (``f_b S``, added one chunk
            early as between the chunks of one call), so a stream of one-chunk calls updates the
            weights with c rows a call instead of 2c. ``ScanResult.weights`` applies it (a GEMM on
            first access). Only where the call ends factored with its weights held ahead
            (``beta_b >= 1/16`` in its last chunk); not with ``reject_nonfinite``, an unfinished
            chunk or ``capturable``. The same arithmetic up to rounding.
        capturable: read nothing back to the host, so that a CUDA graph can capture the call (the
            chunk loop replayed without a kernel launch per operation: a single sequence on a GPU
            is launch-bound). The gates' range check is skipped (the caller guarantees the ranges,
            as sigmoid gates do; a NaN gate still gives a non-finite state), and the momentum is
            held as a matrix throughout (whether a chunk's ``m_b`` flushed to 0 is a host read), so
            ``keep_factors`` keeps nothing; factors given in ``momentum`` are still read. The same
            arithmetic up to rounding. Not with ``reject_nonfinite`` (its checks are host reads).
            A graph replays the decisions of its capture: nothing is decided per call.

    Returns:
        A :class:`ScanResult`.

    Precision: terms below 2^-60 in float32 are dropped to keep subnormal numbers out of the
    arithmetic; at ordinary scales (unit-norm keys, values of order 1) that is below float32's
    resolution, far outside them it is not (``kernels.flush_tiny``). Use float64 inputs there.

    Non-finite starting state without ``reject_nonfinite``: without autograd a term whose
    coefficient is exactly 0 is not computed (BLAS's ``beta = 0``; a momentum whose decay over the
    chunk ``m_b`` is 0 is rebuilt from the chunk's own terms), so a NaN in the starting momentum
    reaches the weights but not necessarily the returned momentum, where the autograd path gives
    ``0 * NaN = NaN``. With ``reject_nonfinite`` both paths check every chunk the same way.

    Memory use per memory is O(b^2 + b * width) for the chunk's coefficients and activations,
    plus the weights: bounded by the chunk size, not the input length (a chunk as long as the
    input makes it quadratic in the input).

    Raises:
        ValueError: shapes that do not fit together, a chunk size that is not an integer >= 1,
            gates out of their ranges (theta < 0, eta or alpha outside [0, 1]; NaN gates are
            left to ``reject_nonfinite``; not checked when ``capturable``), ``max_grad_norm <= 0``,
            ``read`` not ``"token"`` or ``"chunk"``, ``capturable`` with ``reject_nonfinite``, or
            momentum factors whose deferred update does not fit them (rows or decay missing or
            misshapen).
    """
    if capturable and reject_nonfinite:
        raise ValueError("capturable=True cannot reject non-finite chunks: the check reads the state back to the host")
    if read not in ("token", "chunk"):
        raise ValueError(f"read must be 'token' or 'chunk', got {read!r}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    if max_grad_norm is not None and not max_grad_norm > 0:
        raise ValueError(f"max_grad_norm must be > 0 or None, got {max_grad_norm!r}")
    if k.ndim != 3 or v.shape != k.shape or (q is not None and q.shape != k.shape):
        raise ValueError(f"k, v (and q) must share one (N, n, e) shape, got {tuple(k.shape)}, {tuple(v.shape)}")
    n_layers = len(momentum.ys) if isinstance(momentum, MomentumFactors) else len(momentum)
    if isinstance(momentum, MomentumFactors):
        if len(momentum.acts) != n_layers:
            raise ValueError(f"momentum factors: {n_layers} ys but {len(momentum.acts)} acts; one of each per layer")
        _check_deferred(momentum)
    if len(weights) != n_layers or not weights:
        raise ValueError("weights and momentum must list the same, non-zero number of layers")
    n_seq, n_tok, e = k.shape
    n_in = e
    for li, w in enumerate(weights):
        if isinstance(momentum, MomentumFactors):
            y, a = momentum.ys[li], momentum.acts[li]
            fits = (
                w.ndim == 3 and y.ndim == a.ndim == 3 and y.shape[:2] == a.shape[:2] == (n_seq, momentum.ys[0].shape[1])
            )
            if not fits or y.shape[2] != w.shape[1] or a.shape[2] != w.shape[2]:
                raise ValueError(
                    f"layer {li}: momentum factors must be (N={n_seq}, c, out) and (N, c, in) for weights "
                    f"{tuple(w.shape)}, got {tuple(y.shape)} and {tuple(a.shape)}"
                )
            m_shape = w.shape
        else:
            m_shape = momentum[li].shape
        if w.ndim != 3 or w.shape[0] != n_seq or w.shape[2] != n_in or m_shape != w.shape:
            raise ValueError(
                f"layer {li}: weights and momentum must be (N={n_seq}, out, in={n_in}) and equal, "
                f"got {tuple(w.shape)} and {tuple(m_shape)}"
            )
        n_in = w.shape[1]
    if n_in != e:
        raise ValueError(f"the last layer must map back to the key width {e}, it gives {n_in}")
    per_channel = theta.ndim == 3
    if per_channel and len(weights) != 1:
        raise ValueError("per-channel gates need a matrix memory (one layer)")
    # NaN gates are not range errors: a non-finite chunk is the rejection's business. One host
    # read of five extremes (a stream of short calls pays this check on every call); a NaN among
    # them hides the others, and then every gate is looked at one by one.
    lows_highs = (
        torch.stack([theta.amin(), eta.amin(), alpha.amin(), eta.amax(), alpha.amax()]).tolist()
        if n_tok and not capturable
        else []
    )
    if lows_highs and (min(lows_highs[:3]) < 0 or max(lows_highs[3:]) > 1 or any(x != x for x in lows_highs)):
        for name, g, top in (("theta", theta, None), ("eta", eta, 1.0), ("alpha", alpha, 1.0)):
            if bool((g < 0).any()) or (top is not None and bool((g > top).any())):
                bounds = "[0, 1]" if top is not None else ">= 0"
                raise ValueError(
                    f"{name} must be {bounds} (eq. 13-14); got values from {float(g.min()):g} to {float(g.max()):g}"
                )
    want = (n_seq, n_tok, weights[0].shape[1]) if per_channel else (n_seq, n_tok)
    for g in (theta, eta, alpha):
        if g.shape != want:
            raise ValueError(f"gates must be (N, n) = {want[:2]} or, per channel, (N, n, out); got {tuple(g.shape)}")
    dtype = torch.float64 if k.dtype == torch.float64 else torch.float32
    with torch.autocast(device_type=k.device.type, enabled=False):
        cast = lambda t: t if t.dtype == dtype else t.to(dtype)  # noqa: E731
        ws = tuple(cast(w) for w in weights)
        ss: tuple[Tensor, ...] | MomentumFactors
        if isinstance(momentum, MomentumFactors) and all(t.dtype == dtype for t in momentum.tensors()):
            ss = momentum
        elif isinstance(momentum, MomentumFactors):
            ss = MomentumFactors(
                tuple(cast(y) for y in momentum.ys),
                tuple(cast(a) for a in momentum.acts),
                None if momentum.deferred is None else tuple(cast(x) for x in momentum.deferred),
                None if momentum.decay is None else cast(momentum.decay),
            )
        else:
            ss = tuple(cast(s) for s in momentum)
        k, v, theta, eta, alpha = cast(k), cast(v), cast(theta), cast(eta), cast(alpha)
        q = cast(q) if q is not None else None
        if per_channel:
            if isinstance(ss, MomentumFactors):
                ws, ss = ss.settle(ws), ss.dense()
            dense = ss
            return _scan_channels(
                ws[0],
                dense[0],
                k,
                v,
                theta,
                eta,
                alpha,
                q,
                chunk_size,
                max_grad_norm,
                reject_nonfinite,
                read == "chunk",
            )
        return _scan(
            ws,
            ss,
            k,
            v,
            theta,
            eta,
            alpha,
            q,
            chunk_size,
            activation,
            max_grad_norm,
            reject_nonfinite,
            read == "chunk",
            overwrite_state,
            keep_factors=keep_factors,
            capturable=capturable,
            defer_update=defer_update,
        )


def _check_deferred(factors: MomentumFactors) -> None:
    """A deferred update's rows and decay fit the factors (one ``(N, c, out_l)`` per layer, ``(N,)``)."""
    if (factors.deferred is None) != (factors.decay is None):
        raise ValueError("momentum factors: a deferred update needs both its rows and its decay")
    if factors.deferred is None or factors.decay is None:
        return
    rows_fit = len(factors.deferred) == len(factors.ys) and all(
        x.shape == y.shape for x, y in zip(factors.deferred, factors.ys)
    )
    if not rows_fit or factors.decay.shape != factors.ys[0].shape[:1]:
        raise ValueError(
            "momentum factors: the deferred update must give rows shaped like ys, per layer, and a decay (N,); "
            f"got {[tuple(x.shape) for x in factors.deferred]} and {tuple(factors.decay.shape)}"
        )


def _scan_channels(
    w: Tensor,
    s: Tensor,
    k: Tensor,
    v: Tensor,
    theta: Tensor,
    eta: Tensor,
    alpha: Tensor,
    q: Tensor | None,
    b: int,
    max_grad_norm: float | None,
    reject_nonfinite: bool = False,
    chunk_reads: bool = False,
) -> ScanResult:
    """The matrix memory with per-channel gates ``(N, n, e)``: row ``o`` of M and S follows the
    scalar recurrence with gates ``theta[..., o]``, ``eta[..., o]``, ``alpha[..., o]``."""
    n_seq, n_tok, _ = k.shape
    e_out = w.shape[1]
    reads: list[Tensor] = []
    surprises: list[Tensor] = []
    tail: tuple[Tensor, ...] | None = None
    rejected = torch.zeros(n_seq, dtype=torch.long, device=k.device)
    tail_ok = torch.ones(n_seq, dtype=torch.bool, device=k.device)

    def per_row(g: Tensor) -> Tensor:  # (N, c, e) -> (N * e, c)
        return g.transpose(1, 2).reshape(n_seq * e_out, g.shape[1])

    for s0 in range(0, n_tok, b):
        s1 = min(s0 + b, n_tok)
        c = s1 - s0
        kc, vc = k[:, s0:s1], v[:, s0:s1]
        err = kc @ w.transpose(-1, -2) - vc
        surprises.append((err * err).sum(-1) / ((vc * vc).sum(-1) + EPS))
        delta = 2.0 * err
        if max_grad_norm is not None:
            norm = torch.sqrt((delta * delta).sum(-1) * (kc * kc).sum(-1) + EPS)
            delta = delta * torch.clamp(max_grad_norm / norm, max=1.0).unsqueeze(-1)
        beta, f, big_g, m_b, n_b, g_b = chunk_coefficients(
            per_row(theta[:, s0:s1]), per_row(eta[:, s0:s1]), per_row(alpha[:, s0:s1])
        )
        beta, f = (t.view(n_seq, e_out, c).transpose(1, 2) for t in (beta, f))  # (N, c, e)
        big_g = big_g.view(n_seq, e_out, c, c)
        if q is not None and chunk_reads:
            reads.append(q[:, s0:s1] @ w.transpose(-1, -2))
        elif q is not None:
            r = q[:, s0:s1]
            dual = torch.einsum("nti,neti,nie->nte", r @ kc.transpose(-1, -2), big_g, delta)
            reads.append(beta * (r @ w.transpose(-1, -2)) + f * (r @ s.transpose(-1, -2)) - dual)
        g_b, n_b = (t.view(n_seq, e_out, c).transpose(1, 2) for t in (g_b, n_b))  # (N, c, e)
        beta_b, f_b = beta[:, -1, :, None], f[:, -1, :, None]
        new_w = beta_b * w + f_b * s - (delta * g_b).transpose(-1, -2) @ kc
        if c < b:
            tail = (new_w,)
            if reject_nonfinite:
                tail, tail_ok = keep_finite(tail, (w,))
                rejected = rejected + (~tail_ok).long()
            break
        new_s = m_b.view(n_seq, e_out, 1) * s - (delta * n_b).transpose(-1, -2) @ kc
        if reject_nonfinite:
            (new_w, new_s), ok = keep_finite((new_w, new_s), (w, s))
            rejected = rejected + (~ok).long()
        w, s = new_w, new_s
    return scan_result(k, q, reads, surprises, (w,), (s,), tail, rejected, tail_ok)


def _scan(
    ws: tuple[Tensor, ...],
    ss: tuple[Tensor, ...] | MomentumFactors,
    k: Tensor,
    v: Tensor,
    theta: Tensor,
    eta: Tensor,
    alpha: Tensor,
    q: Tensor | None,
    b: int,
    activation: str,
    max_grad_norm: float | None,
    reject_nonfinite: bool,
    chunk_reads: bool = False,
    overwrite_state: bool = False,
    _allow_inplace: bool = True,
    keep_factors: bool = False,
    capturable: bool = False,
    defer_update: bool = False,
) -> ScanResult:
    """The MLP memory with scalar gates ``(N, n)``, chunk by chunk through the phases of
    :class:`~titans_agent.core.scan_phases.MlpScan` (shapes and the path choices: that module)."""
    run = MlpScan(
        ws, ss, k, v, theta, eta, alpha, q, b, activation, max_grad_norm, reject_nonfinite, chunk_reads,
        overwrite_state, _allow_inplace, keep_factors, capturable, defer_update,
    )  # fmt: skip
    for s0 in range(0, k.shape[1], b):
        chunk = run.start(s0)
        run.forward(chunk)
        run.backward(chunk)
        run.read(chunk)
        if run.inplace and chunk.full:
            run.update_in_place(chunk)
        else:  # new tensors: autograd, rejection without the clamp, or the unfinished last chunk (the tail)
            run.update(chunk)
    result = run.finish()
    if result is None:  # an overflow the in-place checks did not show: redo, checking each chunk
        args = (ws, ss, k, v, theta, eta, alpha, q, b, activation, max_grad_norm, reject_nonfinite, chunk_reads)
        return _scan(*args, _allow_inplace=False, keep_factors=keep_factors)
    return result
