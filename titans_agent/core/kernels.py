"""The chunk step's building blocks for :mod:`titans_agent.core.scan`: segment sums, activations
and their derivatives, the chunk's decay and momentum coefficients, flushing of tiny values, the
per-memory finiteness checks, and the state updates (fresh tensors or in place).

Formulas: Behrouz et al. 2024, eq. 12-14 and section 3.2; docs/titans.md section 2. Every function
here is pure tensor code (no per-call state). The names in ``__all__`` are the API of ``core/``'s
scan (:mod:`titans_agent.core.scan`, :mod:`titans_agent.core.scan_phases`); outside ``core/`` only
:func:`segsum`, :func:`activation_fns`, :func:`mlp_forward` and :class:`ScanResult` are meant to be
used, through :mod:`titans_agent.core.scan`, which re-exports them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "EPS",
    "MomentumFactors",
    "ScanResult",
    "activation_backward",
    "activation_fns",
    "all_finite_rows",
    "chunk_coefficients",
    "compact",
    "decayed_minus",
    "distinct_storage",
    "flush_tiny",
    "flush_tiny_",
    "grad_needed",
    "joined",
    "keep_finite",
    "materialize",
    "minus_product_",
    "mlp_forward",
    "opening_rows",
    "owned",
    "owned_minus",
    "per_memory_gemms",
    "scan_result",
    "segsum",
    "stack_rows",
    "update_in_place",
]

EPS = 1e-12  # added to squared norms before a division or a square root
# Coefficients below these are set to exactly 0 (see flush_tiny): 2^-60 in float32, 2^-500 in float64.
_TINY = {torch.float32: 2.0**-60, torch.float64: 2.0**-500}


def segsum(x: Tensor) -> Tensor:
    """Segment sums ``S[..., t, i] = sum_{j=i+1..t} x[..., j]`` for ``i <= t``, ``-inf`` above.

    Args:
        x: ``(..., c)`` logs of per-token factors (``-inf`` allowed for a factor 0).

    Returns:
        ``(..., c, c)``; ``exp`` of it is the lower-triangular matrix of products
        ``prod_{j=i+1..t} exp(x_j)`` (1 on the diagonal, exact 0 above).
    """
    c = x.shape[-1]
    # While a CUDA graph is being captured the masks are made inside it: a cached mask is not kept
    # alive by the graph (evicted and freed, replays would read reused memory), and one first made
    # during a capture would hold nothing until the first replay.
    capturing = x.device.type == "cuda" and torch.cuda.is_current_stream_capturing()
    not_strict, above = _triangles.__wrapped__(c, x.device) if capturing else _triangles(c, x.device)
    terms = x.unsqueeze(-1).expand(*x.shape, c).masked_fill(not_strict, 0.0)  # [..., j, i] = x_j, j > i
    return torch.cumsum(terms, dim=-2).masked_fill_(above, -math.inf)


@functools.lru_cache(maxsize=32)
def _triangles(c: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """``(c, c)`` boolean masks, made once per size and device (a short call of the scan spends
    its time in such small ops): True on and above the diagonal, and True above it."""
    ones = torch.ones(c, c, dtype=torch.bool, device=device)
    return ~ones.tril(-1), ~ones.tril()


def _gelu_grad(z: Tensor) -> Tensor:
    return flush_tiny(torch.ops.aten.gelu_backward(torch.ones_like(z), z))


def _silu_grad(z: Tensor) -> Tensor:
    return flush_tiny(torch.ops.aten.silu_backward(torch.ones_like(z), z))


# grad * act'(z) in one fused kernel (autograd has their derivatives: gradcheck passes through
# them). A composed erf/exp formula took 13x longer on AVX-512 (exp's underflow path in the tails).
_ACT_BACKWARD: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "gelu": lambda g, z: torch.ops.aten.gelu_backward(g, z),
    "silu": lambda g, z: torch.ops.aten.silu_backward(g, z),
}


def activation_fns(name: str) -> tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]:
    """The memory MLP's non-linearity and its derivative: ``"gelu"`` (exact, erf) or ``"silu"``.

    Raises:
        ValueError: an unknown name.
    """
    if name == "gelu":
        return F.gelu, _gelu_grad
    if name == "silu":
        return F.silu, _silu_grad
    raise ValueError(f"unknown activation {name!r}; expected 'gelu' or 'silu'")


def activation_backward(name: str) -> Callable[[Tensor, Tensor], Tensor]:
    """``(g, z) -> g * act'(z)`` for the non-linearity ``name``, in one fused kernel (not flushed).

    Raises:
        ValueError: an unknown name.
    """
    if name not in _ACT_BACKWARD:
        raise ValueError(f"unknown activation {name!r}; expected 'gelu' or 'silu'")
    return _ACT_BACKWARD[name]


def mlp_forward(weights: tuple[Tensor, ...], x: Tensor, activation: str = "gelu") -> Tensor:
    """``M(x)`` for fixed inner weights: a read with no update (eq. 15).

    Args:
        weights: per layer ``(N, out, in)`` (``N`` = sequences x heads) or ``(out, in)``.
        x: ``(N, n, e)`` (or ``(n, e)`` with 2-D weights).

    Returns:
        Same shape as ``x``; the residual ``+ x`` is included when there are two or more layers.
    """
    act, _ = activation_fns(activation)
    a = x
    for i, w in enumerate(weights):
        a = a @ w.transpose(-1, -2)
        if i < len(weights) - 1:
            a = act(a)
    return a + x if len(weights) > 1 else a


@dataclass(frozen=True)
class MomentumFactors:
    """A momentum held as its rank-c factors, per memory layer ``S_l = -Y_l^T A_l``; and, optionally,
    the weights' last update still to be applied (deferred).

    After a chunk whose momentum decay ``m_b = prod eta`` flushed to 0 for every memory, the
    momentum is exactly the chunk's own update, ``S_b = -sum_i n_{i,b} u_i`` (eq. 13 unrolled), a
    sum of c outer products: ``Y_l`` are the chunk's back-propagated errors times ``n_{i,b}`` and
    ``A_l`` the layer's inputs. Carried from one call of the scan to the next (``keep_factors``), the
    next call reads ``f_t S r`` through two skinny GEMMs and never writes the matrix.

    Deferred update (``deferred``, ``decay``): the weights' update of that same chunk,
    ``W <- decay W - X^T A`` (``X_l`` the errors times ``G_{b,i}``, over the same ``A_l``), not yet
    applied to the weights carried beside these factors (:attr:`ScanResult.next_weights`). The next
    call applies it together with its first chunk's share of the momentum, ``f_b S``, in one GEMM of
    c rows, as one call does between its own chunks (a 64-token call otherwise updates with 2c rows).
    Such factors belong to those weights only: :meth:`settle` gives the memory itself.

    Factors whose row count is not the next call's chunk size are turned into matrices there (and a
    deferred update applied first). Held only in memory; nothing persists this form.

    Attributes:
        ys: per layer ``(N, c, out_l)``.
        acts: per layer ``(N, c, in_l)``.
        deferred: None, or per layer ``(N, c, out_l)``: the rows ``X_l`` of the weights' deferred update.
        decay: None, or ``(N,)``: that update's forgetting decay ``beta_b`` (eq. 14 over the chunk).
    """

    ys: tuple[Tensor, ...]
    acts: tuple[Tensor, ...]
    deferred: tuple[Tensor, ...] | None = None
    decay: Tensor | None = None

    def dense(self) -> tuple[Tensor, ...]:
        """The momentum as matrices, per layer ``(N, out_l, in_l)`` (one GEMM each; in the
        factors' precision, whatever autocast the caller is in)."""
        with torch.autocast(device_type=self.ys[0].device.type, enabled=False):
            return tuple(-(y.transpose(-1, -2) @ a) for y, a in zip(self.ys, self.acts))

    def settle(self, weights: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """The memory: ``weights`` (the ones carried beside these factors) with the deferred update
        applied, as new tensors (the inputs are not modified; in their precision, whatever autocast
        the caller is in); ``weights`` itself when none is."""
        if self.deferred is None or self.decay is None:
            return weights
        with torch.autocast(device_type=self.decay.device.type, enabled=False):
            return tuple(owned_minus(w, x, a, self.decay, False) for w, x, a in zip(weights, self.deferred, self.acts))

    def momentum_only(self) -> MomentumFactors:
        """These factors without the deferred update (for weights that already hold it)."""
        return self if self.deferred is None else MomentumFactors(self.ys, self.acts)

    def tensors(self) -> tuple[Tensor, ...]:
        """Every tensor it holds (for byte counts and finiteness checks)."""
        rest = () if self.deferred is None or self.decay is None else (*self.deferred, self.decay)
        return (*self.ys, *self.acts, *rest)


@dataclass(frozen=True)
class ScanResult:
    """What :func:`memory_scan` returns (``N`` = sequences x heads, ``n`` tokens).

    Attributes:
        reads: ``(N, n, e)`` the read of each query with the memory as of its own token, or None
            when no queries were given.
        next_weights: per layer ``(N, out, in)``: the weights the next call continues from, beside
            :attr:`momentum_factors`; the memory itself (:attr:`weights`) unless those factors
            carry a deferred update.
        momentum: the momentum S at the same point, same shapes.
        surprise: ``(N, n)`` relative loss ``||M(k_t) - v_t||^2 / ||v_t||^2`` under the weights the
            token's gradient was taken at (its chunk's start): the momentary surprise (eq. 12).
        tail_weights: when ``n`` is not a multiple of the chunk size, the weights as of the last
            token (the unfinished chunk's effect), else None.
        rejected: ``(N,)`` chunks whose update was non-finite and skipped (only counted when
            ``reject_nonfinite``; zeros otherwise), the unfinished chunk included.
        tail_ok: ``(N,)`` False where the unfinished chunk's update was non-finite (then
            ``tail_weights`` are the weights before it); all True when there is no such chunk.
        momentum_factors: only with ``keep_factors``: the momentum as its factors when the call
            ended with it factored, maybe with the weights' last update deferred
            (:class:`MomentumFactors`); ``momentum`` is then the empty tuple (``.dense()`` gives it).
    """

    reads: Tensor | None
    next_weights: tuple[Tensor, ...]
    momentum: tuple[Tensor, ...]
    surprise: Tensor
    tail_weights: tuple[Tensor, ...] | None
    rejected: Tensor
    tail_ok: Tensor
    momentum_factors: MomentumFactors | None = None

    @functools.cached_property
    def weights(self) -> tuple[Tensor, ...]:
        """Per layer ``(N, out, in)``: the memory after the last COMPLETE chunk (where the next
        call's chunk starts); with a deferred update, new tensors that apply it (one GEMM of c rows
        per layer, made on first access from :attr:`next_weights`). A call given :attr:`next_state`
        with ``overwrite_state`` writes those weights: read this before (without a deferred update
        it is those very tensors: clone them to keep them)."""
        if self.momentum_factors is None:
            return self.next_weights
        return self.momentum_factors.settle(self.next_weights)

    @property
    def next_momentum(self) -> tuple[Tensor, ...] | MomentumFactors:
        """What the next call's ``momentum`` argument takes beside :attr:`weights`: the factors
        (without a deferred update) when the call kept them, else the matrices."""
        return self.momentum if self.momentum_factors is None else self.momentum_factors.momentum_only()

    @property
    def next_state(self) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...] | MomentumFactors]:
        """``(weights, momentum)`` for the next call, the fastest form: :attr:`next_weights` and the
        factors with the deferred update, if any (a stream of short calls; no GEMM here). A pair:
        :attr:`weights` with these factors would apply the deferred update twice."""
        return self.next_weights, self.momentum if self.momentum_factors is None else self.momentum_factors


