"""A stream of short scan calls that carries the momentum as its rank-c factors
(``keep_factors``, :class:`titans_agent.core.scan.MomentumFactors`): the same reads and state as
one call, the factors only where they are exact, and every fallback (autograd, rejection,
an unfinished chunk, bad shapes)."""

from __future__ import annotations

import math

import pytest
import torch

from titans_agent.core.scan import MomentumFactors, memory_scan
from titans_agent.models.config import ModelConfig
from titans_agent.models.layers import NeuralMemoryLayer

F64 = torch.float64


def _inputs(n_seq: int, n: int, e: int, depth: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    k = torch.nn.functional.normalize(torch.randn(n_seq, n, e, generator=g, dtype=F64), dim=-1)
    q = torch.nn.functional.normalize(torch.randn(n_seq, n, e, generator=g, dtype=F64), dim=-1)
    v = torch.randn(n_seq, n, e, generator=g, dtype=F64)
    theta = 0.5 * torch.rand(n_seq, n, generator=g, dtype=F64)
    eta = 0.3 + 0.7 * torch.rand(n_seq, n, generator=g, dtype=F64)
    alpha = 0.2 * torch.rand(n_seq, n, generator=g, dtype=F64)
    h = 2 * e
    shapes = [(e, e)] if depth == 1 else [(h, e)] + [(h, h)] * (depth - 2) + [(e, h)]
    ws = tuple(torch.randn(n_seq, o, i, generator=g, dtype=F64) / math.sqrt(i) for o, i in shapes)
    ss = tuple(0.1 * torch.randn(n_seq, o, i, generator=g, dtype=F64) for o, i in shapes)
    return ws, ss, k, v, q, theta, eta, alpha


def _stream(ws, ss, k, v, q, theta, eta, alpha, step: int, **kw):
    """The inputs in calls of ``step`` tokens, each passing ``next_momentum`` on; the reads of all
    calls, the last result and how many calls ended with the momentum factored."""
    reads, factored, res = [], 0, None
    w, s = ws, ss
    for lo in range(0, k.shape[1], step):
        sl = slice(lo, lo + step)
        res = memory_scan(w, s, k[:, sl], v[:, sl], theta[:, sl], eta[:, sl], alpha[:, sl], q[:, sl],
                          chunk_size=4, keep_factors=True, **kw)  # fmt: skip
        w, s = res.weights, res.next_momentum
        factored += isinstance(s, MomentumFactors)
        reads.append(res.reads)
    return torch.cat(reads, dim=1), res, factored


def _layer_stream(layer: NeuralMemoryLayer, x: torch.Tensor, step: int, give_up: bool = False):
    """The layer over ``x`` in calls of ``step`` tokens, each given the previous call's state (given
    up with ``give_up``): the calls' outputs joined and the state after each call."""
    outs, states, state = [], [], None
    for lo in range(0, x.shape[1], step):
        out, state = layer(x[:, lo : lo + step], state, overwrite_state=give_up and state is not None)
        outs.append(out)
        states.append(state)
    return torch.cat(outs, dim=1), states


@pytest.mark.parametrize("read", ["token", "chunk"])
@pytest.mark.parametrize(("depth", "step"), [(1, 4), (2, 4), (2, 8), (3, 4)])
def test_a_stream_that_carries_the_factors_equals_one_call(read: str, depth: int, step: int) -> None:
    """Chunks whose momentum decay m_b flushes to 0 (an eta of 0 in every chunk) end a call with
    the momentum as factors; the next call reads them: reads and final state equal one call's."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(3, 24, 4, depth)
    eta = eta.clone()
    eta[:, 2::4] = 0.0  # m_b = 0 in every chunk; f_t still carries S_0 through the first tokens
    with torch.no_grad():
        whole = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4, read=read)
        reads, last, factored = _stream(ws, ss, k, v, q, theta, eta, alpha, step, read=read)
    assert factored == 24 // step  # every call ended factored
    assert isinstance(last.momentum_factors, MomentumFactors) and last.momentum == ()
    torch.testing.assert_close(reads, whole.reads, rtol=1e-10, atol=1e-10)
    for a, b in zip((*last.weights, *last.momentum_factors.dense()), (*whole.weights, *whole.momentum)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    for y, a in zip(last.momentum_factors.ys, last.momentum_factors.acts):
        assert y.shape[:2] == a.shape[:2] == (3, 4)


def test_factors_are_kept_only_where_they_are_exact() -> None:
    """m_b > 0 for one memory, an unfinished chunk at the end, or autograd: the matrices, as before."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(2, 8, 4, 2)
    eta = eta.clone()
    eta[:, 2::4] = 0.0
    with torch.no_grad():
        ok = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4, keep_factors=True)
        assert ok.momentum_factors is not None
        mixed_eta = eta.clone()
        mixed_eta[1, 6] = 0.5  # memory 1's last chunk keeps part of its momentum
        mixed = memory_scan(ws, ss, k, v, theta, mixed_eta, alpha, q, chunk_size=4, keep_factors=True)
        assert mixed.momentum_factors is None and len(mixed.momentum) == 2
        tail = memory_scan(ws, ss, k[:, :6], v[:, :6], theta[:, :6], eta[:, :6], alpha[:, :6], q[:, :6],
                           chunk_size=4, keep_factors=True)  # fmt: skip
        assert tail.momentum_factors is None and tail.tail_weights is not None
    grad_ws = tuple(w.clone().requires_grad_() for w in ws)
    functional = memory_scan(grad_ws, ss, k, v, theta, eta, alpha, q, chunk_size=4, keep_factors=True)
    assert functional.momentum_factors is None
    torch.testing.assert_close(functional.momentum[0].detach(), ok.momentum_factors.dense()[0], rtol=1e-10, atol=1e-10)


