"""The plain chunked memory update: a token loop with autograd, the oracle of :mod:`.scan`.

Slow on purpose and written to be read against the paper (Behrouz et al. 2024, eq. 12-15 and
section 3.2; docs/titans.md sections 1-2 and the oracles of section 5): every token's gradient of
``||M(k_t) - v_t||^2`` is taken by autograd at the weights of its chunk's start, optionally clamped
to a norm, then

    S_t = eta_t * S_{t-1} - theta_t * grad_t          (momentum, eq. 13)
    M_t = (1 - alpha_t) * M_{t-1} + S_t               (forgetting gate, eq. 13)

and each token reads ``M_t(q_t)`` (``read="token"``) or ``M(q_t)`` with the weights of its chunk's
start (``read="chunk"``). The fast scan (:func:`titans_agent.core.scan.memory_scan`) must equal this
in float64, whatever its chunked, factored or in-place paths do.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from titans_agent.core.scan import mlp_forward

__all__ = ["reference_scan"]


def reference_scan(
    weights: tuple[Tensor, ...],
    momentum: tuple[Tensor, ...],
    k: Tensor,
    v: Tensor,
    q: Tensor,
    theta: Tensor,
    eta: Tensor,
    alpha: Tensor,
    chunk: int,
    *,
    clamp: float | None = None,
    activation: str = "gelu",
    read: str = "token",
) -> tuple[Tensor, tuple[Tensor, ...], tuple[Tensor, ...], tuple[Tensor, ...]]:
    """Run ``N`` memories over ``n`` tokens, one token at a time.

    Args:
        weights: per layer ``(N, out, in)``: the memory MLP's weights at a chunk start.
        momentum: the momentum at the same point, same shapes.
        k, v, q: ``(N, n, d)`` keys, values and queries.
        theta, eta, alpha: ``(N, n)`` per-token learning rate, momentum decay and forgetting gate.
        chunk: tokens per chunk (gradients of a chunk are all taken at its starting weights).
        clamp: clamp each token's gradient to this norm (over all layers); None: no clamp.
        activation: the MLP's activation between layers.
        read: "token" (the memory as of each token) or "chunk" (as of its chunk's start).

    Returns:
        ``(reads (N, n, d), weights and momentum at the last chunk start, final weights)``.
    """
    n_seq, n, _ = k.shape
    w = [t.clone() for t in weights]
    s = [t.clone() for t in momentum]
    reads = torch.zeros_like(q)
    at_chunk: tuple[list[Tensor], list[Tensor]] = ([t.clone() for t in w], [t.clone() for t in s])
    start = [t.clone() for t in w]
    for t in range(n):
        if t % chunk == 0:
            start = [x.clone() for x in w]
            at_chunk = ([x.clone() for x in w], [x.clone() for x in s])
        if read == "chunk":
            reads[:, t] = mlp_forward(tuple(start), q[:, t][:, None], activation)[:, 0]
        for j in range(n_seq):
            params = [x[j].detach().clone().requires_grad_() for x in start]
            out = mlp_forward(tuple(params), k[j, t][None], activation)[0]
            grads = torch.autograd.grad(((out - v[j, t]) ** 2).sum(), params)
            scale = 1.0
            if clamp is not None:
                norm = math.sqrt(sum(float((g * g).sum()) for g in grads))
                scale = min(1.0, clamp / norm) if norm > 0 else 1.0
            for li, g in enumerate(grads):
                s[li][j] = eta[j, t] * s[li][j] - theta[j, t] * scale * g
                w[li][j] = (1 - alpha[j, t]) * w[li][j] + s[li][j]
        if read == "token":
            reads[:, t] = mlp_forward(tuple(w), q[:, t][:, None], activation)[:, 0]
    if n % chunk == 0:
        at_chunk = ([x.clone() for x in w], [x.clone() for x in s])
    return reads, tuple(at_chunk[0]), tuple(at_chunk[1]), tuple(w)
