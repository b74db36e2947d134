"""The phases of one chunked scan of an MLP memory with scalar gates, for
:func:`titans_agent.core.scan.memory_scan` (its docstring has the maths and every speed trick).

One call is one :class:`MlpScan`, which holds the call's state; ``core/scan.py`` drives it::

    prepare    (constructor) coefficients of every full chunk; the path: in place (no autograd)
               or functional; the state's storage; per-token quantities and stacked GEMM inputs
    per chunk  start       the chunk's coefficients (the momentum materialised before an
                           unfinished chunk)
               forward     activations and errors at the chunk's starting weights; the surprise
               backward    the errors back-propagated to every layer; the clamp's per-token factor
               read        the reads: dual form, or the chunk start's from the forward
               update      in place: the update terms, their finiteness check, the momentum dense
                           or as its rank-c factors, the weights held ahead; or functional: new
                           tensors, the last good state kept per memory
    finish     the momentum materialised, the final state checked, the result

Shapes: ``N`` memories, ``n`` tokens, ``b`` the chunk size, ``c <= b`` tokens in a chunk, layer l
maps ``in_l`` to ``out_l`` (``e`` the key width). ``W~ = W + gamma S``: the weights held ahead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from titans_agent.core.kernels import (
    EPS,
    MomentumFactors,
    ScanResult,
    activation_backward,
    activation_fns,
    all_finite_rows,
    chunk_coefficients,
    compact,
    decayed_minus,
    distinct_storage,
    flush_tiny,
    flush_tiny_,
    grad_needed,
    joined,
    keep_finite,
    materialize,
    opening_rows,
    owned,
    owned_minus,
    per_memory_gemms,
    scan_result,
    stack_rows,
    update_in_place,
)

__all__ = ["Chunk", "MlpScan"]


@dataclass(eq=False)
class Chunk:
    """One chunk's tensors, filled phase by phase (tokens ``s0:s1`` of the call, ``c`` of them).

    ``beta``, ``f`` ``(N, c)``; ``big_g`` ``(N, c, c)``; ``m_b`` ``(N,)``; ``n_b``, ``g_b``
    ``(N, c)`` (times the per-token factor after the backward phase); ``acts[l]`` layer l's input
    ``(N, c, in_l)``; ``pres[l]`` the pre-activation of the hidden layer l ``(N, c, out_l)``;
    ``err`` ``M(k) - v`` ``(N, c, e)``; ``first_read`` the queries' rows of the first (chunk reads:
    last) forward GEMM ``(N, c, out)``; ``deltas[l]`` ``(N, c, out_l)``; ``tok`` ``(N, c)``.
    """

    s0: int
    s1: int
    ci: int  # the chunk's index among the call's full chunks
    full: bool
    kc: Tensor
    beta: Tensor
    f: Tensor
    big_g: Tensor
    m_b: Tensor
    n_b: Tensor
    g_b: Tensor
    err: Tensor  # the loss target's addend (-v, or k - v with the residual) until the forward
    acts: list[Tensor] = field(default_factory=list)
    pres: list[Tensor] = field(default_factory=list)
    first_read: Tensor | None = None
    deltas: list[Tensor] = field(default_factory=list)
    tok: Tensor | None = None

    @property
    def c(self) -> int:
        return self.s1 - self.s0


class MlpScan:
    """The state of one call of the chunked scan over ``L = len(ws)`` layers (see the module).

    Args (the cast inputs of :func:`titans_agent.core.scan.memory_scan`): ``ws``, ``ss`` per layer
    ``(N, out_l, in_l)``; ``k``, ``v``, ``q`` ``(N, n, e)``; gates ``(N, n)``; ``b`` the chunk size;
    ``chunk_reads``: ``read="chunk"``; ``allow_inplace``: False for the functional rerun;
    ``capturable``: no host reads (the momentum stays a matrix: no chunk's ``m_b`` is looked at).

    Attributes the driver uses: ``inplace`` (full chunks are updated in place).
    """

    def __init__(
        self,
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
        chunk_reads: bool,
        overwrite_state: bool,
        allow_inplace: bool,
        keep_factors: bool = False,
        capturable: bool = False,
        defer_update: bool = False,
    ) -> None:
        self.k, self.q, self.theta, self.eta, self.alpha = k, q, theta, eta, alpha
        self.b, self.max_grad_norm = b, max_grad_norm
        self.reject_nonfinite, self.chunk_reads = reject_nonfinite, chunk_reads
        self.act, _ = activation_fns(activation)
        self.act_backward = activation_backward(activation)
        self.n_layers = len(ws)
        self.residual = self.n_layers > 1
        self.n_seq, self.n_tok, _ = k.shape
        self.reads: list[Tensor] = []  # per chunk (N, c, e)
        self.surprises: list[Tensor] = []  # per chunk (N, c), divided by |v|^2 at the end
        self.rejected = torch.zeros(self.n_seq, dtype=torch.long, device=k.device)
        self.tail_ok = torch.ones(self.n_seq, dtype=torch.bool, device=k.device)
        self.tail: tuple[Tensor, ...] | None = None
        self.n_full = self.n_tok // b
        self.capturable = capturable
        self.coeffs = self._full_chunk_coefficients()
        given = ss.tensors() if isinstance(ss, MomentumFactors) else ss
        self.grad = grad_needed(*ws, *given, k, v, theta, eta, alpha, q)
        self.inplace = self._in_place_possible(ws, given, allow_inplace)
        self.keep_factors = keep_factors and self.inplace
        self.defer = defer_update and self.keep_factors and not reject_nonfinite
        # Factored momentum (in-place path): after a chunk whose momentum decay m_b = prod eta flushed
        # to exactly 0 for every memory (eta = 0.5 over 64 tokens is 5e-20 < 2^-60), the momentum is
        # S = -Y^T A, rank c, with Y the chunk's errors times n_{i,b} and A the layer's inputs. It is
        # then kept as those factors: the next chunk's reads take f_t S r as -(f_t r A^T) Y (two skinny
        # GEMMs instead of one with the whole matrix), its weight update takes f_b S into its own GEMM
        # (2c rows, no pass over S), and the momentum GEMM of a chunk whose m_b is 0 again disappears.
        # The matrix is written back (one GEMM) where it is needed: a rejected chunk, an unfinished
        # chunk, a chunk with m_b > 0, and the end of the call. Same arithmetic up to rounding.
        self.factors: list[tuple[Tensor, Tensor]] | None = None  # per layer (Y (N, c, out), A (N, c, in))
        # Deferred update (defer_update): the last chunk's weight update, W <- beta_b W~ - x^T a, is
        # left to the next call, which applies it in the GEMM that opens it (with its first chunk's
        # f_b S, the same rows a: see _opening_rows): a stream of one-chunk calls updates with c rows.
        self.deferred: tuple[tuple[Tensor, ...], Tensor] | None = None  # the given one: rows per layer, decay (N,)
        self.last_rows: tuple[tuple[Tensor, ...], Tensor] | None = None  # and its rows and decay
        if isinstance(ss, MomentumFactors):  # the previous call's (keep_factors): factors on the in-place path
            # (their rows must be a chunk of this call's size: the update stacks them over its own)
            if self.inplace and ss.ys[0].shape[1] == b:
                self.factors = list(zip(ss.ys, ss.acts))
                if ss.deferred is not None and ss.decay is not None:
                    self.deferred = (ss.deferred, ss.decay)
                # stand-ins for the matrices, never read: a fresh buffer is made when one is written
                ss = tuple(w.new_zeros(()).expand(w.shape) for w in ws)
            else:
                ws, ss = ss.settle(ws), ss.dense()
        # Lookahead (in-place path, factored momentum): the momentum S of a chunk whose m_b is 0 enters
        # the weights at the NEXT chunk's end as f_b S (eq. 13-14 unrolled); when that chunk is a full
        # one of this call, its share is added one chunk early, in the same rank-c GEMM as this chunk's
        # own update: ws then hold W~ = W + gamma S with gamma = f_b / beta_b of the next chunk, so that
        # the next update is beta_b W~ - x^T a (c rows instead of 2c). Products with W during that next
        # chunk take W~ plus the skinny correction gamma (r A'^T) Y' (its reads fold it into the
        # momentum's own term). Only where beta_b >= 1/16 (gamma stays small: W~ loses nothing).
        self.look: Tensor | None = None  # (N, 1, 1) gamma while ws hold W~ = W + gamma S, S = -Y'^T A'
        self.ends: tuple[Tensor, ...] = ()  # beta_b, f_b, m_b per chunk, (N, chunks) each, on the in-place path
        self.floats: tuple[list[list[float]], ...] | None = None
        self.m_zero: list[bool] = []  # per full chunk: m_b == 0 for every memory
        self.beta_ok: list[bool] = []  # per full chunk: beta_b >= 1/16 for every memory
        self.s_owned: list[bool] = []  # per layer: ss[li] is this call's own storage (in-place path)
        self.ws, self.ss = ws, ss
        if self.inplace:
            self._prepare_in_place(overwrite_state)
        self._prepare_token_inputs(v)

    # ------------------------------------------------------------------------------------ prepare
    def _full_chunk_coefficients(self) -> tuple[Tensor, ...]:
        """Every full chunk's coefficients at once (one call of :func:`chunk_coefficients` over the
        ``N * chunks`` rows): ``beta``, ``f`` ``(N, chunks, b)``, ``G`` ``(N, chunks, b, b)``,
        ``m_b`` ``(N, chunks)``, ``n_b``, ``G_b`` ``(N, chunks, b)``; ``()`` when there is none."""
        if not self.n_full:
            return ()
        n_seq, n_full, b = self.n_seq, self.n_full, self.b
        flat = lambda t: t[:, : n_full * b].reshape(n_seq * n_full, b)  # noqa: E731
        return tuple(
            t.reshape(n_seq, n_full, *t.shape[1:])
            for t in chunk_coefficients(flat(self.theta), flat(self.eta), flat(self.alpha))
        )

    def _in_place_possible(self, ws: tuple[Tensor, ...], ss: tuple[Tensor, ...], allow_inplace: bool) -> bool:
        """Without autograd the state is updated in place in storage of its own: each chunk's decay
        a pass before its update GEMM (``kernels.minus_product_``), no new matrices per chunk. Same
        arithmetic as the functional path, up to rounding. With reject_nonfinite this needs the gradient clamp and a
        finite starting state: a chunk is then rejected when its update terms (errors, activations,
        coefficients) are non-finite, checked on those small tensors before the update; an overflow
        despite finite terms is caught by one check of the final state (:meth:`finish`), and then
        the whole call is run again on the functional path (which checks every chunk's new matrices).
        """
        inplace = bool(self.n_full) and not self.grad and allow_inplace
        if inplace and self.reject_nonfinite:
            inplace = self.max_grad_norm is not None and bool(all_finite_rows([*ws, *ss]).all())
        return inplace

    def _prepare_in_place(self, overwrite_state: bool) -> None:
        """The chunk ends' coefficients ``ends`` (``(N, chunks)`` each; as Python floats for a few
        large memories on the CPU), which chunks factor the momentum or hold the weights ahead, and
        the weights in storage of the call's own."""
        coeffs = self.coeffs
        self.ends = (coeffs[0][:, :, -1], coeffs[1][:, :, -1], coeffs[3])
        if self.capturable:  # no host reads: the momentum stays a matrix, the weights are never held ahead
            self.m_zero = self.beta_ok = [False] * self.n_full
        elif per_memory_gemms(self.ws):  # a few large memories on the CPU: one host read, decisions from it
            beta_b, _, m_b = self.floats = tuple(torch.stack(self.ends).tolist())
            self.m_zero = [all(row[ci] == 0.0 for row in m_b) for ci in range(self.n_full)]
            self.beta_ok = [all(row[ci] >= 0.0625 for row in beta_b) for ci in range(self.n_full)]
        else:
            self.m_zero = (self.ends[2] == 0).all(0).tolist()
            self.beta_ok = (self.ends[0] >= 0.0625).all(0).tolist()
        # Storage of its own for the state: a copy, or the inputs themselves when the caller gave
        # them up (not with reject_nonfinite: its fallback reruns the call from the inputs).
        reuse = overwrite_state and not self.reject_nonfinite and distinct_storage([*self.ws, *self.ss])
        opening = self._opening_rows()
        if opening is None:
            self.ws = tuple(owned(w, reuse) for w in self.ws)
        else:  # the GEMM that opens the call writes the call's own copy (no separate copy first)
            rows, decay = opening
            assert self.factors is not None
            self.ws = tuple(owned_minus(w, x, a, decay, reuse) for w, x, (_, a) in zip(self.ws, rows, self.factors))
        # The momentum is copied only when first updated in place (a factored momentum is written
        # back into a fresh buffer, never read there first: a 64-token call copies no momentum).
        self.s_owned = [reuse and t.is_contiguous() for t in self.ss]

    def _opening_rows(self) -> tuple[list[Tensor], Tensor | None] | None:
        """With factors given, the update that opens the call, ``W <- decay W - x^T A'`` per layer:
        the deferred update given (rows ``x``, ``decay``), and the first chunk's ``f_b S_0`` one
        chunk early (rows ``gamma Y'``; the weights then held ahead, as between the chunks of one
        call; where ``beta_b >= 1/16``); None when there is neither."""
        if self.factors is None:
            return None
        # the lookahead pays where this GEMM is made anyway (a deferred update given) or where it
        # lets this call defer its own last update (else it would trade c rows for corrections)
        will_defer = self.defer and self.m_zero[-1] and self.n_tok == self.n_full * self.b
        ahead = self.beta_ok[0] and (self.deferred is not None or will_defer)
        gamma = (self.ends[1][:, 0] / self.ends[0][:, 0])[:, None, None] if ahead else None
        if gamma is None and self.deferred is None:
            return None
        self.look = gamma
        ys = [fy for fy, _ in self.factors]
        rows = opening_rows(ys, None if self.deferred is None else self.deferred[0], gamma)
        return rows, None if self.deferred is None else self.deferred[1]

    def _prepare_token_inputs(self, v: Tensor) -> None:
        """Per-token quantities for the whole input at once: the loss target folded into the last
        layer's GEMM (``err = M(k) - v = W_L a + (k - v)`` with the residual) ``(N, n, e)``,
        ``|v|^2`` for the surprise and ``|k|^2`` for the gradient-norm clamp ``(N, n)``; and every
        full chunk's stacked GEMM inputs ``(N, chunks, 2b, e)``, built in one pass over the input
        instead of one small cat per chunk: keys over queries (scaled by beta_t for token-level
        reads), and for chunk-start reads through a residual MLP the last layer's addends (the loss
        target over the residual q)."""
        k, q, b = self.k, self.q, self.b
        self.neg_target = (k - v) if self.residual else -v
        self.v_sq = torch.linalg.vecdot(v, v) + EPS
        self.k_sq = torch.linalg.vecdot(k, k) if self.max_grad_norm is not None else None
        self.kq_all: Tensor | None = None
        self.tq_all: Tensor | None = None
        if q is not None and self.n_full:
            split = lambda t: t[:, : self.n_full * b].reshape(self.n_seq, self.n_full, b, t.shape[-1])  # noqa: E731
            if self.chunk_reads:
                self.kq_all = torch.cat([split(k), split(q)], dim=2)
                self.tq_all = torch.cat([split(self.neg_target), split(q)], dim=2) if self.residual else None
            else:
                self.kq_all = torch.cat([split(k), split(q) * self.coeffs[0].unsqueeze(-1)], dim=2)

    # --------------------------------------------------------------- momentum and weights held ahead
    def own_momentum(self, li: int, copy: bool) -> Tensor:
        """``ss[li]`` ``(N, out, in)`` in storage of this call's own: a copy (``copy``) or a fresh buffer."""
        if not self.s_owned[li]:
            t = self.ss[li]
            layout = torch.contiguous_format
            fresh = t.clone(memory_format=layout) if copy else torch.empty_like(t, memory_format=layout)
            self.ss = (*self.ss[:li], fresh, *self.ss[li + 1 :])
            self.s_owned[li] = True
        return self.ss[li]

    def materialize_momentum(self) -> None:
        """The factored momentum ``S = -Y^T A`` written back as matrices ``(N, out, in)``; no factors after."""
        assert self.factors is not None
        for li, f_l in enumerate(self.factors):
            materialize(self.own_momentum(li, copy=False), f_l)
        self.factors = None

    def _fix_rows(self, li: int, rows: Tensor, out: Tensor) -> None:
        """``out = rows @ W~^T`` ``(N, r, out)`` becomes ``rows @ W^T`` while the weights are held ahead."""
        if self.look is not None and self.factors is not None:
            fy, fa = self.factors[li]
            out.baddbmm_((rows @ fa.transpose(-1, -2)).mul_(self.look), fy)

    # ------------------------------------------------------------------------------------- start
    def start(self, s0: int) -> Chunk:
        """The chunk of tokens ``s0:s0 + b`` (fewer at the end) with its coefficients; an unfinished
        chunk reads and updates the momentum itself, so a factored one is materialised first."""
        s1 = min(s0 + self.b, self.n_tok)
        full = s1 - s0 == self.b
        if self.factors is not None and not full:
            self.materialize_momentum()
        if full:  # precomputed for every full chunk at once (fewer small ops per chunk)
            coeffs = tuple(t[:, s0 // self.b] for t in self.coeffs)
        else:
            coeffs = chunk_coefficients(self.theta[:, s0:s1], self.eta[:, s0:s1], self.alpha[:, s0:s1])
        beta, f, big_g, m_b, n_b, g_b = coeffs
        kc, target = self.k[:, s0:s1], self.neg_target[:, s0:s1]
        return Chunk(s0, s1, s0 // self.b, full, kc, beta, f, big_g, m_b, n_b, g_b, target)

    # ----------------------------------------------------------------------------------- forward
    def forward(self, ch: Chunk) -> None:
        """The forward at the chunk's starting weights: ``acts`` (each layer's input a_{l-1}),
        ``pres`` (the hidden layers' pre-activations z_l), ``err = M(k) - v`` ``(N, c, e)``, and the
        queries' rows of the GEMM they share with the keys (``first_read``); the surprise ``|err|^2``."""
        ch.acts, ch.pres = [ch.kc], []
        if self.chunk_reads and self.q is not None:
            self._forward_keys_and_queries(ch)
        else:
            self._forward_keys(ch)
        self.surprises.append(torch.linalg.vecdot(ch.err, ch.err))  # divided by |v|^2 at the end

    def _forward_keys_and_queries(self, ch: Chunk) -> None:
        """Chunk-start reads: keys and queries share every forward GEMM (2c rows) at the chunk's
        starting weights; the last layer's GEMM adds the loss target to the keys' rows and, through a
        residual MLP, q to the queries' rows (a matrix memory adds the target after the GEMM)."""
        assert self.q is not None
        c, err, n_layers = ch.c, ch.err, self.n_layers
        qc = self.q[:, ch.s0 : ch.s1]
        a = self.kq_all[:, ch.ci] if ch.full and self.kq_all is not None else torch.cat([ch.kc, qc], dim=1)
        for li, w in enumerate(self.ws):
            if li == n_layers - 1:
                if self.residual:
                    if ch.full and self.tq_all is not None:
                        addend = self.tq_all[:, ch.ci]
                    else:
                        addend = torch.cat([err, qc], dim=1)
                    both = torch.baddbmm(addend, a, w.transpose(-1, -2))
                    self._fix_rows(li, a, both)
                    ch.err, ch.first_read = both[:, :c], both[:, c:]
                else:
                    both = a @ w.transpose(-1, -2)
                    self._fix_rows(li, a, both)
                    ch.err, ch.first_read = both[:, :c] + err, both[:, c:]
            else:
                z = a @ w.transpose(-1, -2)
                self._fix_rows(li, a, z)
                ch.pres.append(z[:, :c])
                a = self.act(z)
                ch.acts.append(a[:, :c])

    def _forward_keys(self, ch: Chunk) -> None:
        """Token-level reads (or none): the keys' forward; with queries the first layer's GEMM also
        takes the queries scaled by beta_t (the reads' ``beta_t W0 r``, kept in ``first_read``)."""
        c, n_layers, a = ch.c, self.n_layers, ch.kc
        for li, w in enumerate(self.ws):
            if li == 0 and self.q is not None:  # the key's forward and the read's W0 product: one GEMM
                if ch.full and self.kq_all is not None:
                    stacked = self.kq_all[:, ch.ci]
                else:
                    stacked = torch.cat([ch.kc, self.q[:, ch.s0 : ch.s1] * ch.beta.unsqueeze(-1)], dim=1)
                both = stacked @ w.transpose(-1, -2)
                z, ch.first_read = both[:, :c], both[:, c:]
                self._fix_rows(li, ch.kc, z)  # the keys' rows; the reads' rows are fixed with the reads
                if li == n_layers - 1:
                    ch.err = z + ch.err
            elif li == n_layers - 1:
                ch.err = torch.baddbmm(ch.err, a, w.transpose(-1, -2))
                self._fix_rows(li, a, ch.err)
            else:
                z = a @ w.transpose(-1, -2)
                self._fix_rows(li, a, z)
            if li < n_layers - 1:
                ch.pres.append(z)
                a = self.act(z)
                ch.acts.append(a)

    # ---------------------------------------------------------------------------------- backward
    def backward(self, ch: Chunk) -> None:
        """The per-token errors back-propagated to each layer, ``deltas[l]`` ``(N, c, out_l)``
        (closed form, at the chunk's starting weights), WITHOUT the loss's factor 2 and the clamp:
        both are the per-token factor ``tok`` ``(N, c)``, folded here into ``g_b`` and ``n_b``
        (and into ``G`` by the reads)."""
        ws, factors, look = self.ws, self.factors, self.look
        ch.deltas = [ch.err] * self.n_layers
        g = ch.err
        for li in range(self.n_layers - 1, 0, -1):
            gw = g @ ws[li]
            if look is not None and factors is not None:  # g W = g W~ + gamma (g Y'^T) A'
                fy, fa = factors[li]
                gw.baddbmm_((g @ fy.transpose(-1, -2)).mul_(look), fa)
            g = flush_tiny(self.act_backward(gw, ch.pres[li - 1]))  # subnormal tails to 0
            ch.deltas[li - 1] = g
        if self.max_grad_norm is not None:
            assert self.k_sq is not None
            sq = self.k_sq[:, ch.s0 : ch.s1] * torch.linalg.vecdot(ch.deltas[0], ch.deltas[0])
            for dl, al in zip(ch.deltas[1:], ch.acts[1:]):
                sq = sq + torch.linalg.vecdot(dl, dl) * torch.linalg.vecdot(al, al)
            ch.tok = 2.0 * torch.clamp(self.max_grad_norm / (2.0 * torch.sqrt(sq + EPS)), max=1.0)
        else:
            ch.tok = torch.full_like(ch.beta, 2.0)
        ch.g_b, ch.n_b = ch.g_b * ch.tok, ch.n_b * ch.tok

    # -------------------------------------------------------------------------------------- read
    def read(self, ch: Chunk) -> None:
        """The chunk's reads ``(N, c, e)``: chunk-start reads come from the forward; token-level
        reads are the dual form, layer by layer: ``beta_t W0 r + f_t S0 r - sum_i G_ti (a_i . r)
        delta_i``, the row scales applied to the GEMMs' ``(c, in)`` inputs and the three terms
        accumulated by the GEMMs in place (no backward formula needs a GEMM's output)."""
        q = self.q
        if q is None:
            return
        if self.chunk_reads:
            assert ch.first_read is not None
            self.reads.append(ch.first_read)
            return
        assert ch.tok is not None and ch.first_read is not None
        n_layers, beta, f, look, factors = self.n_layers, ch.beta, ch.f, self.look, self.factors
        big_g = ch.big_g * ch.tok.unsqueeze(-2)
        r = q[:, ch.s0 : ch.s1]
        # the momentum term's row scale: f_t, or f_t - beta_t gamma with the weights held ahead
        f_coef = f.unsqueeze(-1) if look is None else f.unsqueeze(-1) - beta.unsqueeze(-1) * look
        for li in range(n_layers):
            dual = flush_tiny((r @ ch.acts[li].transpose(-1, -2)) * big_g)
            if li == 0:  # a view of the forward's GEMM output, which gelu's backward keeps
                first = ch.first_read
                z = (
                    first.baddbmm(dual, ch.deltas[li], alpha=-1.0)
                    if self.grad
                    else first.baddbmm_(dual, ch.deltas[li], alpha=-1.0)
                )
            else:  # the last layer of a residual MLP starts from q (the residual)
                rb, w_t = r * beta.unsqueeze(-1), self.ws[li].transpose(-1, -2)
                if self.residual and li == n_layers - 1:
                    z = torch.baddbmm(q[:, ch.s0 : ch.s1], rb, w_t)
                else:
                    z = torch.bmm(rb, w_t)
                z = z.baddbmm_(dual, ch.deltas[li], alpha=-1.0)
            if factors is None:
                z = z.baddbmm_(r * f.unsqueeze(-1), self.ss[li].transpose(-1, -2))
            else:  # f_t S_0 r with S_0 = -Y^T A: the (c, c) scores scaled by f_t
                fy, fa = factors[li]  # (held ahead: beta_t W~ r + (f_t - beta_t gamma) S_0 r)
                z = z.baddbmm_((r @ fa.transpose(-1, -2)).mul_(f_coef), fy, alpha=-1.0)
            r = self.act(z) if li < n_layers - 1 else z
        self.reads.append(r)

    # -------------------------------------------------------------------------- update, in place
    def update_in_place(self, ch: Chunk) -> None:
        """A full chunk's update of the call's own state: ``W <- beta_b W + f_b S - x^T a`` and
        ``S <- m_b S - y^T a`` per layer, the momentum dense or kept as its rank-c factors (when
        ``m_b`` is 0 for every memory), the next chunk's ``f_b S`` added one chunk early where it
        can be (the weights held ahead)."""
        xs, ys, xbufs = self._update_terms(ch)
        keep = self._check_terms(ch, xs, ys) if self.reject_nonfinite else None
        if keep is not None and self.factors is not None:  # a rejected memory keeps its S: as a matrix
            if self.look is not None:  # and every memory its W (undo the lookahead)
                for li, (fy, fa) in enumerate(self.factors):
                    self.ws[li].baddbmm_((fy * self.look).transpose(-1, -2), fa)
                self.look = None
            self.materialize_momentum()
        s_factored = keep is None and self.m_zero[ch.ci]
        last = ch.ci == self.n_full - 1 and self.n_tok == self.n_full * self.b  # no unfinished chunk after
        if s_factored and self.look is not None and self.defer and last:
            # the weights held ahead: the update is beta_b W~ - x^T a; left to the next call
            self.last_rows = (tuple(xs), self.ends[0][:, ch.ci])
            self.factors, self.look = list(zip(ys, ch.acts)), None
            return
        fold = s_factored and ch.ci + 1 < self.n_full and self.beta_ok[ch.ci + 1]
        gamma = (self.ends[1][:, ch.ci + 1] / self.ends[0][:, ch.ci + 1])[:, None, None] if fold else None
        for li in range(self.n_layers):
            x_l, y_l = xs[li], ys[li]
            if gamma is not None:  # the next chunk's f_b S, one chunk early (the same rows a)
                x_l = x_l.addcmul_(y_l, gamma)
            if self.factors is None:  # the momentum at the chunk's start a matrix; none written if s_factored
                s_l = self.ss[li] if s_factored else self.own_momentum(li, copy=True)
                a_l = ch.acts[li]
                update_in_place(self.ws[li], s_l, x_l, y_l, a_l, self.ends, ch.ci, self.floats, keep, False, s_factored)
            else:
                self._update_layer_factored(ch, li, x_l, y_l, xbufs, keep, s_factored)
        self.factors = list(zip(ys, ch.acts)) if s_factored else None
        self.look = gamma

    def _update_terms(self, ch: Chunk) -> tuple[list[Tensor], list[Tensor], list[Tensor] | None]:
        """Per layer the update's rows ``x = G_b delta`` (weights) and ``y = n_b delta`` (momentum)
        ``(N, c, out_l)``, flushed. With a factored momentum whose ``f_b S`` joins this update (the
        weights not held ahead) each weight update takes 2c rows ``[f_b Y'; x]``: ``x`` is written
        straight into the lower half of that ``(N, 2c, out_l)`` buffer (returned too; else None)."""
        c = ch.c
        stack = self.factors is not None and self.look is None  # f_b S joins this update's rows
        xbufs = [dl.new_empty(self.n_seq, 2 * c, dl.shape[-1]) for dl in ch.deltas] if stack else None
        xs = [
            flush_tiny(dl * ch.g_b.unsqueeze(-1))
            if xbufs is None
            else flush_tiny_(torch.mul(dl, ch.g_b.unsqueeze(-1), out=xbufs[li][:, c:]))
            for li, dl in enumerate(ch.deltas)
        ]
        ys = [flush_tiny(dl * ch.n_b.unsqueeze(-1)) for dl in ch.deltas]
        return xs, ys, xbufs

    def _check_terms(self, ch: Chunk, xs: list[Tensor], ys: list[Tensor]) -> list[bool] | None:
        """The finiteness check of the in-place path, on the chunk's update terms (rows,
        activations, chunk-end coefficients) before the update: None when every memory's are
        finite, else per memory whether it is updated (the others are counted as rejected)."""
        ends = torch.stack([t[:, ch.ci] for t in self.ends], dim=-1)
        ok = all_finite_rows([*xs, *ys, *ch.acts[1:], ends])
        if bool(ok.all()):
            return None
        self.rejected = self.rejected + (~ok).long()
        return ok.tolist()

    def _update_layer_factored(
        self,
        ch: Chunk,
        li: int,
        x_l: Tensor,
        y_l: Tensor,
        xbufs: list[Tensor] | None,
        keep: list[bool] | None,
        s_factored: bool,
    ) -> None:
        """Layer ``li``'s update with the momentum at the chunk's start ``S_0 = -Y'^T A'`` (not in
        ``ss``): the new momentum (unless factored again) is ``m_b S_0 - y^T a = -[m_b Y'; y]^T
        [A'; a]``, written without reading ``ss``; ``f_b S_0`` joins the weights' rows
        (``xbufs``) or is already in the weights held ahead."""
        assert self.factors is not None
        c, ci, a_l, ends = ch.c, ch.ci, ch.acts[li], self.ends
        py, pa = self.factors[li]
        a_two = stack_rows(pa, a_l) if xbufs is not None or not s_factored else a_l
        if not s_factored:
            y_l = torch.cat([py * ends[2][:, ci, None, None], y_l], dim=1)
        s_l = self.ss[li] if s_factored else self.own_momentum(li, copy=False)
        if xbufs is not None:  # f_b S_0 joins this update's rows: [f_b Y'; x] over [A'; a]
            flush_tiny_(torch.mul(py, ends[1][:, ci, None, None], out=xbufs[li][:, :c]))
            update_in_place(self.ws[li], s_l, xbufs[li], y_l, a_two, ends, ci, self.floats, keep, True, s_factored)
        else:  # the weights held ahead already hold f_b S_0: x over a, then y over [A'; a]
            update_in_place(self.ws[li], s_l, x_l, y_l, a_l, ends, ci, self.floats, None, True, True)
            if not s_factored:
                materialize(s_l, (y_l, a_two))

    # ------------------------------------------------------------------------- update, functional
    def update(self, ch: Chunk) -> None:
        """The chunk's update as new tensors (autograd, or the unfinished chunk): the memory after
        its last token ``M_b = beta_b M_0 + f_b S_0 - sum_i G_{b,i} u_i`` and the momentum
        ``S_b = m_b S_0 - sum_i n_{i,b} u_i``, per layer ``(N, out_l, in_l)``; with
        ``reject_nonfinite`` a memory whose new state is not finite keeps its last good one. An
        unfinished chunk's weights become the tail; the state stays at its start."""
        beta_b, f_b = ch.beta[:, -1, None, None], ch.f[:, -1, None, None]
        new_w = tuple(
            decayed_minus(w, beta_b, s, f_b, flush_tiny(dl * ch.g_b.unsqueeze(-1)), al)
            for w, s, dl, al in zip(self.ws, self.ss, ch.deltas, ch.acts)
        )
        if not ch.full:
            if self.reject_nonfinite:
                new_w, self.tail_ok = keep_finite(new_w, self.ws)
                self.rejected = self.rejected + (~self.tail_ok).long()
            self.tail = new_w
            return
        new_s = tuple(
            decayed_minus(s, ch.m_b[:, None, None], None, None, flush_tiny(dl * ch.n_b.unsqueeze(-1)), al)
            for s, dl, al in zip(self.ss, ch.deltas, ch.acts)
        )
        if self.reject_nonfinite:
            kept, ok = keep_finite((*new_w, *new_s), (*self.ws, *self.ss))
            new_w, new_s = kept[: self.n_layers], kept[self.n_layers :]
            self.rejected = self.rejected + (~ok).long()
        self.ws, self.ss = new_w, new_s

    # ------------------------------------------------------------------------------------ finish
    def finish(self) -> ScanResult | None:
        """The result, the momentum materialised (or, with ``keep_factors``, kept as its factors);
        None when the in-place path with
        ``reject_nonfinite`` ends on a non-finite state (an overflow its checks of the update terms
        did not show): the caller then runs the call again on the functional path."""
        kept: MomentumFactors | None = None
        if self.factors is not None and self.keep_factors:
            rows, decay = self.last_rows if self.last_rows is not None else (None, None)
            kept = MomentumFactors(
                tuple(compact(y) for y, _ in self.factors),
                tuple(compact(a, self.k) for _, a in self.factors),  # the first layer's are the keys
                None if rows is None else tuple(compact(x) for x in rows),
                None if decay is None else compact(decay),
            )
            self.factors = None
        elif self.factors is not None:
            self.materialize_momentum()
        state = [*self.ws, *(kept.tensors() if kept is not None else self.ss)]
        if self.inplace and self.reject_nonfinite and not bool(all_finite_rows(state).all()):
            return None
        surprises = [joined(self.surprises) / self.v_sq] if self.surprises else []
        momentum = () if kept is not None else self.ss
        return scan_result(
            self.k, self.q, self.reads, surprises, self.ws, momentum, self.tail, self.rejected, self.tail_ok, kept
        )