def test_factors_given_to_autograd_rejection_and_an_unfinished_chunk() -> None:
    """Factors passed in are turned into matrices where the call cannot use them (autograd), are
    checked by ``reject_nonfinite``, and are written back before an unfinished chunk's reads."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(2, 14, 4, 2)
    eta = eta.clone()
    eta[:, 2::4] = 0.0
    with torch.no_grad():
        whole = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4, max_grad_norm=3.0)
        first = memory_scan(ws, ss, k[:, :4], v[:, :4], theta[:, :4], eta[:, :4], alpha[:, :4], q[:, :4],
                            chunk_size=4, max_grad_norm=3.0, keep_factors=True)  # fmt: skip
    carry = first.next_momentum
    assert isinstance(carry, MomentumFactors)
    rest = [t[:, 4:] for t in (k, v, theta, eta, alpha, q)]
    with torch.no_grad():  # 10 more tokens: 2 full chunks and an unfinished one
        second = memory_scan(first.weights, carry, *rest[:5], rest[5], chunk_size=4, max_grad_norm=3.0)
        checked = memory_scan(first.weights, carry, *rest[:5], rest[5], chunk_size=4, max_grad_norm=3.0,
                              reject_nonfinite=True)  # fmt: skip
    grad_w = tuple(w.clone().requires_grad_() for w in first.weights)
    with_grad = memory_scan(grad_w, carry, *rest[:5], rest[5], chunk_size=4, max_grad_norm=3.0)
    assert whole.reads is not None
    for res in (second, checked, with_grad):
        assert res.reads is not None and res.tail_weights is not None
        torch.testing.assert_close(res.reads.detach(), whole.reads[:, 4:], rtol=1e-10, atol=1e-10)
        for a, b in zip((*res.weights, *res.momentum, *res.tail_weights),
                        (*whole.weights, *whole.momentum, *whole.tail_weights)):  # fmt: skip
            torch.testing.assert_close(a.detach(), b, rtol=1e-10, atol=1e-10)
    assert int(checked.rejected.sum()) == 0
    bad = MomentumFactors(tuple(torch.full_like(y, math.nan) for y in carry.ys), carry.acts)
    with torch.no_grad():
        refused = memory_scan(first.weights, bad, *rest[:5], rest[5], chunk_size=4, max_grad_norm=3.0,
                              reject_nonfinite=True)  # fmt: skip
    assert int(refused.rejected.sum()) > 0  # a NaN momentum is never written into the state
    assert all(bool(torch.isfinite(w).all()) for w in refused.weights)


def test_factors_of_the_wrong_shape_are_refused() -> None:
    ws, ss, k, v, q, theta, eta, alpha = _inputs(2, 8, 4, 2)
    y = torch.zeros(2, 4, 8, dtype=F64)
    a = torch.zeros(2, 4, 4, dtype=F64)
    with pytest.raises(ValueError, match="factors"):
        memory_scan(ws, MomentumFactors((y, y), (a, a)), k, v, theta, eta, alpha, q, chunk_size=4)
    with pytest.raises(ValueError, match="number of layers"):
        memory_scan(ws, MomentumFactors((y,), (a,)), k, v, theta, eta, alpha, q, chunk_size=4)
    y2 = torch.zeros(2, 4, 4, dtype=F64)
    with pytest.raises(ValueError, match="2 ys but 1 acts"):
        memory_scan(ws, MomentumFactors((y, y2), (a,)), k, v, theta, eta, alpha, q, chunk_size=4)
    with pytest.raises(ValueError, match="2 ys but 3 acts"):
        memory_scan(ws, MomentumFactors((y, y2), (a, a, a)), k, v, theta, eta, alpha, q, chunk_size=4)


@pytest.mark.parametrize("rows", [0, 3, 4, 8])
def test_factors_from_another_chunk_size_equal_their_matrices(rows: int) -> None:
    """Factors whose row count is not this call's chunk size (a stream whose chunk size changes,
    or factors made by hand, 0 rows included) give what their matrices give."""
    ws, _, k, v, q, theta, eta, alpha = _inputs(2, 16, 4, 2)
    g = torch.Generator().manual_seed(5)
    carry = MomentumFactors(
        tuple(0.1 * torch.randn(2, rows, w.shape[1], generator=g, dtype=F64) for w in ws),
        tuple(torch.randn(2, rows, w.shape[2], generator=g, dtype=F64) for w in ws),
    )
    eta = eta.clone()
    eta[:, 2::4] = 0.0
    with torch.no_grad():
        dense = memory_scan(ws, carry.dense(), k, v, theta, eta, alpha, q, chunk_size=4, keep_factors=True)
        got = memory_scan(ws, carry, k, v, theta, eta, alpha, q, chunk_size=4, keep_factors=True)
    assert got.reads is not None and dense.reads is not None and got.momentum_factors is not None
    assert dense.momentum_factors is not None
    torch.testing.assert_close(got.reads, dense.reads, rtol=1e-10, atol=1e-10)
    for a, b in zip((*got.weights, *got.momentum_factors.dense()), (*dense.weights, *dense.momentum_factors.dense())):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_a_stream_whose_chunk_size_changes_equals_its_matrices() -> None:
    """Factors kept by a call of chunk 4, passed to a call of chunk 8: the same as passing their
    matrices (the breaker's case: it had crashed in the update)."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(1, 16, 4, 2)
    eta = eta.clone()
    eta[:, 1::2] = 0.0
    with torch.no_grad():
        first = memory_scan(ws, ss, k[:, :4], v[:, :4], theta[:, :4], eta[:, :4], alpha[:, :4], q[:, :4],
                            chunk_size=4, keep_factors=True)  # fmt: skip
        carry = first.next_momentum
        assert isinstance(carry, MomentumFactors)
        rest = [t[:, 4:] for t in (k, v, theta, eta, alpha, q)]
        got = memory_scan(first.weights, carry, *rest, chunk_size=8)
        want = memory_scan(first.weights, carry.dense(), *rest, chunk_size=8)
    assert got.reads is not None and want.reads is not None
    torch.testing.assert_close(got.reads, want.reads, rtol=1e-10, atol=1e-10)
    for a, b in zip((*got.weights, *got.momentum), (*want.weights, *want.momentum)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("memory_read", ["token", "chunk"])
def test_the_layer_streams_with_factored_momentum_and_equals_one_call(memory_read: str) -> None:
    """The models' layer passes the factors from call to call; 8-token calls equal one call, and
    ``dense_momentum`` gives the matrices whichever form the state holds. float32: a momentum
    decay of 1e-5 over a 4-token chunk (1e-20) flushes to 0 there (below 2^-60), not in float64."""
    cfg = ModelConfig(width=8, heads=2, chunk=4, segment=8, memory_depth=2, memory_read=memory_read,
                      eta_init=1e-5)  # fmt: skip
    torch.manual_seed(0)
    layer = NeuralMemoryLayer(cfg)
    x = torch.randn(2, 24, 8)
    with torch.no_grad():
        whole, end = layer(x)
        out, states = _layer_stream(layer, x, 8)
    state = states[-1]
    assert sum(isinstance(s.momentum, MomentumFactors) for s in states) == 3
    torch.testing.assert_close(out, whole, rtol=1e-5, atol=1e-5)
    for a, b in zip((*state.weights, *state.dense_momentum()), (*end.weights, *end.dense_momentum())):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert state.dense_momentum()[0].shape == state.weights[0].shape


def test_the_layer_overwrites_a_state_given_up_but_never_its_parameters() -> None:
    """``overwrite_state``: the same outputs and state as the copying calls, the weights updated
    where they lay; a state made by ``init_state`` (views of M_0) is copied, not written."""
    cfg = ModelConfig(width=8, heads=1, chunk=4, segment=8, memory_depth=2, eta_init=1e-5)
    torch.manual_seed(1)
    layer = NeuralMemoryLayer(cfg)
    x = torch.randn(1, 24, 8)
    m0 = [p.detach().clone() for p in layer.initial_weights()]
    with torch.no_grad():
        kept, given = None, layer.init_state(1)
        for lo in range(0, 24, 8):
            want, kept = layer(x[:, lo : lo + 8], kept)
            where = given.carried_weights[0].data_ptr()
            got, given = layer(x[:, lo : lo + 8], given, overwrite_state=True)
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            if lo:  # the first call's state was init_state's: copied
                assert given.carried_weights[0].data_ptr() == where
    assert kept is not None
    for a, b in zip(given.weights, kept.weights):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    for p, before in zip(layer.initial_weights(), m0):
        assert torch.equal(p, before)
