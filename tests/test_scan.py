"""The shared chunked scan (titans_agent/core/scan.py): token-level reads for linear and MLP memories,
against the plain autograd token loop of titans_agent/core/scan_reference.py (docs/titans.md
section 5 oracles, float64), plus stability."""

from __future__ import annotations

import math

import pytest
import torch

from titans_agent.config import MemoryConfig
from titans_agent.core.memory import NeuralMemory
from titans_agent.core.scan import memory_scan, segsum
from titans_agent.core.scan_reference import reference_scan
from titans_agent.models.config import ModelConfig
from titans_agent.models.layers import NeuralMemoryLayer

F64 = torch.float64


def _inputs(n_seq: int, n: int, e: int, depth: int, expansion: int = 2, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    k = torch.nn.functional.normalize(torch.randn(n_seq, n, e, generator=g, dtype=F64), dim=-1)
    q = torch.nn.functional.normalize(torch.randn(n_seq, n, e, generator=g, dtype=F64), dim=-1)
    v = torch.randn(n_seq, n, e, generator=g, dtype=F64)
    theta = 0.5 * torch.rand(n_seq, n, generator=g, dtype=F64)
    eta = torch.rand(n_seq, n, generator=g, dtype=F64)
    alpha = 0.2 * torch.rand(n_seq, n, generator=g, dtype=F64)
    h = e * expansion
    shapes = [(e, e)] if depth == 1 else [(h, e)] + [(h, h)] * (depth - 2) + [(e, h)]
    ws = tuple(torch.randn(n_seq, o, i, generator=g, dtype=F64) / math.sqrt(i) for o, i in shapes)
    ss = tuple(0.1 * torch.randn(n_seq, o, i, generator=g, dtype=F64) for o, i in shapes)
    return ws, ss, k, v, q, theta, eta, alpha


_naive = reference_scan  # the plain token loop with autograd (titans_agent/core/scan_reference.py)


@pytest.mark.parametrize(("depth", "chunk"), [(1, 1), (1, 4), (2, 1), (2, 3), (2, 4), (3, 4)])
def test_oracles_1_2_token_level_reads_equal_the_token_loop(depth: int, chunk: int) -> None:
    """Oracle 1 (chunked = token loop with gradients at each chunk's start, for every chunk) and
    oracle 2 (chunk 1 = fully online descent): reads inside a chunk see the memory as of their token."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(3, 12, 4, depth)
    res = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=chunk, max_grad_norm=2.0)
    want_reads, want_w, want_s, _ = _naive(ws, ss, k, v, q, theta, eta, alpha, chunk, clamp=2.0)
    assert want_reads.abs().max() < 100  # the clamp keeps this case in a range where atol means something
    torch.testing.assert_close(res.reads, want_reads, rtol=0, atol=1e-10)
    torch.testing.assert_close(res.weights, want_w, rtol=0, atol=1e-10)
    torch.testing.assert_close(res.momentum, want_s, rtol=0, atol=1e-10)
    assert res.tail_weights is None


@pytest.mark.parametrize(("depth", "chunk", "n"), [(1, 4, 12), (2, 3, 11), (2, 4, 12), (3, 4, 10)])
def test_chunk_reads_see_the_memory_as_of_the_chunk_start(depth: int, chunk: int, n: int) -> None:
    """``read="chunk"`` (titans-pytorch's reads): every query of a chunk reads the weights of the
    chunk's start, the unfinished last chunk included; the update (state, surprise) is the token
    mode's, and gradients flow through the reads to every input."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(3, n, 4, depth)
    want, w_ref, s_ref, _ = _naive(ws, ss, k, v, q, theta, eta, alpha, chunk, clamp=2.0, read="chunk")
    res = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=chunk, max_grad_norm=2.0, read="chunk")
    token = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=chunk, max_grad_norm=2.0)
    assert res.reads is not None and token.reads is not None
    torch.testing.assert_close(res.reads, want, rtol=1e-9, atol=1e-10)
    for got, ref, tok in zip(res.weights + res.momentum, w_ref + s_ref, token.weights + token.momentum):
        torch.testing.assert_close(got, ref, rtol=1e-9, atol=1e-10)
        torch.testing.assert_close(got, tok, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(res.surprise, token.surprise, rtol=1e-12, atol=1e-14)
    assert not torch.allclose(res.reads[:, chunk:], token.reads[:, chunk:])  # the modes do differ
    # float32 without autograd takes the in-place path: same reads and state as float64
    f32 = memory_scan(
        *(
            tuple(t.float() for t in x) if isinstance(x, tuple) else x.float()
            for x in (ws, ss, k, v, theta, eta, alpha, q)
        ),
        chunk_size=chunk,
        max_grad_norm=2.0,
        read="chunk",
    )
    assert f32.reads is not None
    torch.testing.assert_close(f32.reads, want.float(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(f32.weights[0], w_ref[0].float(), rtol=1e-4, atol=1e-5)
    qg = q.clone().requires_grad_()
    kg = k.clone().requires_grad_()
    out = memory_scan(ws, ss, kg, v, theta, eta, alpha, qg, chunk_size=chunk, max_grad_norm=2.0, read="chunk")
    assert out.reads is not None
    (out.reads.sum() + out.weights[0].sum()).backward()
    assert qg.grad is not None and kg.grad is not None
    assert bool(qg.grad.abs().sum() > 0) and bool(kg.grad.abs().sum() > 0)
    with pytest.raises(ValueError, match="read must be"):
        memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=chunk, read="chunks")


def test_chunk_reads_with_per_channel_gates() -> None:
    """Per-channel gates (a matrix memory) with chunk reads: the read is ``M_{t'} q_t``."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(2, 10, 4, 1)
    th, et, al = (t.unsqueeze(-1).expand(-1, -1, 4) for t in (theta, eta, alpha))
    res = memory_scan(ws, ss, k, v, th, et, al, q, chunk_size=4, read="chunk")
    want, _, _, _ = _naive(ws, ss, k, v, q, theta, eta, alpha, 4, read="chunk")
    assert res.reads is not None
    torch.testing.assert_close(res.reads, want, rtol=1e-9, atol=1e-10)


def test_unfinished_chunk_gives_the_tail_weights_and_keeps_the_state_at_its_start() -> None:
    ws, ss, k, v, q, theta, eta, alpha = _inputs(2, 10, 4, 2)
    res = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4, max_grad_norm=0.5)
    reads, w8, s8, w_last = _naive(ws, ss, k, v, q, theta, eta, alpha, 4, clamp=0.5)
    torch.testing.assert_close(res.reads, reads, rtol=0, atol=1e-10)
    torch.testing.assert_close(res.weights, w8, rtol=0, atol=1e-10)  # after token 8: the last chunk start
    torch.testing.assert_close(res.momentum, s8, rtol=0, atol=1e-10)
    torch.testing.assert_close(res.tail_weights, w_last, rtol=0, atol=1e-10)


def test_oracle3_split_at_a_chunk_boundary_equals_one_call() -> None:
    ws, ss, k, v, q, theta, eta, alpha = _inputs(2, 16, 4, 2)
    whole = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4)
    a = memory_scan(ws, ss, k[:, :8], v[:, :8], theta[:, :8], eta[:, :8], alpha[:, :8], q[:, :8], chunk_size=4)
    b = memory_scan(
        a.weights, a.momentum, k[:, 8:], v[:, 8:], theta[:, 8:], eta[:, 8:], alpha[:, 8:], q[:, 8:], chunk_size=4
    )
    torch.testing.assert_close(torch.cat([a.reads, b.reads], 1), whole.reads, rtol=0, atol=0)
    torch.testing.assert_close(b.weights, whole.weights, rtol=0, atol=0)


def test_oracle4_linear_memory_without_momentum_is_the_delta_rule_with_decay() -> None:
    ws, ss, k, v, q, theta, _, alpha = _inputs(1, 9, 4, 1)
    eta = torch.zeros_like(theta)
    ss = tuple(torch.zeros_like(s) for s in ss)
    res = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=1)
    m = ws[0][0].clone()
    for t in range(9):
        m = (1 - alpha[0, t]) * m - theta[0, t] * 2 * torch.outer(m @ k[0, t] - v[0, t], k[0, t])
        torch.testing.assert_close(res.reads[0, t], m @ q[0, t], rtol=0, atol=1e-12)
    torch.testing.assert_close(res.weights[0][0], m, rtol=0, atol=1e-12)


def test_oracle6_gradcheck_through_the_inner_update_of_an_mlp_memory() -> None:
    ws, ss, k, v, q, theta, eta, alpha = _inputs(1, 5, 3, 2, expansion=1)

    def f(w1, w2, kk, vv, qq, th, et, al):
        res = memory_scan((w1, w2), ss, kk, vv, th, et, al, qq, chunk_size=2, max_grad_norm=5.0)
        return res.reads, res.weights[0], res.momentum[1]

    inputs = tuple(t.clone().requires_grad_() for t in (*ws, k, v, q, theta, 0.1 + 0.8 * eta, alpha))
    assert torch.autograd.gradcheck(f, inputs)


def test_zero_gates_give_exact_zeros_not_nan() -> None:
    """eta = 0 and alpha = 1 are log 0 = -inf inside the segment sums: the products are exact zeros."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(1, 8, 4, 2)
    eta = torch.zeros_like(eta)
    alpha = alpha.clone()
    alpha[0, 3] = 1.0
    res = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4)
    want_reads, want_w, _, _ = _naive(ws, ss, k, v, q, theta, eta, alpha, 4)
    torch.testing.assert_close(res.reads, want_reads, rtol=0, atol=1e-10)
    torch.testing.assert_close(res.weights, want_w, rtol=0, atol=1e-10)
    x = torch.tensor([[0.0, -math.inf, -1.0]], dtype=F64)
    assert torch.isfinite(segsum(x).exp()).all()


def test_reject_nonfinite_keeps_the_state_per_memory() -> None:
    ws, ss, k, v, q, theta, eta, alpha = _inputs(2, 8, 4, 2)
    v = v.clone()
    v[1, 5] = math.inf  # poisons sequence 1's second chunk only
    res = memory_scan(ws, ss, k, v, theta, eta, alpha, chunk_size=4, reject_nonfinite=True)
    assert res.rejected.tolist() == [0, 1]
    first = memory_scan(
        tuple(w[1:] for w in ws),
        tuple(s[1:] for s in ss),
        k[1:, :4],
        v[1:, :4],
        theta[1:, :4],
        eta[1:, :4],
        alpha[1:, :4],
        chunk_size=4,
        reject_nonfinite=True,  # the same (functional) path: bit-identical, not just close
    )
    torch.testing.assert_close(tuple(w[1:] for w in res.weights), first.weights, rtol=0, atol=0)
    assert all(torch.isfinite(w).all() for w in res.weights)


def test_bad_shapes_raise() -> None:
    ws, ss, k, v, q, theta, eta, alpha = _inputs(1, 4, 4, 1)
    with pytest.raises(ValueError, match="key width 4"):
        memory_scan((ws[0][:, :3],), (ss[0][:, :3],), k, v, theta, eta, alpha, chunk_size=2)
    with pytest.raises(ValueError, match="layer 0"):
        memory_scan(ws, (ss[0][:, :, :3],), k, v, theta, eta, alpha, chunk_size=2)
    with pytest.raises(ValueError, match="integer"):
        memory_scan(ws, ss, k, v, theta, eta, alpha, chunk_size=2.5)
    with pytest.raises(ValueError, match="gates"):
        memory_scan(ws, ss, k, v, theta[:, :2], eta, alpha, chunk_size=2)
    with pytest.raises(ValueError, match="chunk_size"):
        memory_scan(ws, ss, k, v, theta, eta, alpha, chunk_size=0)
    with pytest.raises(ValueError, match="shape"):
        memory_scan(ws, ss, k, v[:, :2], theta, eta, alpha, chunk_size=2)


def test_100k_random_tokens_through_a_depth_4_memory_stay_finite() -> None:
    """Stability (docs/titans.md section 6): gradient clamp, bounded theta, float32 inner loop."""
    mem = NeuralMemory(MemoryConfig(dim=16, depth=4, expansion=2, chunk_size=64, seed=3))
    g = torch.Generator().manual_seed(0)
    state = mem.init_state()
    rejected = 0
    with torch.no_grad():
        for _ in range(10):
            x = 5.0 * torch.randn(10_000, 16, generator=g)
            res = mem.update(state, x)
            state, rejected = res.state, rejected + res.rejected_chunks
    assert state.step == 100_000
    assert rejected == 0
    assert state.is_finite()
    assert torch.isfinite(mem.read(state, torch.randn(4, 16, generator=g))).all()


def test_inner_loop_stays_float32_under_bf16_autocast() -> None:
    torch.manual_seed(0)
    layer = NeuralMemoryLayer(ModelConfig(width=16, heads=2, chunk=8, segment=8, memory_depth=2))
    x = torch.randn(2, 40, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, state = layer(x)
    assert all(w.dtype == torch.float32 for w in state.weights)
    assert torch.isfinite(out.float()).all()
    # The scan itself ignores autocast: under it, float32 inputs give bit-identical results.
    ws, ss, k, v, q, theta, eta, alpha = (
        t.float() if isinstance(t, torch.Tensor) else tuple(u.float() for u in t) for t in _inputs(2, 16, 8, 2)
    )
    plain = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        auto = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=8)
    assert auto.reads.dtype == torch.float32
    torch.testing.assert_close(auto.reads, plain.reads, rtol=0, atol=0)
    torch.testing.assert_close(auto.weights, plain.weights, rtol=0, atol=0)


@pytest.mark.parametrize("depth", [2, 3])
def test_deep_memory_layer_split_across_calls_equals_one_call(depth: int) -> None:
    cfg = ModelConfig(width=8, heads=2, chunk=4, segment=8, memory_depth=depth)
    torch.manual_seed(0)
    layer = NeuralMemoryLayer(cfg).double()
    x = torch.randn(2, 19, 8, dtype=F64)
    whole, end = layer(x)
    outs, state = [], None
    for lo, hi in [(0, 3), (3, 9), (9, 10), (10, 19)]:
        out, state = layer(x[:, lo:hi], state)
        outs.append(out)
    torch.testing.assert_close(torch.cat(outs, 1), whole, rtol=0, atol=1e-12)
    torch.testing.assert_close(state.weights, end.weights, rtol=0, atol=1e-12)


def test_each_memory_parameter_is_its_own_leaf_optimizer_and_load_state_dict_work() -> None:
    """Per-head/per-layer parameters are separate leaves (not views of one storage, a titans-pytorch
    failure of docs/titans.md section 6): an optimizer step moves each, and load_state_dict
    reproduces the outputs."""
    cfg = ModelConfig(width=8, heads=2, chunk=4, segment=8, memory_depth=3)
    torch.manual_seed(0)
    layer = NeuralMemoryLayer(cfg)
    params = dict(layer.named_parameters())
    assert {"M0", "M0_deep.0", "M0_deep.1"} <= set(params)
    ptrs = [p.untyped_storage().data_ptr() for p in layer.parameters()]
    assert len(ptrs) == len(set(ptrs))
    assert not torch.equal(layer.M0[0], layer.M0[1])  # heads start independent, not tied copies
    before = {n: p.detach().clone() for n, p in params.items()}
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    x = torch.randn(2, 12, 8)
    layer(x)[0].square().sum().backward()
    opt.step()
    for name in ("M0", "M0_deep.0", "M0_deep.1", "gate_proj.weight", "k_proj.weight"):
        assert not torch.equal(before[name], params[name].detach()), name
    moved = params["M0"].detach() - before["M0"]
    assert not torch.allclose(moved[0], moved[1])  # each head gets its own gradient
    again = NeuralMemoryLayer(cfg)
    again.load_state_dict(layer.state_dict())
    torch.testing.assert_close(again(x)[0], layer(x)[0], rtol=0, atol=0)


def test_long_inputs_run_in_blocks_with_the_same_result() -> None:
    """Inputs longer than ``block_tokens`` are processed block by block (flat working memory):
    the outputs, the state and the gradients equal one pass."""
    cfg = ModelConfig(width=8, heads=2, chunk=4, segment=8, memory_depth=2)
    torch.manual_seed(0)
    layer = NeuralMemoryLayer(cfg).double()
    x = torch.randn(2, 45, 8, dtype=F64, requires_grad=True)
    _, start = layer(x[:, :3].detach())  # a pending chunk at the start too
    whole, end = layer(x, start)
    (g_whole,) = torch.autograd.grad(whole.square().sum(), x)
    layer.block_tokens = 8
    blocked, end_b = layer(x, start)
    (g_blocked,) = torch.autograd.grad(blocked.square().sum(), x)
    torch.testing.assert_close(blocked, whole, rtol=0, atol=1e-12)
    torch.testing.assert_close(end_b.weights, end.weights, rtol=0, atol=1e-12)
    torch.testing.assert_close(g_blocked, g_whole, rtol=0, atol=1e-12)


@pytest.mark.parametrize("memory_read", ["token", "chunk"])
def test_blocks_without_autograd_update_in_place_and_leave_the_callers_state(memory_read: str) -> None:
    """Without autograd the blocks after the first update the state in place (the layer owns it):
    same outputs and state as one pass, and the state the caller passed in is never modified."""
    cfg = ModelConfig(width=8, heads=2, chunk=4, segment=8, memory_depth=2, memory_read=memory_read)
    torch.manual_seed(0)
    layer = NeuralMemoryLayer(cfg).double()
    x = torch.randn(2, 45, 8, dtype=F64)
    with torch.no_grad():
        _, start = layer(x[:, :3])
        before = [t.clone() for t in (*start.weights, *start.momentum)]
        whole, end = layer(x, start)
        layer.block_tokens = 8
        blocked, end_b = layer(x, start)
    torch.testing.assert_close(blocked, whole, rtol=0, atol=1e-12)
    torch.testing.assert_close(end_b.weights, end.weights, rtol=0, atol=1e-12)
    torch.testing.assert_close(end_b.momentum, end.momentum, rtol=0, atol=1e-12)
    for got, want in zip((*start.weights, *start.momentum), before):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_overwrite_state_gives_the_same_result_and_is_refused_by_rejection() -> None:
    """``overwrite_state``: the same result as a copy; the inputs may be overwritten, except with
    ``reject_nonfinite`` (whose fallback reruns from them)."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(2, 12, 4, 2)
    want = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4, max_grad_norm=2.0)
    mine_w, mine_s = tuple(t.clone() for t in ws), tuple(t.clone() for t in ss)
    got = memory_scan(mine_w, mine_s, k, v, theta, eta, alpha, q, chunk_size=4, max_grad_norm=2.0, overwrite_state=True)
    assert got.reads is not None and want.reads is not None
    torch.testing.assert_close(got.reads, want.reads, rtol=0, atol=0)
    for a, b in zip(got.weights + got.momentum, want.weights + want.momentum):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert got.weights[0].data_ptr() == mine_w[0].data_ptr()  # updated where it lay: no copy
    w1, _, k1, v1, q1, th1, et1, al1 = _inputs(2, 12, 4, 1)
    shared = w1[0].clone()  # the same tensor as weights and momentum: copied, not corrupted
    one = memory_scan((shared,), (shared,), k1, v1, th1, et1, al1, q1, chunk_size=4, overwrite_state=True)
    ref = memory_scan(w1, w1, k1, v1, th1, et1, al1, q1, chunk_size=4)
    assert one.reads is not None and ref.reads is not None
    torch.testing.assert_close(one.reads, ref.reads, rtol=0, atol=0)
    torch.testing.assert_close(shared, w1[0], rtol=0, atol=0)
    kept_w, kept_s = tuple(t.clone() for t in ws), tuple(t.clone() for t in ss)
    memory_scan(
        kept_w,
        kept_s,
        k,
        v,
        theta,
        eta,
        alpha,
        chunk_size=4,
        max_grad_norm=2.0,
        reject_nonfinite=True,
        overwrite_state=True,
    )
    for a, b in zip(kept_w + kept_s, ws + ss):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_per_channel_gates_of_a_matrix_memory_equal_the_token_loop() -> None:
    """Per-channel gates (N, n, out): each row of M and S has its own theta, eta, alpha; chunked with
    token-level reads = the token loop with gradients at the chunk start (oracles 1-2)."""
    ws, ss, k, v, q, _, _, _ = _inputs(2, 11, 4, 1)
    g = torch.Generator().manual_seed(5)
    theta = 0.5 * torch.rand(2, 11, 4, generator=g, dtype=F64)
    eta = torch.rand(2, 11, 4, generator=g, dtype=F64)
    alpha = 0.2 * torch.rand(2, 11, 4, generator=g, dtype=F64)
    res = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4, max_grad_norm=2.0)
    w, s = ws[0].clone(), ss[0].clone()
    reads = torch.zeros_like(q)
    for t in range(11):
        if t % 4 == 0:
            start = w.clone()
            if t == 8:
                w8, s8 = w.clone(), s.clone()
        delta = 2 * (torch.einsum("noi,ni->no", start, k[:, t]) - v[:, t])
        norm = (delta.norm(dim=-1) * k[:, t].norm(dim=-1)).clamp_min(1e-300)
        delta = delta * torch.clamp(2.0 / norm, max=1.0)[:, None]
        u = delta[:, :, None] * k[:, t][:, None, :]
        s = eta[:, t, :, None] * s - theta[:, t, :, None] * u
        w = (1 - alpha[:, t, :, None]) * w + s
        reads[:, t] = torch.einsum("noi,ni->no", w, q[:, t])
    torch.testing.assert_close(res.reads, reads, rtol=0, atol=1e-10)
    torch.testing.assert_close(res.weights[0], w8, rtol=0, atol=1e-10)
    torch.testing.assert_close(res.momentum[0], s8, rtol=0, atol=1e-10)
    torch.testing.assert_close(res.tail_weights[0], w, rtol=0, atol=1e-10)
    scalar = memory_scan(ws, ss, k, v, theta[..., 0], eta[..., 0], alpha[..., 0], q, chunk_size=4)
    same = memory_scan(ws, ss, k, v, *(t[..., :1].expand(-1, -1, 4) for t in (theta, eta, alpha)), q, chunk_size=4)
    torch.testing.assert_close(same.reads, scalar.reads, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="matrix memory"):
        deep = _inputs(2, 11, 4, 2)
        memory_scan(deep[0], deep[1], k, v, theta, eta, alpha, chunk_size=4)


@pytest.mark.parametrize(
    ("name", "bad"), [("theta", -0.1), ("eta", 1.5), ("eta", -0.2), ("alpha", 1.2), ("alpha", -0.1)]
)
def test_gates_out_of_range_raise(name: str, bad: float) -> None:
    """theta >= 0, eta and alpha in [0, 1] (eq. 13-14): outside, the update is ascent or blows up."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(1, 6, 4, 2)
    gates = {"theta": theta.clone(), "eta": eta.clone(), "alpha": alpha.clone()}
    gates[name][0, 3] = bad
    with pytest.raises(ValueError, match=name):
        memory_scan(ws, ss, k, v, gates["theta"], gates["eta"], gates["alpha"], chunk_size=2)
    with pytest.raises(ValueError, match="max_grad_norm"):
        memory_scan(ws, ss, k, v, theta, eta, alpha, chunk_size=2, max_grad_norm=-1.0)


def test_per_channel_gates_reject_a_non_finite_chunk_per_memory() -> None:
    ws, ss, k, v, q, _, _, _ = _inputs(2, 10, 4, 1)
    g = torch.Generator().manual_seed(2)
    theta, eta, alpha = (0.3 * torch.rand(2, 10, 4, generator=g, dtype=F64) for _ in range(3))
    k = k.clone()
    k[0, 5] = math.nan  # memory 0's second chunk; memory 1 is clean
    res = memory_scan(ws, ss, k, v, theta, eta, alpha, chunk_size=4, reject_nonfinite=True)
    assert res.rejected.tolist() == [1, 0]
    assert all(torch.isfinite(t).all() for t in (*res.weights, *res.momentum, *res.tail_weights))
    clean = memory_scan(ws, ss, k[:, :4], v[:, :4], theta[:, :4], eta[:, :4], alpha[:, :4], chunk_size=4)
    torch.testing.assert_close(res.weights[0][0], clean.weights[0][0], rtol=0, atol=0)  # kept after chunk 1


def test_a_rejected_unfinished_chunk_keeps_the_earlier_calls_pending_tokens() -> None:
    """A bad token drops only its own call's tokens, not the good ones written before it."""
    mem = NeuralMemory(MemoryConfig(dim=8, chunk_size=16))
    g = torch.Generator().manual_seed(0)
    good = torch.randn(3, 8, generator=g)
    state = mem.update(mem.init_state(), good).state
    before = mem.effective_weights(state)
    bad = torch.full((1, 8), math.nan)
    res = mem.update(state, bad)
    assert res.rejected_chunks == 1
    torch.testing.assert_close(res.state.pending, good, rtol=0, atol=0)
    torch.testing.assert_close(mem.effective_weights(res.state), before, rtol=0, atol=0)


def _subnormals(t: torch.Tensor) -> int:
    tiny = torch.finfo(t.dtype).tiny
    a = t.abs()
    return int(((a > 0) & (a < tiny)).sum())


@pytest.mark.parametrize(
    ("n_seq", "e", "depth", "zero_eta"),
    [(3, 4, 1, False), (3, 4, 2, False), (3, 4, 3, False), (2, 256, 1, False), (2, 256, 1, True), (20, 4, 2, True)],
    ids=["batched-d1", "batched-d2", "batched-d3", "per-memory-gemm", "per-memory-gemm-beta0", "many-memories"],
)
def test_the_in_place_no_grad_path_equals_the_autograd_path_and_leaves_the_inputs_alone(
    n_seq: int, e: int, depth: int, zero_eta: bool
) -> None:
    """Small or many memories update in one batched GEMM per matrix; a few of >= 64k entries
    (here 256 x 256) one GEMM per memory with the decay as its beta (0 when eta = 0)."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(n_seq, 10, e, depth)
    if zero_eta:
        eta = torch.zeros_like(eta)
    before = [t.clone() for t in (*ws, *ss)]
    with torch.no_grad():  # in place, coefficients as floats (10 tokens: 2 full chunks and a tail)
        fast = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4)
    grad_ws = tuple(w.clone().requires_grad_() for w in ws)
    slow = memory_scan(grad_ws, ss, k, v, theta, eta, alpha, q, chunk_size=4)  # functional path
    for a, b in zip((fast.reads, *fast.weights, *fast.momentum, *fast.tail_weights),
                    (slow.reads, *slow.weights, *slow.momentum, *slow.tail_weights)):  # fmt: skip
        torch.testing.assert_close(a, b.detach(), rtol=1e-12, atol=1e-12)
    for t, b in zip((*ws, *ss), before):
        assert torch.equal(t, b), "the scan wrote into the caller's weights or momentum"


@pytest.mark.parametrize("forget", [False, True], ids=["lookahead", "no-lookahead-in-chunk-4"])
@pytest.mark.parametrize("read", ["token", "chunk"])
@pytest.mark.parametrize(
    ("n_seq", "e", "depth"), [(3, 4, 2), (2, 256, 1), (2, 128, 2)], ids=["batched", "per-memory-gemm", "batched-wide"]
)
def test_factored_momentum_equals_the_functional_path(read: str, n_seq: int, e: int, depth: int, forget: bool) -> None:
    """After a chunk whose momentum decay m_b is 0 for every memory the in-place path keeps the
    momentum as its rank-c factors S = -Y^T A (reads through them, the next weight update takes
    f_b S into its GEMM, no momentum GEMM while m_b stays 0) and writes the matrix back where it is
    needed. Every transition, against the functional path and the token loop: factored twice in a
    row, then a chunk where m_b > 0 for all memories but one (back to a matrix through
    [m_b Y'; Y]), factored again, and an unfinished chunk (written back before its reads). The
    weights are held ahead (W + gamma S) between factored full chunks; with ``forget`` chunk 4's
    beta_b is below 1/16 and chunk 3 does not hold them ahead (the momentum joins chunk 4's update
    as 2c rows instead)."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(n_seq, 22, e, depth)  # 5 chunks of 4 and 2 tokens
    eta = eta.clone().clamp_min(0.3)
    # one eta = 0 at a chunk's third token makes m_b = 0 while f_t (through its first two tokens)
    # still carries the momentum S_0 into the reads and the weights: what a flushed product does
    eta[:, [2, 6, 14, 18]] = 0.0  # chunks 0, 1, 3 and 4
    eta[0, 10] = 0.0  # chunk 2: m_b = 0 for memory 0 only
    if forget:
        alpha = alpha.clone()
        alpha[:, 16:20] = 0.6  # beta_b = 0.4^4 < 1/16
    before = [t.clone() for t in (*ws, *ss)]
    with torch.no_grad():
        fast = memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4, read=read)
    for t, b in zip((*ws, *ss), before):  # the momentum is copied lazily: never written in the caller's
        assert torch.equal(t, b)
    assert not {t.data_ptr() for t in (*fast.weights, *fast.momentum)} & {t.data_ptr() for t in (*ws, *ss)}
    grad_ws = tuple(w.clone().requires_grad_() for w in ws)
    slow = memory_scan(grad_ws, ss, k, v, theta, eta, alpha, q, chunk_size=4, read=read)
    assert fast.tail_weights is not None and slow.tail_weights is not None
    for a, b in zip((fast.reads, *fast.weights, *fast.momentum, *fast.tail_weights),
                    (slow.reads, *slow.weights, *slow.momentum, *slow.tail_weights)):  # fmt: skip
        # float64 rounding relative to each tensor's scale (theta up to 0.5 without a clamp grows
        # the wide memory's state to ~100, and single entries come out of large cancellations)
        torch.testing.assert_close(a, b.detach(), rtol=1e-10, atol=1e-10 * float(b.detach().abs().max()))
    if e == 4:  # small enough for the token loop
        reads, w_chunk, s_chunk, w_last = _naive(ws, ss, k, v, q, theta, eta, alpha, 4, read=read)
        torch.testing.assert_close(fast.reads, reads, rtol=1e-9, atol=1e-9)
        for a, b in zip((*fast.weights, *fast.momentum, *fast.tail_weights), (*w_chunk, *s_chunk, *w_last)):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)
    # the same with the state overwritten in place (the models' blocks): the factors never leak
    mine_w, mine_s = tuple(t.clone() for t in ws), tuple(t.clone() for t in ss)
    with torch.no_grad():
        own = memory_scan(mine_w, mine_s, k, v, theta, eta, alpha, q, chunk_size=4, read=read, overwrite_state=True)
    for a, b in zip((own.reads, *own.weights, *own.momentum), (fast.reads, *fast.weights, *fast.momentum)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    # ending on a factored chunk (no unfinished one): the returned momentum is the matrix
    with torch.no_grad():
        end = memory_scan(ws, ss, k[:, :20], v[:, :20], theta[:, :20], eta[:, :20], alpha[:, :20], q[:, :20],
                          chunk_size=4, read=read)  # fmt: skip
    torch.testing.assert_close(end.momentum[0], fast.momentum[0], rtol=1e-10, atol=1e-10)


def test_no_subnormal_numbers_reach_the_state_or_the_reads() -> None:
    """Products of small momentum decays pass through float32's subnormal range (below 1.2e-38),
    where CPUs compute in microcode tens of times slower: the scan flushes coefficients, gradients
    and activation derivatives that small to 0 (measured: a 4,096-token scan 3.5x faster)."""
    g = torch.Generator().manual_seed(3)
    n_seq, n, e, h = 2, 512, 16, 64
    k = torch.nn.functional.normalize(torch.randn(n_seq, n, e, generator=g), dim=-1)
    v = torch.randn(n_seq, n, e, generator=g)
    q = torch.nn.functional.normalize(torch.randn(n_seq, n, e, generator=g), dim=-1)
    theta = torch.full((n_seq, n), 0.1)
    eta = torch.full((n_seq, n), 0.05)  # the models' starting momentum decay: eta^64 ~ 5e-84
    alpha = torch.full((n_seq, n), 0.01)
    # wide pre-activations: gelu' far in its tails
    ws = (3.0 * torch.randn(n_seq, h, e, generator=g), torch.randn(n_seq, e, h, generator=g) / 8)
    ss = tuple(torch.zeros_like(w) for w in ws)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            w_in = tuple(w.clone().requires_grad_(grad) for w in ws)
            res = memory_scan(w_in, ss, k, v, theta, eta, alpha, q, chunk_size=64, max_grad_norm=1.0)
        for t in (res.reads, *res.weights, *res.momentum):
            assert torch.isfinite(t).all()
            assert _subnormals(t.detach()) == 0
    from titans_agent.core.scan import activation_fns

    z = torch.linspace(-40, 40, 8001, dtype=torch.float32, requires_grad=True)
    act, act_grad = activation_fns("gelu")
    (exact,) = torch.autograd.grad(act(z).sum(), z)
    ours = act_grad(z.detach())
    assert _subnormals(ours) == 0
    torch.testing.assert_close(ours, exact, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("zero_eta", [False, True], ids=["momentum", "factored-momentum"])
@pytest.mark.parametrize(("n_seq", "e"), [(3, 4), (2, 256)], ids=["batched", "per-memory-gemm"])
def test_in_place_rejection_with_the_clamp_equals_the_functional_path(n_seq: int, e: int, zero_eta: bool) -> None:
    """With ``max_grad_norm`` and no autograd, rejection checks the chunk's update terms before an
    in-place update: the same rejected chunks, reads and final state as the functional path (with
    eta = 0 a rejected chunk arrives while the momentum is held as its factors)."""
    ws, ss, k, v, q, theta, eta, alpha = _inputs(n_seq, 12, e, 2 if e == 4 else 1)
    if zero_eta:  # m_b = 0 in every chunk, f_t > 0 (see test_factored_momentum_equals_the_functional_path)
        eta = eta.clone()
        eta[:, 2::4] = 0.0
    v = v.clone()
    v[1, 5] = math.nan  # memory 1's second chunk (of 4 tokens)
    theta = theta.clone()
    theta[0, 9] = math.inf  # memory 0's third chunk
    kwargs = {"chunk_size": 4, "max_grad_norm": 1.0, "reject_nonfinite": True}
    with torch.no_grad():
        fast = memory_scan(ws, ss, k, v, theta, eta, alpha, q, **kwargs)
    slow = memory_scan(tuple(w.clone().requires_grad_() for w in ws), ss, k, v, theta, eta, alpha, q, **kwargs)
    assert fast.rejected.tolist() == slow.rejected.tolist() == [1, 1] + [0] * (n_seq - 2)
    for a, b in zip((*fast.weights, *fast.momentum), (*slow.weights, *slow.momentum)):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b.detach(), rtol=1e-12, atol=1e-12)
    finite = torch.isfinite(slow.reads)
    assert torch.equal(finite, torch.isfinite(fast.reads))
    torch.testing.assert_close(fast.reads[finite], slow.reads.detach()[finite], rtol=1e-12, atol=1e-12)
    # a rejected FIRST chunk: the call's first update writes new tensors, the rejected memory's
    # copied unchanged; the caller's state is never touched
    before = [t.clone() for t in (*ws, *ss)]
    v[1, 1] = math.nan
    with torch.no_grad():
        fast = memory_scan(ws, ss, k, v, theta, eta, alpha, q, **kwargs)
    slow = memory_scan(tuple(w.clone().requires_grad_() for w in ws), ss, k, v, theta, eta, alpha, q, **kwargs)
    assert fast.rejected.tolist() == slow.rejected.tolist() == [1, 2] + [0] * (n_seq - 2)
    for a, b in zip((*fast.weights, *fast.momentum), (*slow.weights, *slow.momentum)):
        torch.testing.assert_close(a, b.detach(), rtol=1e-12, atol=1e-12)
    for a, b in zip((*ws, *ss), before):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # every chunk rejected: the state returned is the starting one, in storage of its own
    with torch.no_grad():
        none = memory_scan(ws, ss, k, v * math.nan, theta, eta, alpha, q, **kwargs)
    assert none.rejected.tolist() == [3] * n_seq
    for a, b in zip((*none.weights, *none.momentum), (*ws, *ss)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        assert a.data_ptr() != b.data_ptr()


def test_in_place_rejection_catches_a_non_finite_starting_state_and_an_overflow() -> None:
    """A NaN in the starting momentum, or theta so large that the update overflows the state, must
    be rejected on the in-place (no-grad) path exactly as on the functional path: at 3e37 the
    chunk's update terms are already non-finite; at 1e37 they are finite and only the state
    overflows, which the final check catches (the call is then run again, checking each chunk)."""
    g = torch.Generator().manual_seed(5)
    k = torch.nn.functional.normalize(torch.randn(2, 64, 8, generator=g), dim=-1)
    v = torch.randn(2, 64, 8, generator=g)
    w = (0.3 * torch.randn(2, 8, 8, generator=g),)
    kw = {"chunk_size": 16, "max_grad_norm": 1.0, "reject_nonfinite": True}
    nan_s = torch.zeros(2, 8, 8)
    nan_s[0, 0, 0] = math.nan
    gates = (torch.full((2, 64), 0.3), torch.full((2, 64), 0.9), torch.full((2, 64), 0.01))
    huge = (torch.full((2, 64), 3e37), torch.ones(2, 64), torch.zeros(2, 64))  # 64 clamped steps overflow
    large = (torch.full((2, 64), 1e37), torch.ones(2, 64), torch.zeros(2, 64))  # finite terms, the state overflows
    zero = (torch.zeros(2, 8, 8),)
    for s0, (theta, eta, alpha) in (((nan_s,), gates), (zero, huge), (zero, large)):
        with torch.no_grad():
            fast = memory_scan(w, s0, k, v, theta, eta, alpha, **kw)
        slow = memory_scan((w[0].clone().requires_grad_(),), s0, k, v, theta, eta, alpha, **kw)
        assert fast.rejected.tolist() == slow.rejected.tolist()
        assert fast.rejected.sum() > 0
        for a, b in zip((*fast.weights, *fast.momentum), (*slow.weights, *slow.momentum)):
            assert torch.equal(torch.isfinite(a), torch.isfinite(b.detach()))
        assert torch.isfinite(fast.weights[0]).all()


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")  # torch.func's own
def test_forward_mode_derivatives_are_not_dropped_by_the_in_place_path() -> None:
    """torch.func.jvp inputs do not require grad, but the in-place path's float coefficients would
    drop their tangents: the scan must take the differentiable path (checked by finite differences)."""
    g = torch.Generator().manual_seed(6)
    n, e = 32, 256  # 256 x 256 = 65,536 entries: the per-memory GEMM branch on the CPU
    k = torch.nn.functional.normalize(torch.randn(1, n, e, generator=g, dtype=F64), dim=-1)
    v = torch.randn(1, n, e, generator=g, dtype=F64)
    w = (torch.randn(1, e, e, generator=g, dtype=F64) / 16,)
    s = (torch.zeros(1, e, e, dtype=F64),)
    theta, eta = torch.full((1, n), 0.3, dtype=F64), torch.full((1, n), 0.9, dtype=F64)

    def final(alpha: torch.Tensor) -> torch.Tensor:
        return memory_scan(w, s, k, v, theta, eta, alpha, chunk_size=16).weights[0]

    alpha = torch.full((1, n), 0.05, dtype=F64)
    direction = torch.rand(1, n, generator=g, dtype=F64)
    _, tangent = torch.func.jvp(final, (alpha,), (direction,))
    h = 1e-6
    numeric = (final(alpha + h * direction) - final(alpha - h * direction)) / (2 * h)
    torch.testing.assert_close(tangent, numeric, rtol=1e-5, atol=1e-8)


def test_the_finiteness_check_does_not_mistake_large_finite_values_for_overflow() -> None:
    from titans_agent.core.kernels import all_finite_rows

    big = torch.full((3, 4, 5), 1e38)  # every row's sum overflows float32, every value is finite
    big[1, 2, 3] = math.nan
    big[2, 0, 0] = -math.inf
    assert all_finite_rows([big]).tolist() == [True, False, False]
    assert all_finite_rows([torch.ones(3, 2), big]).tolist() == [True, False, False]