def flush_tiny(t: Tensor) -> Tensor:
    """``t`` with entries of magnitude below ``_TINY`` (2^-60 in float32) set to exactly 0.

    Products of gates over many tokens (``eta^63`` at ``eta = 0.05`` is 1e-82) pass through the
    subnormal range (below 1.2e-38 in float32) on their way to 0, and a coefficient of 1e-30 times
    a gradient of 1e-9 is subnormal too. CPUs do arithmetic on subnormals in microcode, tens of
    times slower: with the models' starting momentum decay of 0.05, a 4,096-token scan ran 4x
    slower on a Sapphire Rapids core. 2^-60 is about the smallest bound whose pairwise products stay
    normal (2^-120 > 1.2e-38). Gradients through a zeroed entry are 0.

    The bound is absolute, so what it drops is below float32's resolution only at ordinary scales
    (unit-norm keys, values of order 1, weights above ~1e-12; every caller in this package works
    there). Far outside them whole updates vanish: with values of ~1e-12 and theta 1e-8, or keys
    of norm 1e10, float32 learns nothing (it did before this flush), and a deep
    memory whose weights decayed below ~1e-21 no longer gets gradients to its inner layers. A
    float64 scan keeps everything above 2^-500.
    """
    tiny = _TINY.get(t.dtype)
    return t if tiny is None else F.hardshrink(t, tiny)  # one fused pass; NaN and inf pass through


