"""Building blocks of the Titans models: the batched multi-head neural memory layer (section 4.4
block), sliding-window attention with a persistent prefix, and the feed-forward layer.

Shapes: ``b`` batch, ``n`` tokens, ``d`` width, ``h`` heads, ``e = d / h`` head width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from titans_agent.models.config import ModelConfig

__all__ = ["CausalConv", "FeedForward", "LayerMemoryState", "NeuralMemoryLayer", "WindowAttention", "window_mask"]

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
        pad = self.kernel - 1
        if cache is None:
            cache = x.new_zeros(x.shape[0], pad, x.shape[2])
        full = torch.cat([cache, x], dim=1)  # (b, pad + n, d)
        y = self.conv(full.transpose(1, 2)).transpose(1, 2)
        at = x.shape[1] if cache_at is None else cache_at
        return y, full[:, at : at + pad]


@dataclass(frozen=True)
class LayerMemoryState:
    """Test-time state of a :class:`NeuralMemoryLayer` between calls.

    Attributes:
        weights: the linear memory per head at the start of the current chunk, ``(b, h, e, e)``;
            a read is ``M q``.
        momentum: the momentum S at the same point, same shape.
        conv: the convolution caches of the q, k, v streams at the same point, each ``(b, kernel - 1, d)``.
        pending: the inputs ``(b, r, d)``, ``r < chunk``, written since the chunk started; the next
            call completes their chunk from the chunk start, so any split equals one call.
    """

    weights: Tensor
    momentum: Tensor
    conv: tuple[Tensor, Tensor, Tensor]
    pending: Tensor


def _decay_matrix(log_cum: Tensor) -> Tensor:
    """``A[..., t, k] = exp(L_t - L_k)`` for ``k <= t``, else 0, from cumulative logs ``(..., c)``.

    Every entry is a product of factors in (0, 1], so nothing overflows (log space, titans-notes 2).
    """
    c = log_cum.shape[-1]
    diff = log_cum[..., :, None] - log_cum[..., None, :]
    lower = torch.ones(c, c, dtype=torch.bool, device=log_cum.device).tril()
    return torch.exp(diff.masked_fill(~lower, -math.inf))


class NeuralMemoryLayer(nn.Module):
    """Multi-head Titans long-term memory over sequences ``(b, n, d)`` (paper sections 3 and 4.4).

    Block: q/k/v projections, each followed by a depthwise causal convolution and SiLU; q and k
    L2-normalised per head; per-token, per-head data-dependent gates theta (inner learning rate),
    eta (momentum decay), alpha (forgetting); a linear memory per head ``M_h`` ``(e, e)`` whose
    initial value M_0 is a learned parameter; per-head output normalisation and a linear
    (sigmoid) gate; an output projection.

    The update is eq. 13-14 with the loss ``||M k_t - v_t||^2`` (eq. 12), parallel in chunks of
    ``config.chunk`` tokens (section 3.2): inside a chunk every gradient is taken at the weights of
    the chunk start, and the read at token t uses the memory as of token t (token-level momentum
    and decay, titans-notes section 2)::

        Y = diag(beta) Q M_0^T + diag(f) Q S_0^T - (tril(Q K^T) * G) U,   U_i = 2 (M_0 k_i - v_i)

    with every cumulative product in log space. Gradients of all outer parameters flow through it.
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
        self.M0 = nn.Parameter(torch.zeros(h, e, e))  # learnable initial memory, one per head
        self.out_norm = nn.RMSNorm(e, eps=_EPS)
        self.out_gate = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d, bias=False)

    def init_state(self, batch: int) -> LayerMemoryState:
        """The state before any token: M_0 for every sequence, zero momentum, empty conv caches."""
        c = self.config
        w = self.M0.unsqueeze(0).expand(batch, -1, -1, -1)
        pad = self.M0.new_zeros(batch, c.conv_kernel - 1, c.width)
        return LayerMemoryState(w, torch.zeros_like(w), (pad, pad, pad), self.M0.new_zeros(batch, 0, c.width))

    def _heads(self, x: Tensor) -> Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.config.heads, self.config.head_dim).transpose(1, 2)  # (b, h, n, e)

    def queries(self, x: Tensor, cache: Tensor | None, cache_at: int | None = None) -> tuple[Tensor, Tensor]:
        """Per-head normalised queries ``(b, h, n, e)`` of ``x`` ``(b, n, d)`` and the conv cache."""
        q, cache = self.q_conv(self.q_proj(x), cache, cache_at)
        return F.normalize(self._heads(F.silu(q)), dim=-1), cache

    def read_static(self, weights: Tensor, q: Tensor) -> Tensor:
        """``M* q`` ``(b, h, n, e)`` with fixed weights ``(b, h, e, e)``: a read with no update (eq. 15)."""
        return q @ weights.transpose(-1, -2)

    def output(self, y: Tensor, x: Tensor) -> Tensor:
        """Output normalisation, linear gate from ``x`` ``(b, n, d)`` and projection of ``y`` ``(b, h, n, e)``."""
        b, _, n, _ = y.shape
        y = self.out_norm(y).transpose(1, 2).reshape(b, n, self.config.width)
        return self.out_proj(y * torch.sigmoid(self.out_gate(x)))

    def _chunk(
        self, m0: Tensor, s0: Tensor, q: Tensor, k: Tensor, v: Tensor, theta: Tensor, eta: Tensor, alpha: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One chunk: q, k, v ``(b, h, c, e)``, gates ``(b, h, c)``; returns reads ``(b, h, c, e)`` as of
        each token and the weights and momentum at the chunk's end."""
        err = k @ m0.transpose(-1, -2) - v  # (b, h, c, e): M_0 k_i - v_i
        # ||grad||_F = 2 ||err|| ||k|| = 2 ||err|| (k is unit): clamp per token (titans-notes 6).
        norm = 2.0 * err.norm(dim=-1).clamp_min(_EPS)
        u = 2.0 * err * torch.clamp(self.config.max_grad_norm / norm, max=1.0).unsqueeze(-1)
        log_keep = torch.cumsum(torch.log1p(-alpha), dim=-1)  # log beta_t
        log_eta = torch.cumsum(torch.log(eta), dim=-1)  # log m_t
        decay = _decay_matrix(log_keep)  # beta_t / beta_k, k <= t
        mom = _decay_matrix(log_eta)  # prod_{j=i+1..k} eta_j, i <= k
        big_g = (decay @ mom) * theta.unsqueeze(-2)  # G[t, i] (b, h, c, c), zero above the diagonal
        beta = torch.exp(log_keep)
        f = (decay @ torch.exp(log_eta).unsqueeze(-1)).squeeze(-1)  # (b, h, c)
        reads = (
            beta.unsqueeze(-1) * (q @ m0.transpose(-1, -2))
            + f.unsqueeze(-1) * (q @ s0.transpose(-1, -2))
            - ((q @ k.transpose(-1, -2)) * big_g) @ u
        )
        g_end = big_g[..., -1, :].unsqueeze(-1)  # (b, h, c, 1)
        n_end = (theta * mom[..., -1, :]).unsqueeze(-1)
        m_end = beta[..., -1:, None] * m0 + f[..., -1:, None] * s0 - (u * g_end).transpose(-1, -2) @ k
        s_end = torch.exp(log_eta[..., -1:, None]) * s0 - (u * n_end).transpose(-1, -2) @ k
        return reads, m_end, s_end

    def forward(
        self, x: Tensor, state: LayerMemoryState | None = None, gate_input: Tensor | None = None
    ) -> tuple[Tensor, LayerMemoryState]:
        """Write every token of ``x`` ``(b, n, d)`` into the memory and read, at each token, the
        memory as of that token.

        Args:
            x: the inputs; they give the keys, values, queries and gates.
            state: the state to continue from (None: :meth:`init_state`). Splitting a sequence
                anywhere and carrying the state equals one call.
            gate_input: what the output gate is computed from (default ``x``).

        Returns:
            The outputs ``(b, n, d)`` and the state after the last token.
        """
        b, n, _ = x.shape
        c = self.config
        if state is None:
            state = self.init_state(b)
        r = state.pending.shape[1]
        xs = torch.cat([state.pending, x], dim=1) if r else x  # from the current chunk's start
        n = r + n
        boundary = (n // c.chunk) * c.chunk  # where the next call's chunk starts
        x_gate = x if gate_input is None else gate_input
        q, qc = self.queries(xs, state.conv[0], boundary)
        k, kc = self.k_conv(self.k_proj(xs), state.conv[1], boundary)
        v, vc = self.v_conv(self.v_proj(xs), state.conv[2], boundary)
        k = F.normalize(self._heads(F.silu(k)), dim=-1)
        v = self._heads(F.silu(v))
        z = self.gate_proj(xs).view(b, n, 3, c.heads).permute(2, 0, 3, 1)  # (3, b, h, n)
        theta = c.theta_max * torch.sigmoid(z[0])
        eta = torch.sigmoid(z[1]).clamp_min(1e-6)
        alpha = torch.sigmoid(z[2]).clamp_max(1.0 - 1e-6)
        m, s = state.weights, state.momentum
        reads = []
        for s0 in range(0, n, c.chunk):
            sl = slice(s0, min(s0 + c.chunk, n))
            got, m2, s2 = self._chunk(
                m, s, q[:, :, sl], k[:, :, sl], v[:, :, sl], theta[..., sl], eta[..., sl], alpha[..., sl]
            )
            reads.append(got)
            if sl.stop <= boundary:  # a finished chunk moves the state; an unfinished one stays pending
                m, s = m2, s2
        y = torch.cat(reads, dim=2)[:, :, r:]  # the pending tokens' reads were returned before
        out = self.output(y, x_gate)
        return out, LayerMemoryState(m, s, (qc, kc, vc), xs[:, boundary:])


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
