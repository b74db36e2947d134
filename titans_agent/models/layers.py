"""Building blocks of the Titans models: the batched multi-head neural memory layer (section 4.4
block), sliding-window attention with a persistent prefix, and the feed-forward layer.

Shapes: ``b`` batch, ``n`` tokens, ``d`` width, ``h`` heads, ``e = d / h`` head width.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from titans_agent.core.scan import MomentumFactors, memory_scan, mlp_forward
from titans_agent.models.config import ModelConfig

__all__ = [
    "CausalConv",
    "FeedForward",
    "LayerMemoryState",
    "NeuralMemoryLayer",
    "WindowAttention",
    "causal_conv",
    "window_mask",
]

_EPS = 1e-6


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


class CausalConv(nn.Module):
    """Depthwise causal 1D convolution over the token axis (section 4.4, kernel 4 in MIRAS/ATLAS).

    Args:
        width: channels d.
        kernel: kernel width; output t sees inputs t - kernel + 1 .. t.
    """

    def __init__(self, width: int, kernel: int) -> None:
        super().__init__()
        self.kernel = kernel
        self.conv = nn.Conv1d(width, width, kernel, groups=width, bias=True)

    def forward(self, x: Tensor, cache: Tensor | None = None, cache_at: int | None = None) -> tuple[Tensor, Tensor]:
        """Convolve ``x`` ``(b, n, d)``.

        Args:
            x: the inputs.
            cache: the last ``kernel - 1`` inputs ``(b, kernel - 1, d)`` before ``x`` (zeros if None).
            cache_at: return the cache as of after this many tokens of ``x`` (default: all ``n``).

        Returns:
            The outputs ``(b, n, d)`` and the cache ``(b, kernel - 1, d)``.
        """
        return causal_conv(x, cache, *self.taps(), cache_at)

    def taps(self) -> tuple[Tensor, Tensor]:
        """The ``Conv1d``'s own parameters as ``weight`` ``(d, kernel)`` and ``bias`` ``(d,)`` (views)."""
        assert self.conv.bias is not None  # built with bias=True
        return self.conv.weight[:, 0, :], self.conv.bias


def causal_conv(
    x: Tensor, cache: Tensor | None, weight: Tensor, bias: Tensor, cache_at: int | None = None
) -> tuple[Tensor, Tensor]:
    """Depthwise causal convolution of ``x`` ``(b, n, d)`` with ``weight`` ``(d, kernel)`` and
    ``bias`` ``(d,)`` (a ``Conv1d``'s cross-correlation, ``y_t = bias + sum_j w_j x_{t-kernel+1+j}``),
    continuing from ``cache`` (the ``kernel - 1`` inputs before ``x``, ``(b, kernel - 1, d)``; zeros
    if None). Returns the outputs ``(b, n, d)`` and the cache as of after ``cache_at`` tokens
    (default: all), a tensor of its own (it does not keep the input alive)."""
    pad = weight.shape[1] - 1
    if cache is None:
        cache = x.new_zeros(x.shape[0], pad, x.shape[2])
    full = torch.cat([cache, x], dim=1)  # (b, pad + n, d)
    # shifted multiply-adds on the (b, n, d) layout: no transposes and a contiguous output (1.3 ms
    # for (1, 1024, 384) on 2 CPU threads, where conv1d took 2.3)
    n = x.shape[1]
    y = torch.addcmul(bias, full[:, pad : pad + n], weight[:, pad])
    for j in range(pad):
        y.addcmul_(full[:, j : j + n], weight[:, j])
    at = n if cache_at is None else cache_at
    return y, full[:, at : at + pad].clone()