def flush_tiny_(t: Tensor) -> Tensor:
    """:func:`flush_tiny` in place (``t`` is returned)."""
    tiny = _TINY.get(t.dtype)
    return t if tiny is None else torch.ops.aten.hardshrink.out(t, tiny, out=t)


def chunk_coefficients(
    theta: Tensor, eta: Tensor, alpha: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Per-chunk coefficients from gates ``(N, c)``: ``beta (N, c)``, ``f (N, c)``, ``G (N, c, c)``,
    and for the chunk's end ``m_b (N,)``, ``n_b (N, c)``, ``G_b (N, c)`` (docs/titans.md section 2),
    each flushed (:func:`flush_tiny`). ``N`` may be memories times chunks (all full chunks at once)."""
    n = theta.shape[0]
    # both cumulative products at once: forgetting (1 - alpha) in rows :n, momentum (eta) below
    logs = F.pad(torch.cat([torch.log1p(-alpha), torch.log(eta)]), (1, 0))  # (2N, c+1), a 0 in front
    prods = torch.exp(segsum(logs))  # (2N, c+1, c+1)
    decay = prods[:n, 1:, 1:]  # beta_t / beta_k, k <= t
    mom = prods[n:, 1:]  # column 0: prod_{j<=t} eta_j; column i + 1: prod_{j=i+1..t} eta_j, i <= t
    both = decay @ mom  # column 0: f; the others: G before theta
    big_g = flush_tiny(both[..., 1:] * theta.unsqueeze(-2))  # G[t, i], zero above the diagonal
    f = flush_tiny(both[..., 0])
    cum = flush_tiny(prods[:, 1:, 0])  # prod_{j<=t} (1 - alpha_j) in rows :n, prod_{j<=t} eta_j below
    return cum[:n], f, big_g, cum[n:, -1], flush_tiny(theta * mom[:, -1, 1:]), big_g[:, -1, :]


def all_finite_rows(tensors: list[Tensor]) -> Tensor:
    """``(N,)`` True where every tensor's row n is finite.

    A row's sum is non-finite when the row is, and is the fastest reduction (measured on the CPU:
    a 384 x 768 matrix 28 us; amax + amin 55 us; aminmax 525 us; isfinite().all() 806 us); but a
    sum of large finite values can overflow, so a row whose sum is not finite is looked at again
    with max and min (NaN and inf propagate through them). On an accelerator max and min are
    computed directly (no host synchronisation per check).
    """
    ok = torch.ones(tensors[0].shape[0], dtype=torch.bool, device=tensors[0].device)
    for t in tensors:
        flat = t.reshape(t.shape[0], -1)
        if flat.device.type == "cpu":
            row = torch.isfinite(flat.sum(-1))
            if bool(row.all()):
                ok = ok & row
                continue
        ok = ok & torch.isfinite(flat.amax(-1)) & torch.isfinite(flat.amin(-1))
    return ok


def keep_finite(new: tuple[Tensor, ...], old: tuple[Tensor, ...]) -> tuple[tuple[Tensor, ...], Tensor]:
    """Per memory, ``new`` where all of it is finite, else ``old``; and the ``(N,)`` finite mask."""
    ok = all_finite_rows(list(new))
    return tuple(torch.where(ok[:, None, None], n, o) for n, o in zip(new, old)), ok


def scan_result(
    k: Tensor,
    q: Tensor | None,
    reads: list[Tensor],
    surprises: list[Tensor],
    weights: tuple[Tensor, ...],
    momentum: tuple[Tensor, ...],
    tail: tuple[Tensor, ...] | None,
    rejected: Tensor,
    tail_ok: Tensor,
    factors: MomentumFactors | None = None,
) -> ScanResult:
    """The :class:`ScanResult` of a call: the per-chunk ``reads`` ``(N, c, e)`` and ``surprises``
    ``(N, c)`` concatenated over the chunks (zeros of the right shape when there were none), the
    state after the last full chunk (the momentum as ``factors`` when given), the unfinished
    chunk's weights and the rejection counts."""
    return ScanResult(
        reads=(joined(reads) if reads else k.new_zeros(k.shape)) if q is not None else None,
        next_weights=weights,
        momentum=momentum,
        surprise=joined(surprises) if surprises else k.new_zeros(k.shape[0], 0),
        tail_weights=tail,
        rejected=rejected,
        tail_ok=tail_ok,
        momentum_factors=factors,
    )


