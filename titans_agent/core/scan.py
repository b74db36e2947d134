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
the state (see ``_flush_tiny`` for what that costs at extreme scales); the reads' three terms are
accumulated by the GEMMs themselves; without autograd (and, with ``reject_nonfinite``, when
``max_grad_norm`` bounds each step) the state is cloned once and updated in place, each chunk's
decay being its update GEMM's ``beta``; and there, after a chunk whose momentum decay
``m_b = prod eta`` flushed to 0 (eta around 0.5 over 64 tokens), the momentum ``S_b = -Y^T A`` is
kept as its rank-c factors: the next chunk reads ``f_t S_b r`` through two skinny GEMMs and skips
the momentum GEMM, and ``f_b S_b``, which the weights receive at the next chunk's end, is added one
chunk early in this chunk's own update GEMM (the weights held ahead, ``W + gamma S``, with skinny
corrections where the next chunk multiplies by them), so each weight update is one GEMM of c rows
(``_scan``).
``benchmarks/memory_speed.py`` measures it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from titans_agent.core.kernels import (
    _ACT_BACKWARD,
    _EPS,
    ScanResult,
    _all_finite_rows,
    _coefficients,
    _decayed_minus,
    _distinct_storage,
    _flush_tiny,
    _flush_tiny_,
    _grad_needed,
    _keep_finite,
    _materialize,
    _owned,
    _result,
    _stack_rows,
    _update_in_place,
    activation_fns,
    mlp_forward,
    segsum,
)

__all__ = ["ScanResult", "activation_fns", "memory_scan", "mlp_forward", "segsum"]


