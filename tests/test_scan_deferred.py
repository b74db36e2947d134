"""A stream of scan calls that defers each call's last weight update to the next call
(``defer_update``, ``ScanResult.next_state``, :class:`titans_agent.core.scan.MomentumFactors`
``deferred``): the same reads and state as one call, the caller's tensors untouched, and every
place where a deferred update cannot be used applies it first."""

from __future__ import annotations

import math

import pytest
import torch
from test_scan_stream import _inputs, _layer_stream

from titans_agent.core.kernels import minus_product_
from titans_agent.core.scan import MomentumFactors, memory_scan
from titans_agent.models.architectures import build_model
from titans_agent.models.config import ModelConfig
from titans_agent.models.layers import NeuralMemoryLayer

F64 = torch.float64


def _deferring_stream(ws, ss, k, v, q, theta, eta, alpha, step: int, given_up: bool = False, **kw):
    """Calls of ``step`` tokens passing ``next_state`` on; the reads, the last result, how many
    calls deferred their last update, and whether any call changed a tensor it was given."""
    reads, deferred, changed, res = [], 0, False, None
    w, s = ws, ss
    for lo in range(0, k.shape[1], step):
        sl = slice(lo, lo + step)
        given = [t.clone() for t in (*w, *(s.tensors() if isinstance(s, MomentumFactors) else s))]
        res = memory_scan(w, s, k[:, sl], v[:, sl], theta[:, sl], eta[:, sl], alpha[:, sl], q[:, sl], chunk_size=4,
                          keep_factors=True, defer_update=True, overwrite_state=given_up, **kw)  # fmt: skip
        now = [*w, *(s.tensors() if isinstance(s, MomentumFactors) else s)]
        changed |= any(not torch.equal(a, b) for a, b in zip(given, now))
        w, s = res.next_state
        deferred += isinstance(s, MomentumFactors) and s.deferred is not None
        reads.append(res.reads)
    return torch.cat(reads, dim=1), res, deferred, changed