def joined(parts: list[Tensor]) -> Tensor:
    """The chunks' tensors along the token axis (one chunk: itself, no copy)."""
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def decayed_minus(w: Tensor, c_w: Tensor, s: Tensor | None, c_s: Tensor | None, x: Tensor, a: Tensor) -> Tensor:
    """``c_w * w + c_s * s - x^T a`` as a fresh tensor, with as few passes over the ``(N, out, in)``
    matrices as torch allows (in-place accumulation into the new tensor; autograd-safe, since no
    backward formula needs the overwritten values)."""
    out = torch.mul(w, c_w)
    if s is not None and c_s is not None:
        out.addcmul_(s, c_s)
    return out.baddbmm_(x.transpose(-1, -2), a, alpha=-1.0)


def distinct_storage(tensors: list[Tensor]) -> bool:
    """True when no two tensors share storage (then updating one in place cannot change another)."""
    ptrs = [t.untyped_storage().data_ptr() for t in tensors]
    return len(set(ptrs)) == len(ptrs)


def owned(t: Tensor, reuse: bool) -> Tensor:
    """``t`` in row-major storage that the in-place path may overwrite: ``t`` itself when
    ``reuse`` (the caller gave it up) and it is contiguous, else a copy."""
    return t if reuse and t.is_contiguous() else t.clone(memory_format=torch.contiguous_format)