def memory_scan(
    weights: tuple[Tensor, ...],
    momentum: tuple[Tensor, ...],
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
) -> ScanResult:
    """Write ``n`` tokens into ``N`` independent memories and, optionally, read at every token.

    Chunks start at token 0 of ``k`` (the caller aligns them with global positions). The update is
    differentiable in every input (keys, values, queries, gates, initial weights), which is what
    meta-learning the outer parameters needs (docs/titans.md section 5, oracle 6).

    Args:
        weights: per layer ``(N, out, in)``: the memory at the start (a chunk boundary).
        momentum: the momentum S at the same point, same shapes.
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

    Returns:
        A :class:`ScanResult`.

    Precision: terms below 2^-60 in float32 are dropped to keep subnormal numbers out of the
    arithmetic; at ordinary scales (unit-norm keys, values of order 1) that is below float32's
    resolution, far outside them it is not (``_flush_tiny``). Use float64 inputs there.

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
            left to ``reject_nonfinite``), ``max_grad_norm <= 0``, or ``read`` not ``"token"`` or
            ``"chunk"``.
    """
    if read not in ("token", "chunk"):
        raise ValueError(f"read must be 'token' or 'chunk', got {read!r}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    if max_grad_norm is not None and not max_grad_norm > 0:
        raise ValueError(f"max_grad_norm must be > 0 or None, got {max_grad_norm!r}")
    if k.ndim != 3 or v.shape != k.shape or (q is not None and q.shape != k.shape):
        raise ValueError(f"k, v (and q) must share one (N, n, e) shape, got {tuple(k.shape)}, {tuple(v.shape)}")
    if len(weights) != len(momentum) or not weights:
        raise ValueError("weights and momentum must list the same, non-zero number of layers")
    n_seq, n_tok, e = k.shape
    n_in = e
    for li, (w, m) in enumerate(zip(weights, momentum)):
        if w.ndim != 3 or w.shape[0] != n_seq or w.shape[2] != n_in or m.shape != w.shape:
            raise ValueError(
                f"layer {li}: weights and momentum must be (N={n_seq}, out, in={n_in}) and equal, "
                f"got {tuple(w.shape)} and {tuple(m.shape)}"
            )
        n_in = w.shape[1]
    if n_in != e:
        raise ValueError(f"the last layer must map back to the key width {e}, it gives {n_in}")
    per_channel = theta.ndim == 3
    if per_channel and len(weights) != 1:
        raise ValueError("per-channel gates need a matrix memory (one layer)")
    if n_tok:  # NaN gates are not range errors: a non-finite chunk is the rejection's business
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
        cast = lambda t: t.to(dtype)  # noqa: E731
        ws = tuple(cast(w) for w in weights)
        ss = tuple(cast(s) for s in momentum)
        k, v, theta, eta, alpha = cast(k), cast(v), cast(theta), cast(eta), cast(alpha)
        q = cast(q) if q is not None else None
        if per_channel:
            return _scan_channels(
                ws[0], ss[0], k, v, theta, eta, alpha, q, chunk_size, max_grad_norm, reject_nonfinite, read == "chunk"
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
        surprises.append((err * err).sum(-1) / ((vc * vc).sum(-1) + _EPS))
        delta = 2.0 * err
        if max_grad_norm is not None:
            norm = torch.sqrt((delta * delta).sum(-1) * (kc * kc).sum(-1) + _EPS)
            delta = delta * torch.clamp(max_grad_norm / norm, max=1.0).unsqueeze(-1)
        beta, f, big_g, m_b, n_b, g_b = _coefficients(
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
                tail, tail_ok = _keep_finite(tail, (w,))
                rejected = rejected + (~tail_ok).long()
            break
        new_s = m_b.view(n_seq, e_out, 1) * s - (delta * n_b).transpose(-1, -2) @ kc
        if reject_nonfinite:
            (new_w, new_s), ok = _keep_finite((new_w, new_s), (w, s))
            rejected = rejected + (~ok).long()
        w, s = new_w, new_s
    return _result(k, q, reads, surprises, (w,), (s,), tail, rejected, tail_ok)


def _scan(
    ws: tuple[Tensor, ...],
    ss: tuple[Tensor, ...],
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
) -> ScanResult:
    args = (ws, ss, k, v, theta, eta, alpha, q, b, activation, max_grad_norm, reject_nonfinite, chunk_reads)
    act, _ = activation_fns(activation)
    act_backward = _ACT_BACKWARD[activation]
    n_layers = len(ws)
    residual = n_layers > 1
    n_seq, n_tok, _ = k.shape
    reads: list[Tensor] = []
    surprises: list[Tensor] = []
    rejected = torch.zeros(n_seq, dtype=torch.long, device=k.device)
    tail_ok = torch.ones(n_seq, dtype=torch.bool, device=k.device)
    tail: tuple[Tensor, ...] | None = None
    n_full = n_tok // b
    coeffs: tuple[Tensor, ...] = ()
    if n_full:
        flat = lambda t: t[:, : n_full * b].reshape(n_seq * n_full, b)  # noqa: E731
        coeffs = tuple(
            t.reshape(n_seq, n_full, *t.shape[1:]) for t in _coefficients(flat(theta), flat(eta), flat(alpha))
        )
    # Without autograd the state is updated in place in storage of its own: the decay folded into
    # each update GEMM as its scalar beta, no new matrices per chunk. Same arithmetic as the
    # functional path below, up to rounding. With reject_nonfinite this needs the gradient clamp
    # and a finite starting state: a chunk is then rejected when its update terms (errors,
    # activations, coefficients) are non-finite, checked on those small tensors before the update;
    # an overflow despite finite terms is caught by one check of the final state, and then the
    # whole call is run again on the functional path (which checks every chunk's new matrices).
    grad = _grad_needed(*ws, *ss, k, v, theta, eta, alpha, q)
    inplace = bool(n_full) and not grad and _allow_inplace
    if inplace and reject_nonfinite:
        inplace = max_grad_norm is not None and bool(_all_finite_rows([*ws, *ss]).all())
    ends: tuple[Tensor, ...] = ()  # beta_b, f_b, m_b per chunk, (N, chunks) each, on the in-place path
    floats: tuple[list[list[float]], ...] | None = None
    # Factored momentum (in-place path): after a chunk whose momentum decay m_b = prod eta flushed
    # to exactly 0 for every memory (eta = 0.5 over 64 tokens is 5e-20 < 2^-60), the momentum is
    # S = -Y^T A, rank c, with Y the chunk's errors times n_{i,b} and A the layer's inputs. It is
    # then kept as those factors: the next chunk's reads take f_t S r as -(f_t r A^T) Y (two skinny
    # GEMMs instead of one with the whole matrix), its weight update takes f_b S into its own GEMM
    # (2c rows, no pass over S), and the momentum GEMM of a chunk whose m_b is 0 again disappears.
    # The matrix is written back (one GEMM) where it is needed: a rejected chunk, an unfinished
    # chunk, a chunk with m_b > 0, and the end of the call. Same arithmetic up to rounding.
    factors: list[tuple[Tensor, Tensor]] | None = None  # per layer (Y (N, c, out), A (N, c, in))
    m_zero: list[bool] = []  # per full chunk: m_b == 0 for every memory
    s_owned: list[bool] = []  # per layer: ss[li] is this call's own storage (in-place path)
    if inplace:
        ends = (coeffs[0][:, :, -1], coeffs[1][:, :, -1], coeffs[3])
        m_zero = (ends[2] == 0).all(0).tolist()
        # Per-memory GEMMs pay off for a few memories of at least 64k entries on the CPU (measured:
        # the 384 x 1536 memory); many small ones, or a GPU, take one batched GEMM.
        if k.device.type == "cpu" and n_seq <= 16 and min(w[0].numel() for w in ws) >= 65536:
            floats = tuple(t.tolist() for t in ends)
        # Storage of its own for the state: a copy, or the inputs themselves when the caller gave
        # them up (not with reject_nonfinite: its fallback reruns the call from the inputs).
        reuse = overwrite_state and not reject_nonfinite and _distinct_storage([*ws, *ss])
        ws = tuple(_owned(w, reuse) for w in ws)
        # The momentum is copied only when first updated in place (a factored momentum is written
        # back into a fresh buffer, never read there first: a 64-token call copies no momentum).
        s_owned = [reuse and t.is_contiguous() for t in ss]

    def own_momentum(li: int, copy: bool) -> Tensor:
        """``ss[li]`` in storage of this call's own: a copy (``copy``) or a fresh buffer."""
        nonlocal ss
        if not s_owned[li]:
            t = ss[li]
            layout = torch.contiguous_format
            fresh = t.clone(memory_format=layout) if copy else torch.empty_like(t, memory_format=layout)
            ss = (*ss[:li], fresh, *ss[li + 1 :])
            s_owned[li] = True
        return ss[li]

    def write_back(fac: list[tuple[Tensor, Tensor]]) -> None:
        for li, f_l in enumerate(fac):
            _materialize(own_momentum(li, copy=False), f_l)

    # Lookahead (in-place path, factored momentum): the momentum S of a chunk whose m_b is 0 enters
    # the weights at the NEXT chunk's end as f_b S (eq. 13-14 unrolled); when that chunk is a full
    # one of this call, its share is added one chunk early, in the same rank-c GEMM as this chunk's
    # own update: ws then hold W~ = W + gamma S with gamma = f_b / beta_b of the next chunk, so that
    # the next update is beta_b W~ - x^T a (c rows instead of 2c). Products with W during that next
    # chunk take W~ plus the skinny correction gamma (r A'^T) Y' (its reads fold it into the
    # momentum's own term). Only where beta_b >= 1/16 (gamma stays small: W~ loses nothing).
    look: Tensor | None = None  # (N, 1, 1) gamma while ws hold W~ = W + gamma S, S = -Y'^T A'
    beta_ok: list[bool] = (ends[0] >= 0.0625).all(0).tolist() if inplace else []

    def fix_rows(li: int, rows: Tensor, out: Tensor) -> None:
        """``out = rows @ W~^T`` becomes ``rows @ W^T`` while the weights are held ahead."""
        if look is not None and factors is not None:
            fy, fa = factors[li]
            out.baddbmm_((rows @ fa.transpose(-1, -2)).mul_(look), fy)

    # Per-token quantities for the whole input at once: the loss target folded into the last
    # layer's GEMM (err = M(k) - v = W_L a + (k - v) with the residual), |v|^2 for the surprise,
    # |k|^2 for the gradient-norm clamp (k is layer 1's input).
    neg_target = (k - v) if residual else -v
    v_sq = torch.linalg.vecdot(v, v) + _EPS
    k_sq = torch.linalg.vecdot(k, k) if max_grad_norm is not None else None
    # Every full chunk's stacked GEMM inputs, built in one pass over the input instead of one small
    # cat per chunk: keys over queries (scaled by beta_t for token-level reads), and for chunk-start
    # reads through a residual MLP the last layer's addends (the loss target over the residual q).
    kq_all = tq_all = None
    if q is not None and n_full:
        split = lambda t: t[:, : n_full * b].reshape(n_seq, n_full, b, t.shape[-1])  # noqa: E731
        if chunk_reads:
            kq_all = torch.cat([split(k), split(q)], dim=2)
            tq_all = torch.cat([split(neg_target), split(q)], dim=2) if residual else None
        else:
            kq_all = torch.cat([split(k), split(q) * coeffs[0].unsqueeze(-1)], dim=2)
    for s0 in range(0, n_tok, b):
        s1 = min(s0 + b, n_tok)
        if factors is not None and s1 - s0 < b:  # the unfinished chunk reads and updates S itself
            write_back(factors)
            factors = None
        kc = k[:, s0:s1]
        # Forward at the chunk's starting weights, keeping each layer's input a_{l-1} and
        # pre-activation z_l, then the per-token back-propagated errors delta_l (closed form).
        acts, pres = [kc], []
        a = kc
        if s1 - s0 == b:  # precomputed for every full chunk at once (fewer small ops per chunk)
            beta, f, big_g, m_b, n_b, g_b = (t[:, s0 // b] for t in coeffs)
        else:
            beta, f, big_g, m_b, n_b, g_b = _coefficients(theta[:, s0:s1], eta[:, s0:s1], alpha[:, s0:s1])
        first_read = None
        err = neg_target[:, s0:s1]
        c = s1 - s0
        full = c == b  # a full chunk takes its stacked inputs from kq_all / tq_all
        if chunk_reads and q is not None:
            # Keys and queries share every forward GEMM (2c rows) at the chunk's starting weights;
            # the last layer's GEMM adds the loss target to the keys' rows and, through a residual
            # MLP, q to the queries' rows (a matrix memory adds the target after the GEMM).
            qc = q[:, s0:s1]
            a = kq_all[:, s0 // b] if full and kq_all is not None else torch.cat([kc, qc], dim=1)
            for li, w in enumerate(ws):
                if li == n_layers - 1:
                    if residual:
                        addend = tq_all[:, s0 // b] if full and tq_all is not None else torch.cat([err, qc], dim=1)
                        both = torch.baddbmm(addend, a, w.transpose(-1, -2))
                        fix_rows(li, a, both)
                        err, first_read = both[:, :c], both[:, c:]
                    else:
                        both = a @ w.transpose(-1, -2)
                        fix_rows(li, a, both)
                        err, first_read = both[:, :c] + err, both[:, c:]
                else:
                    z = a @ w.transpose(-1, -2)
                    fix_rows(li, a, z)
                    pres.append(z[:, :c])
                    a = act(z)
                    acts.append(a[:, :c])
        else:
            for li, w in enumerate(ws):
                if li == 0 and q is not None:  # the key's forward and the read's W0 product: one GEMM
                    if full and kq_all is not None:
                        stacked = kq_all[:, s0 // b]
                    else:
                        stacked = torch.cat([kc, q[:, s0:s1] * beta.unsqueeze(-1)], dim=1)
                    both = stacked @ w.transpose(-1, -2)
                    z, first_read = both[:, :c], both[:, c:]
                    fix_rows(li, kc, z)  # the keys' rows; the reads' rows are fixed with the reads
                    if li == n_layers - 1:
                        err = z + err
                elif li == n_layers - 1:
                    err = torch.baddbmm(err, a, w.transpose(-1, -2))
                    fix_rows(li, a, err)
                else:
                    z = a @ w.transpose(-1, -2)
                    fix_rows(li, a, z)
                if li < n_layers - 1:
                    pres.append(z)
                    a = act(z)
                    acts.append(a)
        surprises.append(torch.linalg.vecdot(err, err))  # divided by |v|^2 after the loop
        # deltas[l] are the errors back-propagated to layer l WITHOUT the loss's factor 2 and the
        # clamp: both are the per-token factor ``tok``, folded into the (c,)-sized coefficients.
        deltas: list[Tensor] = [err] * n_layers
        g = err
        for li in range(n_layers - 1, 0, -1):
            gw = g @ ws[li]
            if look is not None and factors is not None:  # g W = g W~ + gamma (g Y'^T) A'
                fy, fa = factors[li]
                gw.baddbmm_((g @ fy.transpose(-1, -2)).mul_(look), fa)
            g = _flush_tiny(act_backward(gw, pres[li - 1]))  # subnormal tails to 0
            deltas[li - 1] = g
        if max_grad_norm is not None:
            assert k_sq is not None
            sq = k_sq[:, s0:s1] * torch.linalg.vecdot(deltas[0], deltas[0])
            for dl, al in zip(deltas[1:], acts[1:]):
                sq = sq + torch.linalg.vecdot(dl, dl) * torch.linalg.vecdot(al, al)
            tok = 2.0 * torch.clamp(max_grad_norm / (2.0 * torch.sqrt(sq + _EPS)), max=1.0)
        else:
            tok = torch.full_like(beta, 2.0)
        g_b, n_b = g_b * tok, n_b * tok
        if q is not None and chunk_reads:
            assert first_read is not None
            reads.append(first_read)
        elif q is not None:
            big_g = big_g * tok.unsqueeze(-2)
            r = q[:, s0:s1]
            # the momentum term's row scale: f_t, or f_t - beta_t gamma with the weights held ahead
            f_coef = f.unsqueeze(-1) if look is None else f.unsqueeze(-1) - beta.unsqueeze(-1) * look
            for li in range(n_layers):
                # beta_t W0 r + f_t S0 r - sum_i G_ti (a_i . r) delta_i, the row scales applied to
                # the GEMMs' (c, in) inputs and the three terms accumulated by the GEMMs in place
                # (no backward formula needs a GEMM's output).
                dual = _flush_tiny((r @ acts[li].transpose(-1, -2)) * big_g)
                if li == 0:  # a view of the forward's GEMM output, which gelu's backward keeps
                    assert first_read is not None
                    z = (
                        first_read.baddbmm(dual, deltas[li], alpha=-1.0)
                        if grad
                        else first_read.baddbmm_(dual, deltas[li], alpha=-1.0)
                    )
                else:  # the last layer of a residual MLP starts from q (the residual)
                    rb, w_t = r * beta.unsqueeze(-1), ws[li].transpose(-1, -2)
                    z = torch.baddbmm(q[:, s0:s1], rb, w_t) if residual and li == n_layers - 1 else torch.bmm(rb, w_t)
                    z = z.baddbmm_(dual, deltas[li], alpha=-1.0)
                if factors is None:
                    z = z.baddbmm_(r * f.unsqueeze(-1), ss[li].transpose(-1, -2))
                else:  # f_t S_0 r with S_0 = -Y^T A: the (c, c) scores scaled by f_t
                    fy, fa = factors[li]  # (held ahead: beta_t W~ r + (f_t - beta_t gamma) S_0 r)
                    z = z.baddbmm_((r @ fa.transpose(-1, -2)).mul_(f_coef), fy, alpha=-1.0)
                r = act(z) if li < n_layers - 1 else z
            reads.append(r)
        if inplace and s1 - s0 == b:
            ci = s0 // b
            # With a factored momentum each weight update takes 2c rows [f_b Y'; x]: x is written
            # straight into the lower half of that buffer (no concatenation per chunk).
            stack = factors is not None and look is None  # f_b S joins this update's rows
            xbufs = [dl.new_empty(n_seq, 2 * c, dl.shape[-1]) for dl in deltas] if stack else None
            xs = [
                _flush_tiny(dl * g_b.unsqueeze(-1))
                if xbufs is None
                else _flush_tiny_(torch.mul(dl, g_b.unsqueeze(-1), out=xbufs[li][:, c:]))
                for li, dl in enumerate(deltas)
            ]
            ys = [_flush_tiny(dl * n_b.unsqueeze(-1)) for dl in deltas]
            keep = None
            if reject_nonfinite:
                ok = _all_finite_rows([*xs, *ys, *acts[1:], torch.stack([t[:, ci] for t in ends], dim=-1)])
                if not bool(ok.all()):
                    rejected = rejected + (~ok).long()
                    keep = ok.tolist()
            if keep is not None and factors is not None:  # a rejected memory keeps its S: as a matrix
                if look is not None:  # and every memory its W (undo the lookahead)
                    for li, (fy, fa) in enumerate(factors):
                        ws[li].baddbmm_((fy * look).transpose(-1, -2), fa)
                    look = None
                write_back(factors)
                factors = None
            s_factored = keep is None and m_zero[ci]
            fold = s_factored and ci + 1 < n_full and beta_ok[ci + 1]
            gamma = (ends[1][:, ci + 1] / ends[0][:, ci + 1])[:, None, None] if fold else None
            for li in range(n_layers):
                x_l, y_l, a_l = xs[li], ys[li], acts[li]
                if gamma is not None:  # the next chunk's f_b S, one chunk early (the same rows a)
                    x_l = x_l.addcmul_(y_l, gamma)
                if factors is None:
                    s_l = ss[li] if s_factored else own_momentum(li, copy=True)
                    _update_in_place(ws[li], s_l, x_l, y_l, a_l, ends, ci, floats, keep, False, s_factored)
                    continue
                # S_0 = -Y'^T A' is not in ss: the new momentum (unless factored again) is
                # m_b S_0 - y^T a = -[m_b Y'; y]^T [A'; a], written without reading ss
                py, pa = factors[li]
                a_two = _stack_rows(pa, a_l) if xbufs is not None or not s_factored else a_l
                if not s_factored:
                    y_l = torch.cat([py * ends[2][:, ci, None, None], y_l], dim=1)
                s_l = ss[li] if s_factored else own_momentum(li, copy=False)
                if xbufs is not None:  # f_b S_0 joins this update's rows: [f_b Y'; x] over [A'; a]
                    _flush_tiny_(torch.mul(py, ends[1][:, ci, None, None], out=xbufs[li][:, :c]))
                    _update_in_place(ws[li], s_l, xbufs[li], y_l, a_two, ends, ci, floats, keep, True, s_factored)
                else:  # the weights held ahead already hold f_b S_0: x over a, then y over [A'; a]
                    _update_in_place(ws[li], s_l, x_l, y_l, a_l, ends, ci, floats, None, True, True)
                    if not s_factored:
                        _materialize(s_l, (y_l, a_two))
            factors = list(zip(ys, acts)) if s_factored else None
            look = gamma
            continue
        # The memory after the chunk's last token: M_b = beta_b M_0 + f_b S_0 - sum_i G_{b,i} u_i.
        beta_b, f_b = beta[:, -1, None, None], f[:, -1, None, None]
        new_w = tuple(
            _decayed_minus(w, beta_b, s, f_b, _flush_tiny(dl * g_b.unsqueeze(-1)), al)
            for w, s, dl, al in zip(ws, ss, deltas, acts)
        )
        if s1 - s0 < b:  # unfinished chunk: its effect is the tail; the state stays at its start
            if reject_nonfinite:
                new_w, tail_ok = _keep_finite(new_w, ws)
                rejected = rejected + (~tail_ok).long()
            tail = new_w
            break
        new_s = tuple(
            _decayed_minus(s, m_b[:, None, None], None, None, _flush_tiny(dl * n_b.unsqueeze(-1)), al)
            for s, dl, al in zip(ss, deltas, acts)
        )
        if reject_nonfinite:
            kept, ok = _keep_finite((*new_w, *new_s), (*ws, *ss))
            new_w, new_s = kept[: len(ws)], kept[len(ws) :]
            rejected = rejected + (~ok).long()
        ws, ss = new_w, new_s
    if factors is not None:
        write_back(factors)
    if inplace and reject_nonfinite and not bool(_all_finite_rows([*ws, *ss]).all()):
        return _scan(*args, _allow_inplace=False)  # an overflow the terms did not show: redo, checking each chunk
    if surprises:
        surprises = [torch.cat(surprises, dim=1) / v_sq]
    return _result(k, q, reads, surprises, ws, ss, tail, rejected, tail_ok)