@dataclass(frozen=True)
class LayerMemoryState:
    """Test-time state of a :class:`NeuralMemoryLayer` between calls.

    Attributes:
        carried_weights: what the next call continues from, one ``(b, h, out, in)`` tensor per
            memory layer (``(b, h, e, e)`` for the linear memory, whose read is ``M q``): the memory
            itself (:attr:`weights`) unless ``momentum`` carries the last chunk's deferred update
            (:attr:`NeuralMemoryLayer.defer_update`), which the next call applies first.
        momentum: the momentum S at the start of the current chunk (the point of :attr:`weights`),
            same shapes; or, where the last chunk's momentum decay flushed to 0 (no autograd), its
            rank-c factors (:class:`MomentumFactors`,
            per layer ``(b * h, c, out)`` and ``(b * h, c, in)``, maybe with that deferred update),
            which the next call reads without writing the matrices: :meth:`dense_momentum` gives
            the matrices either way.
        conv: the convolution caches of the q, k, v streams at the same point, each ``(b, kernel - 1, d)``
            (after a call, non-contiguous views into one ``(b, kernel - 1, 3d)`` tensor of their own).
        pending: the inputs ``(b, r, d)``, ``r < chunk``, written since the chunk started (a copy, not
            a view of the caller's input); the next call completes their chunk from the chunk start,
            so any split equals one call.
    """

    carried_weights: tuple[Tensor, ...]
    momentum: tuple[Tensor, ...] | MomentumFactors
    conv: tuple[Tensor, Tensor, Tensor]
    pending: Tensor

    @functools.cached_property
    def weights(self) -> tuple[Tensor, ...]:
        """The memory per sequence and head at the start of the current chunk, one ``(b, h, out, in)``
        tensor per memory layer: :attr:`carried_weights`, or, with a deferred update, new tensors
        that apply it (one GEMM of c rows per layer, on first access). A call given this state with
        ``overwrite_state`` writes the carried weights: read this before (without a deferred update
        it is those very tensors: clone them to keep them)."""
        factors = self.momentum
        if not isinstance(factors, MomentumFactors) or factors.deferred is None:
            return self.carried_weights
        flat = tuple(w.reshape(-1, *w.shape[2:]) for w in self.carried_weights)
        return tuple(m.view(w.shape) for m, w in zip(factors.settle(flat), self.carried_weights))

    def dense_momentum(self) -> tuple[Tensor, ...]:
        """The momentum as matrices, one ``(b, h, out, in)`` tensor per memory layer."""
        if not isinstance(self.momentum, MomentumFactors):
            return self.momentum
        return tuple(s.view(w.shape) for s, w in zip(self.momentum.dense(), self.carried_weights))