def per_memory_gemms(ws: tuple[Tensor, ...]) -> bool:
    """One GEMM per memory, its decays read to the host as Python floats, rather than one batched
    GEMM with decays as tensors: for a few memories of at least 64k entries on the CPU (measured:
    the 384 x 1536 memory); many small ones, or a GPU, take one batched GEMM."""
    return ws[0].device.type == "cpu" and ws[0].shape[0] <= 16 and min(w[0].numel() for w in ws) >= 65536


def minus_product_(c: Tensor, xt: Tensor, a: Tensor, beta: float = 1.0) -> Tensor:
    """``c <- beta c - xt a`` in place (``(out, in)`` with ``addmm_``, ``(N, out, in)`` with
    ``baddbmm_``), the scaling a pass of its own and the GEMM's ``beta`` left at 1: MKL's GEMM with
    any other ``beta``, 0 included, took 1.28x as long at the memory's ``(384, 1536)`` shape on an
    AMD EPYC (518 against 404 us with the pass, c = 64 rows; 417 against 410 us at
    ``(1536, 384)``). A ``beta`` of 0 does not read ``c`` (a NaN there is not kept), as in BLAS."""
    if beta == 0.0:
        c.zero_()
    elif beta != 1.0:
        c.mul_(beta)
    return c.addmm_(xt, a, alpha=-1.0) if c.ndim == 2 else c.baddbmm_(xt, a, alpha=-1.0)