@pytest.mark.parametrize("read", ["token", "chunk"])
@pytest.mark.parametrize(("depth", "step"), [(1, 4), (2, 4), (2, 8), (3, 4)])
@pytest.mark.parametrize("given_up", [False, True])
def test_a_stream_that_defers_its_updates_equals_one_call(read: str, depth: int, step: int, given_up: bool) -> None:
    """Every call but the first (whose momentum is a matrix, so its weights were not held ahead)
    leaves its last update to the next; reads, weights and momentum equal one call's, and a caller
    that keeps its state finds every tensor it passed unchanged."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(3, 24, 4, depth)
    eta = eta.clone()
    eta[:, 2::4] = 0.0  # m_b = 0 in every chunk: the momentum factored after each
    with torch.no_grad():
        whole = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4, read=read)
        reads, last, deferred, changed = _deferring_stream(
            ws, ss, k, v, q, theta, eta, alpha, step, given_up, read=read
        )
    calls = 24 // step
    assert deferred == (calls if step > 4 else calls - 1)  # a 2-chunk first call holds its 2nd ahead
    assert not changed or given_up
    assert last.momentum_factors is not None and last.momentum_factors.deferred is not None
    torch.testing.assert_close(reads, whole.reads, rtol=1e-10, atol=1e-10)
    for a, b in zip((*last.weights, *last.momentum_factors.dense()), (*whole.weights, *whole.momentum)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    # the weights the next call continues from lack the deferred update; settle() applies it
    assert not torch.allclose(last.next_weights[0], whole.weights[0])
    for a, b in zip(last.momentum_factors.settle(last.next_weights), whole.weights):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_weights_and_next_momentum_stay_a_matching_pair() -> None:
    """``ScanResult.weights`` applies the deferred update and ``next_momentum`` leaves it out, so
    a caller passing ``(weights, next_momentum)`` on, as before ``defer_update``, gets one call's
    result too (the update is not applied twice)."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(2, 16, 4, 2)
    eta = eta.clone()
    eta[:, 2::4] = 0.0
    with torch.no_grad():
        whole = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4)
        w, s, reads = ws, ss, []
        for lo in range(0, 16, 4):
            sl = slice(lo, lo + 4)
            res = memory_scan(w, s, k[:, sl], v[:, sl], theta[:, sl], eta[:, sl], alpha[:, sl], q[:, sl],
                              chunk_size=4, keep_factors=True, defer_update=True)  # fmt: skip
            carried = res.next_momentum
            assert not isinstance(carried, MomentumFactors) or carried.deferred is None
            w, s = res.weights, carried
            reads.append(res.reads)
    torch.testing.assert_close(torch.cat(reads, dim=1), whole.reads, rtol=1e-10, atol=1e-10)
    for a, b in zip(w, whole.weights):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_a_deferred_update_is_applied_where_a_call_cannot_carry_it() -> None:
    """``next_state`` passed to a call that cannot keep the update deferred: autograd, rejection,
    another chunk size, a call shorter than a chunk, a capturable call, one without defer_update;
    each equals the call given the settled weights and the momentum alone."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(2, 20, 4, 2)
    eta = eta.clone()
    eta[:, 2::4] = 0.0
    kw = {"max_grad_norm": 3.0}
    with torch.no_grad():
        first = memory_scan(ws, ss, k[:, :8], v[:, :8], theta[:, :8], eta[:, :8], alpha[:, :8], q[:, :8],
                            chunk_size=4, keep_factors=True, defer_update=True, **kw)  # fmt: skip
    w, carry = first.next_state
    assert isinstance(carry, MomentumFactors) and carry.deferred is not None
    settled, plain = carry.settle(w), carry.momentum_only()
    rest = [t[:, 8:] for t in (k, v, theta, eta, alpha, q)]
    short = [t[:, 8:11] for t in (k, v, theta, eta, alpha, q)]
    cases = {
        "autograd": (rest, {"chunk_size": 4}, True),
        "rejection": (rest, {"chunk_size": 4, "reject_nonfinite": True}, False),
        "chunk 8": (rest, {"chunk_size": 8}, False),
        "shorter than a chunk": (short, {"chunk_size": 4}, False),
        "capturable": (rest, {"chunk_size": 4, "capturable": True}, False),
        "no defer_update": (rest, {"chunk_size": 4, "keep_factors": True}, False),
    }
    for name, (inputs, extra, grad) in cases.items():
        given_w = tuple(t.clone().requires_grad_() for t in w) if grad else w
        with torch.set_grad_enabled(grad):
            got = memory_scan(given_w, carry, *inputs, **kw, **extra)
            want = memory_scan(settled, plain, *inputs, **kw, **extra)
        assert got.reads is not None and want.reads is not None, name
        torch.testing.assert_close(got.reads.detach(), want.reads.detach(), rtol=1e-10, atol=1e-10, msg=name)
        got_m = got.momentum_factors.dense() if got.momentum_factors is not None else got.momentum
        want_m = want.momentum_factors.dense() if want.momentum_factors is not None else want.momentum
        for a, b in zip((*got.weights, *got_m), (*want.weights, *want_m)):
            torch.testing.assert_close(a.detach(), b.detach(), rtol=1e-10, atol=1e-10, msg=name)
        assert got.momentum_factors is None or got.momentum_factors.deferred is None, name


def test_no_update_is_deferred_where_the_weights_were_not_held_ahead() -> None:
    """Strong forgetting (beta_b < 1/16 over a chunk): the lookahead, and so the deferral, is off;
    the call still equals one call."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(2, 16, 4, 2)
    eta = eta.clone()
    eta[:, 2::4] = 0.0
    alpha = torch.full_like(alpha, 0.6)  # 0.4^4 = 0.0256 < 1/16
    with torch.no_grad():
        whole = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4)
        reads, last, deferred, _ = _deferring_stream(ws, ss, k, v, q, theta, eta, alpha, 4)
    assert deferred == 0 and last.momentum_factors is not None
    torch.testing.assert_close(reads, whole.reads, rtol=1e-10, atol=1e-10)
    for a, b in zip(last.weights, whole.weights):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_a_malformed_deferred_update_is_refused() -> None:
    ws, ss, k, v, q, theta, eta, alpha = _inputs(2, 8, 4, 2)
    ys = tuple(torch.zeros(2, 4, w.shape[1], dtype=F64) for w in ws)
    acts = tuple(torch.zeros(2, 4, w.shape[2], dtype=F64) for w in ws)
    decay = torch.ones(2, dtype=F64)
    bad = {
        "both its rows and its decay": MomentumFactors(ys, acts, ys, None),
        "rows shaped like ys": MomentumFactors(ys, acts, (ys[0],), decay),
        "a decay": MomentumFactors(ys, acts, ys, torch.ones(3, dtype=F64)),
    }
    for match, factors in bad.items():
        with pytest.raises(ValueError, match=match):
            memory_scan(ws, factors, k, v, theta, eta, alpha, q, chunk_size=4)


