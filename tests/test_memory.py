"""Oracles 1-5 of docs/titans.md section 5 for the Titans memory, in float64 on the CPU.

The reference implementations below are deliberately naive: a Python loop over tokens with each
gradient taken by torch.autograd, so the closed-form chunked update is checked against first
principles, not against itself.
"""

from __future__ import annotations

import pytest
import torch

from titans_agent.config import MemoryConfig
from titans_agent.core.memory import (
    MemoryState,
    NeuralMemory,
    params_from_bytes,
    params_to_bytes,
    state_from_bytes,
    state_to_bytes,
)

D = 8


def make(depth: int = 2, chunk: int = 4, **kw) -> NeuralMemory:
    cfg = MemoryConfig(
        dim=D,
        depth=depth,
        expansion=2,
        chunk_size=chunk,
        dtype="float64",
        max_grad_norm=None,
        theta_max=0.5,
        theta_init=0.2,
        alpha_max=0.2,
        alpha_init=0.05,
        eta_init=0.7,
        **kw,
    )
    mem = NeuralMemory(cfg)
    with torch.no_grad():  # make the gates clearly data-dependent
        mem.gate_weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(1))
    return mem


def tokens(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, D, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def loss_fn(mem: NeuralMemory, weights, k, v):
    return ((mem.apply_memory(weights, k[None]) - v[None]) ** 2).sum()


def naive(mem: NeuralMemory, x: torch.Tensor, chunk: int, state: MemoryState | None = None):
    """Token loop; token t's gradient is taken at the weights at the start of its chunk."""
    state = state or mem.init_state()
    w = [t.clone() for t in state.weights]
    s = [t.clone() for t in state.momentum]
    k, v, _ = mem.project(x)
    theta, eta, alpha = mem.gates(x)
    anchor = [t.clone() for t in w]
    for t in range(x.shape[0]):
        if t % chunk == 0:
            anchor = [t_.clone() for t_ in w]
        params = [a.clone().requires_grad_(True) for a in anchor]
        grads = torch.autograd.grad(loss_fn(mem, tuple(params), k[t], v[t]), params)
        for i, g in enumerate(grads):
            s[i] = eta[t] * s[i] - theta[t] * g
            w[i] = (1 - alpha[t]) * w[i] + s[i]
    return w, s


def close(a, b, tol=1e-10):
    return all(torch.allclose(x, y, atol=tol, rtol=tol) for x, y in zip(a, b))


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("chunk", [1, 3, 4, 16])
def test_oracle1_chunked_equals_token_loop_at_chunk_start(depth, chunk):
    mem = make(depth=depth, chunk=chunk)
    x = tokens(16)  # a multiple of every chunk size tested except 3 -> pending tail for 3
    res = mem.update(mem.init_state(), x)
    w_ref, s_ref = naive(mem, x, chunk)
    with torch.no_grad():
        assert close(mem.effective_weights(res.state), w_ref)
        if x.shape[0] % chunk == 0:
            assert close(res.state.momentum, s_ref)


def test_oracle1_every_chunk_not_only_the_first():
    """The bug of the best-known public implementation: gradients always at the initial weights."""
    mem = make(depth=2, chunk=4)
    x = tokens(12)
    res = mem.update(mem.init_state(), x)
    # A reference that takes every gradient at M_0 must disagree.
    w_wrong, _ = naive(mem, x, chunk=12)
    assert not close(res.state.weights, w_wrong, tol=1e-6)


@pytest.mark.parametrize("depth", [1, 2])
def test_oracle2_chunk_one_is_online_gradient_descent(depth):
    mem = make(depth=depth, chunk=1)
    x = tokens(10, seed=3)
    res = mem.update(mem.init_state(), x)
    k, v, _ = mem.project(x)
    theta, eta, alpha = mem.gates(x)
    w = [p.detach().clone() for p in mem.M0]
    s = [torch.zeros_like(t) for t in w]
    for t in range(10):  # fully online: gradient at M_{t-1}
        params = [a.clone().requires_grad_(True) for a in w]
        grads = torch.autograd.grad(loss_fn(mem, tuple(params), k[t], v[t]), params)
        s = [eta[t] * si - theta[t] * g for si, g in zip(s, grads)]
        w = [(1 - alpha[t]) * wi + si for wi, si in zip(w, s)]
    with torch.no_grad():
        assert close(res.state.weights, w)
        assert close(res.state.momentum, s)
    assert res.state.step == 10


@pytest.mark.parametrize("split", [1, 3, 4, 7, 13])
def test_oracle3_split_across_calls_equals_one_call(split):
    mem = make(depth=2, chunk=4)
    x = tokens(17, seed=5)
    with torch.no_grad():
        one = mem.update(mem.init_state(), x)
        a = mem.update(mem.init_state(), x[:split])
        b = mem.update(a.state, x[split:])
    # equal up to float64 rounding (BLAS sums rows of different batch shapes in other orders)
    assert close(one.state.weights, b.state.weights, tol=1e-12)
    assert close(one.state.momentum, b.state.momentum, tol=1e-12)
    assert torch.equal(one.state.pending, b.state.pending)
    assert torch.allclose(one.surprise, torch.cat([a.surprise, b.surprise]), atol=1e-12)


def test_oracle4_linear_memory_without_momentum_is_delta_rule_with_decay():
    mem = make(depth=1, chunk=1)
    x = tokens(12, seed=7)
    n = x.shape[0]
    theta = torch.linspace(0.05, 0.3, n, dtype=torch.float64)
    alpha = torch.linspace(0.0, 0.1, n, dtype=torch.float64)
    eta = torch.zeros(n, dtype=torch.float64)
    with torch.no_grad():
        res = mem.update(mem.init_state(), x, gates=(theta, eta, alpha))
        k, v, _ = mem.project(x)
        w = mem.M0[0].detach().clone()
        for t in range(n):  # M_t = (1 - a_t) M_{t-1} - theta_t * 2 (M_{t-1} k_t - v_t) k_t^T
            w = (1 - alpha[t]) * w - theta[t] * 2 * torch.outer(w @ k[t] - v[t], k[t])
    assert torch.allclose(res.state.weights[0], w, atol=1e-12)


def test_oracle5_save_load_continue_is_bit_identical():
    mem = make(depth=2, chunk=4)
    x = tokens(22, seed=9)
    with torch.no_grad():
        straight = mem.update(mem.update(mem.init_state(), x[:10]).state, x[10:]).state
        first = mem.update(mem.init_state(), x[:10]).state
        blob = state_to_bytes(first)
        mem2 = make(depth=2, chunk=4, seed=123)  # other seed: parameters come from the bytes
        params_from_bytes(mem2, params_to_bytes(mem))
        resumed = mem2.update(state_from_bytes(blob), x[10:]).state
    for a, b in zip((*straight.weights, *straight.momentum), (*resumed.weights, *resumed.momentum)):
        assert torch.equal(a, b)
    assert torch.equal(straight.pending, resumed.pending)
    assert straight.step == resumed.step == 22


@pytest.mark.parametrize("chunk", [1, 16])
def test_surprise_falls_after_writing(chunk):
    """Default gates: each write of the same input lowers its surprise; others stay surprising."""
    cfg = MemoryConfig(dim=D, chunk_size=chunk, dtype="float64")
    mem = NeuralMemory(cfg)
    x = tokens(1, seed=11)
    state = mem.init_state()
    seen = []
    with torch.no_grad():
        seen.append(mem.surprise(state, x).item())
        for _ in range(5):
            state = mem.update(state, x).state
            seen.append(mem.surprise(state, x).item())
        other = mem.surprise(state, tokens(1, seed=12)).item()
    assert all(b < a for a, b in zip(seen, seen[1:])), seen
    assert seen[-1] < 0.9 * seen[0]
    assert other > seen[-1]


def test_short_inputs_update_the_memory():
    """Inputs shorter than a chunk are written (a titans-pytorch failure, docs/titans.md section 6)."""
    mem = make(depth=2, chunk=16)
    x = tokens(1)
    with torch.no_grad():
        state = mem.update(mem.init_state(), x).state
        assert state.pending.shape == (1, D)
        assert not close(mem.effective_weights(state), mem.init_state().weights, tol=1e-9)
        assert mem.surprise(state, x) < mem.surprise(mem.init_state(), x)


def test_non_finite_update_is_rejected_and_state_kept():
    mem = make(depth=2, chunk=2)
    with torch.no_grad():
        good = mem.update(mem.init_state(), tokens(4)).state
        bad_x = tokens(2, seed=4)
        bad_x[1, 0] = float("inf")
        res = mem.update(good, bad_x)
    assert res.rejected_chunks == 1
    assert res.state.is_finite()
    for a, b in zip(res.state.weights, good.weights):
        assert torch.equal(a, b)


def test_non_finite_state_is_never_serialised():
    mem = make()
    s = mem.init_state()
    broken = MemoryState(tuple(w * float("nan") for w in s.weights), s.momentum, s.pending, 1)
    from titans_agent.errors import NonFiniteStateError

    with pytest.raises(NonFiniteStateError):
        state_to_bytes(broken)


def test_gradient_norm_clamp_bounds_each_step():
    cfg = MemoryConfig(dim=D, chunk_size=1, dtype="float64", max_grad_norm=1e-3, eta_init=0.01)
    mem = NeuralMemory(cfg)
    with torch.no_grad():
        s0 = mem.init_state()
        s1 = mem.update(s0, 100 * tokens(1)).state
    theta_max = cfg.theta_max
    moved = torch.sqrt(sum(((a - b * (1 - 0)) ** 2).sum() for a, b in zip(s1.momentum, s0.momentum)))
    assert moved.item() <= theta_max * 1e-3 * (1 + 1e-9)


def test_oracle6_outer_gradients_flow_through_the_inner_update():
    """torch.autograd.gradcheck through a write and a read: W_K, W_V, W_Q, the gates and M_0 can
    be meta-learned (docs/titans.md section 5, oracle 6)."""
    from torch.func import functional_call

    cfg = MemoryConfig(dim=4, depth=2, expansion=2, chunk_size=2, dtype="float64", max_grad_norm=None,
                       theta_max=0.5, theta_init=0.2, alpha_max=0.2, alpha_init=0.05)  # fmt: skip
    mem = NeuralMemory(cfg)
    names = [n for n, _ in mem.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in mem.parameters())
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)  # 2 chunks + pending
    q = torch.randn(2, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64)

    def write_then_read(*flat):
        return functional_call(mem, dict(zip(names, flat)), (None, x, q))[1]

    assert torch.autograd.gradcheck(write_then_read, params, eps=1e-6, atol=1e-5)
    # and every outer parameter receives a gradient
    out = write_then_read(*params).sum()
    grads = torch.autograd.grad(out, params)
    assert all(g.abs().sum() > 0 for g in grads), [n for n, g in zip(names, grads) if g.abs().sum() == 0]