def owned_minus(w: Tensor, x: Tensor, a: Tensor, decay: Tensor | None, reuse: bool) -> Tensor:
    """``decay w - x^T a`` in row-major storage the in-place path may overwrite: in ``w`` when
    ``reuse`` (as :func:`owned`), else a new tensor (with a decay, its pass writes it, no copy
    first; without, a copy).

    ``w``: ``(N, out, in)``; ``x``: ``(N, c, out)``; ``a``: ``(N, c, in)``; ``decay``: ``(N,)`` or
    None (1)."""
    if reuse and w.is_contiguous():
        out = w if decay is None else w.mul_(decay[:, None, None])
    else:
        layout = torch.contiguous_format
        out = w.clone(memory_format=layout) if decay is None else torch.mul(w, decay[:, None, None]).contiguous()
    return minus_product_(out, x.transpose(-1, -2), a)


def opening_rows(ys: list[Tensor], deferred: tuple[Tensor, ...] | None, gamma: Tensor | None) -> list[Tensor]:
    """Per layer the rows ``x + gamma Y`` ``(N, c, out_l)`` of the update that opens a call: a
    deferred update's rows ``x`` (None: none) and the first chunk's momentum share one chunk early,
    ``gamma Y`` (``gamma`` ``(N, 1, 1)``; None: none); not both None. New tensors."""
    if gamma is None:
        assert deferred is not None
        return list(deferred)
    if deferred is None:
        return [y * gamma for y in ys]
    return [torch.addcmul(x, y, gamma) for x, y in zip(deferred, ys)]


def compact(t: Tensor, keys: Tensor | None = None) -> Tensor:
    """``t``, or a copy of it when it is a view into much more (a long call's keys: a carried
    factor must not keep the call's whole input alive) or shares storage with ``keys`` (the
    caller's tensor: a caller refilling one buffer between calls would change the state it carries)."""
    shared = keys is not None and t.untyped_storage().data_ptr() == keys.untyped_storage().data_ptr()
    return t.clone() if shared or t.untyped_storage().nbytes() > 2 * t.numel() * t.element_size() else t


def grad_needed(*tensors: Tensor | None) -> bool:
    """True when any input needs derivatives: reverse mode (``requires_grad`` with grad enabled),
    forward mode (a dual tensor's tangent) or a ``torch.func`` transform (a wrapped tensor). The
    in-place path turns coefficients into Python floats, which would drop them."""
    present = [t for t in tensors if t is not None]
    if torch.is_grad_enabled() and any(t.requires_grad for t in present):
        return True
    dual_level = fwAD._current_level >= 0  # a forward-mode level is open: look for tangents
    return any(
        torch._C._functorch.is_functorch_wrapped_tensor(t) or (dual_level and fwAD.unpack_dual(t).tangent is not None)
        for t in present
    )