@pytest.mark.parametrize("beta", [0.0, 1.0, 0.37])
@pytest.mark.parametrize("batched", [False, True])
def test_minus_product_scales_in_its_own_pass(beta: float, batched: bool) -> None:
    """``c <- beta c - x^T a``; with beta 0 the old ``c`` is not read (a NaN there is gone)."""
    g = torch.Generator().manual_seed(2)
    c = torch.randn(2, 6, 5, generator=g, dtype=F64)
    xt, a = torch.randn(2, 6, 3, generator=g, dtype=F64), torch.randn(2, 3, 5, generator=g, dtype=F64)
    want = beta * c - xt @ a
    if beta == 0.0:
        c[:, 0, 0] = math.nan
    got = (
        minus_product_(c, xt, a, beta)
        if batched
        else torch.stack([minus_product_(c[j], xt[j], a[j], beta) for j in range(2)])
    )
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert got.data_ptr() == c.data_ptr() or not batched


def test_a_stream_that_refills_one_key_buffer_equals_one_call() -> None:
    """The carried factors hold copies of the keys, not the caller's tensor: a caller that refills
    one chunk-sized buffer between calls (found by a reviewer: errors of 0.77, 6.2 with the deferred
    update) gets one call's result."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(2, 16, 4, 2)
    eta = eta.clone()
    eta[:, 2::4] = 0.0
    kbuf = torch.empty(2, 4, 4, dtype=F64)
    with torch.no_grad():
        whole = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4)
        for defer in (False, True):
            w, s, reads = ws, ss, []
            for lo in range(0, 16, 4):
                sl = slice(lo, lo + 4)
                kbuf.copy_(k[:, sl])
                res = memory_scan(w, s, kbuf, v[:, sl], theta[:, sl], eta[:, sl], alpha[:, sl], q[:, sl],
                                  chunk_size=4, keep_factors=True, defer_update=defer)  # fmt: skip
                w, s = res.next_state
                reads.append(res.reads)
            torch.testing.assert_close(torch.cat(reads, dim=1), whole.reads, rtol=1e-10, atol=1e-10)
            for a, b in zip(res.weights, whole.weights):
                torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_the_deferred_update_is_applied_in_float32_under_autocast() -> None:
    """``ScanResult.weights`` (and ``MomentumFactors.dense``) run when first asked for, perhaps
    under the caller's bfloat16 autocast: they keep the scan's precision (a reviewer saw bfloat16
    weights, 1.6e-2 off)."""
    ws, ss, *rest = _inputs(2, 8, 16, 2)
    ws, ss = tuple(w.float() for w in ws), tuple(s.float() for s in ss)
    k, v, q, theta, eta, alpha = (t.float() for t in rest)
    eta[:, 1::4] = 0.0
    kw = {"chunk_size": 4, "keep_factors": True, "defer_update": True}
    with torch.no_grad():
        want = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            first = memory_scan(ws, ss, *(t[:, :4] for t in (k, v, theta, eta, alpha, q)), **kw)
            last = memory_scan(*first.next_state, *(t[:, 4:] for t in (k, v, theta, eta, alpha, q)), **kw)
            assert last.momentum_factors is not None and last.momentum_factors.deferred is not None
            got = (*last.weights, *last.momentum_factors.dense())
    for a, b in zip(got, (*want.weights, *want.momentum)):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_the_layer_defers_its_last_update_and_its_state_reads_the_memory() -> None:
    """The models' layer streams with the deferred update: 4-token calls (one chunk each, the state
    given up) equal one call; the state's ``weights`` apply the deferred update (its
    ``carried_weights`` lack it) and equal a layer's that defers nothing. MAC, which reads the
    memory before every segment, turns deferral off on its layer."""
    cfg = ModelConfig(width=8, heads=2, chunk=4, segment=8, memory_depth=2, eta_init=1e-5)
    torch.manual_seed(0)
    layer = NeuralMemoryLayer(cfg)
    x = torch.randn(2, 24, 8)
    with torch.no_grad():
        whole, _ = layer(x)
        out, states = _layer_stream(layer, x, 4, give_up=True)
        layer.defer_update = False
        _, plain = layer(x)
    state = states[-1]
    deferred = sum(isinstance(s.momentum, MomentumFactors) and s.momentum.deferred is not None for s in states)
    assert deferred == 5  # every call but the first, whose momentum is a matrix
    torch.testing.assert_close(out, whole, rtol=1e-5, atol=1e-5)
    assert plain.carried_weights is plain.weights
    assert not torch.allclose(state.carried_weights[0], state.weights[0])
    for a, b in zip((*state.weights, *state.dense_momentum()), (*plain.weights, *plain.dense_momentum())):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    mac = build_model(ModelConfig(architecture="mac", width=8, heads=2, chunk=4, segment=8, memory_depth=2))
    mag = build_model(ModelConfig(architecture="mag", width=8, heads=2, chunk=4, segment=8, memory_depth=2))
    assert [b.memory.defer_update for b in mac.blocks] == [False] * len(mac.blocks)
    assert all(b.memory.defer_update for b in mag.blocks)