class NeuralMemoryLayer(nn.Module):
    """Multi-head Titans long-term memory over sequences ``(b, n, d)`` (paper sections 3 and 4.4).

    Block: q/k/v projections, each followed by a depthwise causal convolution and SiLU; q and k
    L2-normalised per head; per-token, per-head data-dependent gates theta (inner learning rate),
    eta (momentum decay), alpha (forgetting), per channel too with ``config.gate_rank >= 1`` (a
    low-rank map, for a matrix memory); per head a memory MLP of ``config.memory_depth``
    layers (a matrix ``M k`` for depth 1, the residual MLP ``k + W_L gelu(... W_1 k)`` deeper) whose
    initial weights M_0 are learned parameters; per-head output normalisation and a linear
    (sigmoid) gate; an output projection.

    The update is eq. 13-14 with the loss ``||M(k_t) - v_t||^2`` (eq. 12), parallel in chunks of
    ``config.chunk`` tokens (section 3.2): inside a chunk every gradient is taken at the weights of
    the chunk start, and the read at token t uses the memory as of token t (token-level momentum and
    decay in the dual form, :func:`titans_agent.core.scan.memory_scan`); for the linear memory::

        Y = diag(beta) Q M_0^T + diag(f) Q S_0^T - (tril(Q K^T) * G) U,   U_i = 2 (M_0 k_i - v_i)

    with every cumulative product in log space. The inner loop runs in float32 under bf16
    autocast. Gradients of all outer parameters flow through it.

    Parameters: ``M0`` is the first memory layer's initial weights ``(h, out, in)`` and
    ``M0_deep`` the deeper layers' (empty for depth 1); each is its own leaf tensor.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        d, h, e = config.width, config.heads, config.head_dim
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.q_conv = CausalConv(d, config.conv_kernel)
        self.k_conv = CausalConv(d, config.conv_kernel)
        self.v_conv = CausalConv(d, config.conv_kernel)
        self.gate_proj = nn.Linear(d, 3 * h)
        with torch.no_grad():
            self.gate_proj.weight.mul_(0.1)
            bias = torch.tensor([_logit(0.5), _logit(config.eta_init), _logit(config.alpha_init)])
            self.gate_proj.bias.copy_(bias.repeat_interleave(h))
        # Per-channel gates (config.gate_rank >= 1): a low-rank offset per channel on each gate's
        # logit, small at the start so training starts near the per-token gates.
        self.gate_down: nn.Linear | None = None
        self.gate_up: nn.Linear | None = None
        if config.gate_rank:
            self.gate_down = nn.Linear(d, config.gate_rank, bias=False)
            self.gate_up = nn.Linear(config.gate_rank, 3 * h * e, bias=False)
            with torch.no_grad():
                self.gate_up.weight.mul_(0.01)
        depth, hidden = config.memory_depth, e * config.memory_expansion
        if depth == 1:
            self.M0 = nn.Parameter(torch.zeros(h, e, e))  # learnable initial memory, one per head
            self.M0_deep = nn.ParameterList()
        else:
            shapes = [(hidden, e)] + [(hidden, hidden)] * (depth - 2) + [(e, hidden)]
            inits = []
            for i, (o, n_in) in enumerate(shapes):
                scale = (0.1 if i == len(shapes) - 1 else 1.0) / math.sqrt(n_in)  # residual branch starts small
                inits.append(nn.Parameter(torch.randn(h, o, n_in) * scale))
            self.M0 = inits[0]
            self.M0_deep = nn.ParameterList(inits[1:])
        self.out_norm = nn.RMSNorm(e, eps=_EPS)
        self.out_gate = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d, bias=False)

    def initial_weights(self) -> tuple[Tensor, ...]:
        """M_0: one ``(h, out, in)`` tensor per memory layer."""
        return (self.M0, *self.M0_deep)

    def init_state(self, batch: int) -> LayerMemoryState:
        """The state before any token: M_0 for every sequence, zero momentum, empty conv caches."""
        c = self.config
        w = tuple(m.unsqueeze(0).expand(batch, *m.shape) for m in self.initial_weights())
        pad = self.M0.new_zeros(batch, c.conv_kernel - 1, c.width)
        return LayerMemoryState(
            w, tuple(torch.zeros_like(t) for t in w), (pad, pad, pad), self.M0.new_zeros(batch, 0, c.width)
        )

    def _heads(self, x: Tensor) -> Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.config.heads, self.config.head_dim).transpose(1, 2)  # (b, h, n, e)

    def _qkv(
        self, x: Tensor, caches: tuple[Tensor, Tensor, Tensor], cache_at: int
    ) -> tuple[Tensor, Tensor, Tensor, tuple[Tensor, Tensor, Tensor]]:
        """Queries and keys (normalised per head) and values ``(b, h, n, e)`` of ``x`` ``(b, n, d)``
        and the three streams' conv caches ``(b, kernel - 1, d)`` as of ``cache_at`` tokens (views
        into one copy of those tokens' ``3d`` channels, not into ``x``): each stream's projection,
        depthwise causal convolution and SiLU, the convolutions and SiLU run as one over the ``3d``
        channels (the same arithmetic in fewer operations: a 64-token call spends much of its time
        in small ones)."""
        d = self.config.width
        taps = [conv.taps() for conv in (self.q_conv, self.k_conv, self.v_conv)]
        y, cache = causal_conv(
            torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1),
            torch.cat(caches, dim=-1),
            torch.cat([w for w, _ in taps]),
            torch.cat([b for _, b in taps]),
            cache_at,
        )
        y = F.silu(y)
        q = F.normalize(self._heads(y[..., :d]), dim=-1)
        k = F.normalize(self._heads(y[..., d : 2 * d]), dim=-1)
        return q, k, self._heads(y[..., 2 * d :]), (cache[..., :d], cache[..., d : 2 * d], cache[..., 2 * d :])

    def read_static(self, weights: tuple[Tensor, ...] | Tensor, q: Tensor) -> Tensor:
        """``M*(q)`` ``(b, h, n, e)`` with fixed weights (per layer ``(b, h, out, in)``): a read with
        no update (eq. 15)."""
        ws = (weights,) if isinstance(weights, Tensor) else weights
        b, h, n, e = q.shape
        flat = tuple(w.reshape(b * h, *w.shape[2:]) for w in ws)
        return mlp_forward(flat, q.reshape(b * h, n, e), "gelu").view(b, h, n, e)

    def output(self, y: Tensor, x: Tensor) -> Tensor:
        """Output normalisation, linear gate from ``x`` ``(b, n, d)`` and projection of ``y`` ``(b, h, n, e)``."""
        b, _, n, _ = y.shape
        y = self.out_norm(y).transpose(1, 2).reshape(b, n, self.config.width)
        return self.out_proj(y * torch.sigmoid(self.out_gate(x)))

    def _scan(
        self,
        m0: tuple[Tensor, ...],
        s0: tuple[Tensor, ...] | MomentumFactors,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        theta: Tensor,
        eta: Tensor,
        alpha: Tensor,
        owned: bool = False,
    ) -> tuple[Tensor, tuple[Tensor, ...], tuple[Tensor, ...] | MomentumFactors]:
        """Chunks from a chunk start: q, k, v ``(b, h, n, e)``, gates ``(b, h, n)`` (per channel:
        ``(b, h, n, e)``); returns the reads ``(b, h, n, e)`` (as ``config.memory_read`` says) and
        the state to carry after the last full chunk (``ScanResult.next_state``: the weights the
        next call continues from and the momentum, as its factors where the scan kept them, maybe
        with the deferred update). ``owned``: ``m0``, ``s0`` are this layer's own (a previous
        block's result) and may be updated in place."""
        b, h, n, e = k.shape
        flat = lambda t: t.reshape(b * h, *t.shape[2:])  # noqa: E731
        res = memory_scan(
            tuple(flat(w) for w in m0),
            s0 if isinstance(s0, MomentumFactors) else tuple(flat(s) for s in s0),
            flat(k),
            flat(v),
            flat(theta),
            flat(eta),
            flat(alpha),
            flat(q),
            chunk_size=self.config.chunk,
            activation="gelu",
            max_grad_norm=self.config.max_grad_norm,
            read=self.config.memory_read,
            overwrite_state=owned,
            keep_factors=True,
            capturable=self.capturable,
            defer_update=self.defer_update,
        )
        unflat = lambda t: t.reshape(b, h, *t.shape[1:])  # noqa: E731
        assert res.reads is not None
        weights, momentum = res.next_state  # the weights carried and the factors with a deferred update
        if not isinstance(momentum, MomentumFactors):
            momentum = tuple(unflat(s) for s in momentum)
        return unflat(res.reads), tuple(unflat(w) for w in weights), momentum

    def _chunk(
        self, m0: Tensor, s0: Tensor, q: Tensor, k: Tensor, v: Tensor, theta: Tensor, eta: Tensor, alpha: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One chunk of the linear memory: weights ``(b, h, e, e)``; returns the reads and the weights
        and momentum at the chunk's end (kept for tests of the single-chunk formula)."""
        b, h, n, e = k.shape
        flat = lambda t: t.reshape(b * h, *t.shape[2:])  # noqa: E731
        res = memory_scan(
            (flat(m0),),
            (flat(s0),),
            flat(k),
            flat(v),
            flat(theta),
            flat(eta),
            flat(alpha),
            flat(q),
            chunk_size=max(n, 1),
            activation="gelu",
            max_grad_norm=self.config.max_grad_norm,
        )
        assert res.reads is not None
        return res.reads.view(b, h, n, e), res.weights[0].view(b, h, e, e), res.momentum[0].view(b, h, e, e)

    capturable: bool = False
    """True: the forward reads nothing back to the host, so a CUDA graph can capture it
    (``memory_scan``'s ``capturable``: the gates are in range by construction here; the momentum
    stays a matrix). Set it on the instance before capturing; the results are the same up to
    rounding. A graph is fixed to the shapes of its capture (the batch, the input's length, the
    given state's unfinished tokens ``pending``) and to the tensors it read: replaying it with new
    inputs means copying them into those tensors. With ``overwrite_state`` the weights and momentum
    are updated where the given state holds them, so each replay advances that state, while the
    returned convolution caches and ``pending`` are new tensors a stream must copy back into the
    given state before the next replay."""

    defer_update: bool = True
    """True: a call whose last chunk ends with the momentum factored leaves that chunk's weight
    update to the next call (``memory_scan``'s ``defer_update``): a stream of one-chunk calls then
    updates the weights with c rows a call instead of 2c, as one call does. The state's
    :attr:`LayerMemoryState.weights` applies it when read (a GEMM); a caller that reads the memory
    before every call (MAC's retrieval) sets this to False on its layer."""

    block_tokens: int = 1024
    """Inputs longer than this are processed in blocks of about this many tokens (a multiple of the
    chunk), carrying the state, so working memory stays flat as the input grows; the result is the
    same as one block (splitting equals one call)."""

    def forward(
        self,
        x: Tensor,
        state: LayerMemoryState | None = None,
        gate_input: Tensor | None = None,
        *,
        overwrite_state: bool = False,
    ) -> tuple[Tensor, LayerMemoryState]:
        """Write every token of ``x`` ``(b, n, d)`` into the memory and read, at each token, the
        memory as of that token (``config.memory_read="chunk"``: as of the start of its chunk).

        Args:
            x: the inputs; they give the keys, values, queries and gates.
            state: the state to continue from (None: :meth:`init_state`). Splitting a sequence
                anywhere and carrying the state equals one call (exactly in float64; in float32 up
                to rounding, which an untrained layer can amplify over long inputs).
            gate_input: what the output gate is computed from (default ``x``).
            overwrite_state: the caller gives ``state`` up (a stream that only keeps the newest
                state): without autograd its weights are updated in place, no copy per call, and
                it must not be used afterwards. Ignored where the state shares storage with this
                layer's parameters (:meth:`init_state`'s views of M_0 are never written).

        Returns:
            The outputs ``(b, n, d)`` and the state after the last token.
        """
        chunk = self.config.chunk
        block = max(chunk, (self.block_tokens // chunk) * chunk)
        n = x.shape[1]
        if n <= block:
            return self._forward(x, state, gate_input, owned=overwrite_state and self._not_a_parameter(state))
        out = x.new_empty(x.shape[0], n, self.config.width)
        lo = 0
        while lo < n:
            r = 0 if state is None else state.pending.shape[1]
            hi = min(n, lo + block - r)  # later blocks start on chunk boundaries
            gate = None if gate_input is None else gate_input[:, lo:hi]
            # after the first block the state is this call's own: updated in place, not copied
            owned = lo > 0 or (overwrite_state and self._not_a_parameter(state))
            out[:, lo:hi], state = self._forward(x[:, lo:hi], state, gate, owned=owned)
            lo = hi
        assert state is not None
        return out, state

    def _not_a_parameter(self, state: LayerMemoryState | None) -> bool:
        """True when ``state`` holds no view of this layer's parameters (it may be written)."""
        if state is None:
            return False
        params = {p.untyped_storage().data_ptr() for p in self.parameters()}
        mine = [*state.carried_weights, *(() if isinstance(state.momentum, MomentumFactors) else state.momentum)]
        return not any(t.untyped_storage().data_ptr() in params for t in mine)

    def _forward(
        self, x: Tensor, state: LayerMemoryState | None, gate_input: Tensor | None, owned: bool = False
    ) -> tuple[Tensor, LayerMemoryState]:
        b, n, _ = x.shape
        c = self.config
        if state is None:
            state = self.init_state(b)
        r = state.pending.shape[1]
        xs = torch.cat([state.pending, x], dim=1) if r else x  # from the current chunk's start
        n = r + n
        boundary = (n // c.chunk) * c.chunk  # where the next call's chunk starts
        x_gate = x if gate_input is None else gate_input
        q, k, v, conv = self._qkv(xs, state.conv, boundary)
        z = self.gate_proj(xs).view(b, n, 3, c.heads).permute(2, 0, 3, 1)  # (3, b, h, n)
        if self.gate_down is not None and self.gate_up is not None:  # per channel: (3, b, h, n, e)
            per_channel = self.gate_up(self.gate_down(xs)).view(b, n, 3, c.heads, c.head_dim)
            z = z.unsqueeze(-1) + per_channel.permute(2, 0, 3, 1, 4)
        gates = torch.sigmoid(z)
        theta = c.theta_max * gates[0]
        eta = gates[1].clamp_min(1e-6)
        alpha = gates[2].clamp_max(1.0 - 1e-6)
        # A finished chunk moves the state; an unfinished one stays pending (recomputed next call).
        reads, m, s = self._scan(state.carried_weights, state.momentum, q, k, v, theta, eta, alpha, owned)
        y = reads[:, :, r:]  # the pending tokens' reads were returned before
        out = self.output(y, x_gate)
        # the unfinished chunk's inputs copied: a view would alias the caller's x (a refilled buffer would
        # change the next call) and keep the whole input alive
        return out, LayerMemoryState(m, s, conv, xs[:, boundary:].clone())


def window_mask(n_query: int, n_prefix: int, window: int, device: torch.device) -> Tensor:
    """Boolean mask ``(n_query, n_prefix + n_query)``: query t sees the whole prefix and the tokens
    ``t - window + 1 .. t`` of the sequence (True = attend)."""
    t = torch.arange(n_query, device=device)
    dist = t[:, None] - t[None, :]
    seq = (dist >= 0) & (dist < window)
    pre = torch.ones(n_query, n_prefix, dtype=torch.bool, device=device)
    return torch.cat([pre, seq], dim=1)


class WindowAttention(nn.Module):
    """Multi-head attention with q/k/v depthwise causal convolutions, through
    ``torch.nn.functional.scaled_dot_product_attention`` with an explicit boolean mask.

    No positional encoding: order comes from the causal convolutions and the mask.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        d = config.width
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.conv = CausalConv(3 * d, config.conv_kernel)
        self.out_proj = nn.Linear(d, d, bias=False)

    def _heads(self, x: Tensor) -> Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.config.heads, self.config.head_dim).transpose(1, 2)

    def forward(self, x: Tensor, prefix: Tensor | None, mask: Tensor) -> Tensor:
        """Attend from every token of ``x`` ``(b, n, d)`` over ``prefix`` ``(b, p, d)`` (unconvolved,
        always visible through ``mask``) followed by ``x``; ``mask`` is ``(n, p + n)``.

        Returns:
            ``(b, n, d)``.
        """
        qkv, _ = self.conv(self.qkv(x))
        q, k, v = qkv.chunk(3, dim=-1)
        if prefix is not None and prefix.shape[1]:
            _, pk, pv = self.qkv(prefix).chunk(3, dim=-1)
            k, v = torch.cat([pk, k], dim=1), torch.cat([pv, v], dim=1)
        y = F.scaled_dot_product_attention(self._heads(q), self._heads(k), self._heads(v), attn_mask=mask)
        b, _, n, _ = y.shape
        return self.out_proj(y.transpose(1, 2).reshape(b, n, self.config.width))


class FeedForward(nn.Module):
    """Pre-norm SwiGLU feed-forward layer ``(b, n, d) -> (b, n, d)``."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d, hidden = config.width, config.width * config.mlp_expansion
        self.up = nn.Linear(d, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        a, g = self.up(x).chunk(2, dim=-1)
        return self.down(F.silu(g) * a)