def update_in_place(
    w: Tensor,
    s: Tensor,
    x: Tensor,
    y: Tensor,
    a: Tensor,
    ends: tuple[Tensor, ...],
    ci: int,
    floats: tuple[list[list[float]], ...] | None,
    keep: list[bool] | None = None,
    s_stale: bool = False,
    s_factored: bool = False,
) -> None:
    """``W <- beta_b W + f_b S - x^T a`` then ``S <- m_b S - y^T a``, in place.

    ``w``, ``s``: ``(N, out, in)``; ``x``, ``y``: ``(N, c, out)`` (the errors times ``G_{b,i}``
    and ``n_{i,b}``); ``a``: ``(N, c, in)``; ``ends``: ``beta_b``, ``f_b``, ``m_b`` as
    ``(N, chunks)`` tensors, ``ci`` the chunk. With ``floats`` (the same coefficients as Python
    lists: a few large memories on the CPU) one GEMM per memory (:func:`minus_product_`: a decay
    of 1 costs no pass, a zero one does not read the old matrix, as in BLAS; a zero ``f_b`` skips
    the momentum's pass); otherwise (many or small memories, or a GPU) one batched GEMM per matrix. ``keep``:
    False for memories whose chunk is rejected (their state is left as it is).

    Factored momentum (see :mod:`titans_agent.core.scan_phases`): ``s_stale``: the momentum at the chunk's start is
    ``S = -Y'^T A'``, not in ``s`` (then ``keep`` is None), and ``f_b S`` is already in the rows
    (``x = [f_b Y'; x]``, ``a = [A'; a]``: one GEMM of 2c rows, no pass over S) or in the weights
    (held ahead); ``y`` (``[m_b Y'; y]``, over the same ``a``) then writes the new momentum over
    ``s`` without reading it.
    ``s_factored``: ``m_b`` is 0 for every memory, so the new momentum is ``-y^T a``, which the
    caller keeps as its factors: ``s`` is not written (and ``y`` not used).
    """
    xt, yt = x.transpose(-1, -2), y.transpose(-1, -2)
    if floats is None:
        beta_b, f_b, m_b = (t[:, ci, None, None] for t in ends)
        if keep is not None:  # a rejected memory: W <- 1 W + 0 S - 0, S <- 1 S - 0
            on = torch.tensor(keep, device=w.device)[:, None, None]
            beta_b, f_b, m_b = (torch.where(on, c, fill) for c, fill in ((beta_b, 1.0), (f_b, 0.0), (m_b, 1.0)))
            xt, yt, a = (torch.where(on, t, 0.0) for t in (xt, yt, a))
        if s_stale:
            w.mul_(beta_b).baddbmm_(xt, a, alpha=-1.0)
        else:
            w.mul_(beta_b).addcmul_(s, f_b).baddbmm_(xt, a, alpha=-1.0)
        if s_factored:
            return
        if s_stale:
            minus_product_(s, yt, a, 0.0)
        else:
            s.mul_(m_b).baddbmm_(yt, a, alpha=-1.0)
        return
    for j in range(w.shape[0]):
        if keep is not None and not keep[j]:
            continue
        minus_product_(w[j], xt[j], a[j], floats[0][j][ci])
        if not s_stale and floats[1][j][ci] != 0.0:
            w[j].add_(s[j], alpha=floats[1][j][ci])
        if not s_factored:
            minus_product_(s[j], yt[j], a[j], 0.0 if s_stale else floats[2][j][ci])


def stack_rows(top: Tensor, bottom: Tensor) -> Tensor:
    """``cat([top, bottom], dim=1)`` for ``(N, r, d)`` tensors; a view, no copy, when ``bottom``
    continues ``top`` in memory (consecutive chunks of one input: the first layer's keys)."""
    if (
        top.untyped_storage().data_ptr() == bottom.untyped_storage().data_ptr()
        and top.stride() == bottom.stride()
        and top.shape[0] == bottom.shape[0]
        and top.shape[2] == bottom.shape[2]
        and bottom.storage_offset() == top.storage_offset() + top.shape[1] * top.stride(1)
    ):
        return top.as_strided((top.shape[0], top.shape[1] + bottom.shape[1], top.shape[2]), top.stride())
    return torch.cat([top, bottom], dim=1)


def materialize(s: Tensor, factors: tuple[Tensor, Tensor]) -> None:
    """``s <- -Y^T A`` in place for a factored momentum ``(Y (N, c, out), A (N, c, in))``."""
    fy, fa = factors
    minus_product_(s, fy.transpose(-1, -2), fa, 0.0)
