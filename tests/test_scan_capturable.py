"""``memory_scan(capturable=True)`` and ``NeuralMemoryLayer.capturable``: no value read back to
the host (what a CUDA graph capture needs), checked twice: with the Python-level reads made to
raise, and on fake tensors of a device with no data, where every data-dependent operation (``item``,
``nonzero``, ``equal``, a boolean mask's index...) raises and no CPU tensor may appear; the same
reads and state as the default path; the options it cannot serve refused."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from titans_agent.core import kernels
from titans_agent.core.scan import MomentumFactors, memory_scan
from titans_agent.models.config import ModelConfig
from titans_agent.models.layers import NeuralMemoryLayer

F64 = torch.float64


class HostRead(AssertionError):
    """A tensor's value was read back to the host inside :func:`no_host_reads`."""


@contextmanager
def no_host_reads() -> Iterator[None]:
    """Every Python-level way of reading a tensor's value back (``tolist``, ``item``, ``bool``,
    ``float``, ``int``) raises :class:`HostRead` inside the block."""

    def refuse(*_args: object, **_kw: object) -> None:
        raise HostRead("a tensor's value was read back to the host")

    names = ("tolist", "item", "__bool__", "__float__", "__int__")
    saved = {name: torch.Tensor.__dict__.get(name) for name in names}
    for name in names:
        setattr(torch.Tensor, name, refuse)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, old)


def _inputs(n_seq: int, n: int, e: int, hidden: int, dtype: torch.dtype = F64, eta_low: float = 0.3):
    g = torch.Generator().manual_seed(0)
    k = torch.nn.functional.normalize(torch.randn(n_seq, n, e, generator=g, dtype=dtype), dim=-1)
    q = torch.nn.functional.normalize(torch.randn(n_seq, n, e, generator=g, dtype=dtype), dim=-1)
    v = torch.randn(n_seq, n, e, generator=g, dtype=dtype)
    theta = 0.5 * torch.rand(n_seq, n, generator=g, dtype=dtype)
    eta = eta_low + (1 - eta_low) * torch.rand(n_seq, n, generator=g, dtype=dtype)
    alpha = 0.2 * torch.rand(n_seq, n, generator=g, dtype=dtype)
    ws = (
        torch.randn(n_seq, hidden, e, generator=g, dtype=dtype) / math.sqrt(e),
        torch.randn(n_seq, e, hidden, generator=g, dtype=dtype) / math.sqrt(hidden),
    )
    ss = tuple(0.1 * torch.randn(w.shape, generator=g, dtype=dtype) for w in ws)
    return ws, ss, k, v, theta, eta, alpha, q


@pytest.mark.parametrize("read", ["token", "chunk"])
@pytest.mark.parametrize("factored", [False, True])
def test_capturable_equals_the_default_path(read: str, factored: bool) -> None:
    """Both momentum regimes (an eta of 0 in every chunk: the default path factors the momentum
    and holds the weights ahead; the capturable path keeps matrices), a partial chunk at the end,
    and a second call continuing from the first's factors: reads and states agree."""
    ws, ss, k, v, theta, eta, alpha, q = _inputs(2, 22, 4, 8)
    if factored:
        eta = eta.clone()
        eta[:, 1::4] = 0.0
    kw = {"chunk_size": 4, "read": read, "max_grad_norm": 1.0, "keep_factors": True}
    with torch.no_grad():
        results = []
        for capturable in (False, True):
            first = memory_scan(ws, ss, k[:, :8], v[:, :8], theta[:, :8], eta[:, :8], alpha[:, :8], q[:, :8], **kw)
            second = memory_scan(
                first.weights, first.next_momentum, k[:, 8:], v[:, 8:], theta[:, 8:], eta[:, 8:], alpha[:, 8:],
                q[:, 8:], capturable=capturable, **kw,
            )  # fmt: skip
            results.append((first, second))
    (_, want), (first, got) = results
    assert isinstance(first.next_momentum, MomentumFactors) == factored  # the second call was given factors
    assert got.momentum_factors is None  # capturable: the momentum comes back as matrices
    dense = want.momentum_factors.dense() if want.momentum_factors is not None else want.momentum
    torch.testing.assert_close(got.reads, want.reads, rtol=1e-10, atol=1e-10)
    for a, b in zip((*got.weights, *got.momentum, *got.tail_weights), (*want.weights, *dense, *want.tail_weights)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(got.surprise, want.surprise, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("read", ["token", "chunk"])
def test_capturable_reads_nothing_back_to_the_host(read: str) -> None:
    """A memory large enough for the CPU's per-memory GEMMs (whose coefficients are host floats)
    and the factored regime: the default path reads values back, the capturable one reads none."""
    ws, ss, k, v, theta, eta, alpha, q = _inputs(1, 16, 32, 2048, torch.float32, eta_low=0.0)
    eta = eta.clone()
    eta[:, 1::4] = 0.0
    kw = {"chunk_size": 4, "read": read, "max_grad_norm": 1.0, "keep_factors": True}
    with torch.no_grad():
        want = memory_scan(ws, ss, k, v, theta, eta, alpha, q, **kw)
        with no_host_reads(), pytest.raises(HostRead):
            memory_scan(ws, ss, k, v, theta, eta, alpha, q, **kw)
        with no_host_reads():
            got = memory_scan(ws, ss, k, v, theta, eta, alpha, q, capturable=True, overwrite_state=True, **kw)
            given = memory_scan(ws, want.next_momentum, k, v, theta, eta, alpha, q, capturable=True, **kw)
    assert want.momentum_factors is not None and given.reads is not None
    torch.testing.assert_close(got.reads, want.reads, rtol=1e-4, atol=1e-5)
    for a, b in zip((*got.weights, *got.momentum), (*want.weights, *want.momentum_factors.dense())):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


class NoCpuTensors(TorchDispatchMode):
    """Every operation whose output is a CPU tensor raises (``.cpu()``, ``torch.tensor(list)``)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        if any(isinstance(o, torch.Tensor) and o.device.type == "cpu" for o in tree_leaves(out)):
            raise AssertionError(f"{func} made a CPU tensor inside the call")
        return out


@pytest.fixture
def on_fake_device(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeTensorMode, object]]:
    """A fake-tensor mode on the meta device (shapes, no data) and a function moving inputs there."""
    real = torch.autocast

    def autocast(device_type: str, *args: object, **kw: object) -> object:  # meta has no autocast
        return contextlib.nullcontext() if device_type == "meta" else real(device_type, *args, **kw)

    monkeypatch.setattr(torch, "autocast", autocast)
    kernels._triangles.cache_clear()  # no mask of another mode in, none of this one out
    mode = FakeTensorMode()

    def fake(t: object) -> object:
        if isinstance(t, tuple):
            return tuple(fake(u) for u in t)
        assert isinstance(t, torch.Tensor)
        return FakeTensor(mode, t.to("meta"), torch.device("meta"))

    yield mode, fake
    kernels._triangles.cache_clear()


# the storage checks (which tensors share memory) read addresses, host metadata: no sync on a GPU
FAKE_POINTERS = "ignore:Accessing the data pointer of FakeTensor:UserWarning"


@pytest.mark.filterwarnings(FAKE_POINTERS)
@pytest.mark.parametrize("read", ["token", "chunk"])
@pytest.mark.parametrize("n", [16, 18, 3])  # whole chunks; an unfinished last one; no whole chunk
def test_capturable_has_no_data_dependent_operation(on_fake_device, read: str, n: int) -> None:  # type: ignore[no-untyped-def]
    """On fake tensors: the scan with and without queries, given the momentum as matrices or as
    factors, with the state given up; the default path fails there (the control)."""
    mode, fake = on_fake_device
    ws, ss, k, v, theta, eta, alpha, q = _inputs(2, n, 8, 16, torch.float32)
    with torch.no_grad():  # a previous call's momentum as its factors (an eta of 0: m_b is 0)
        w4, s4, k4, v4, theta4, eta4, alpha4, q4 = _inputs(2, 4, 8, 16, torch.float32)
        factors = memory_scan(w4, s4, k4, v4, theta4, eta4 * 0, alpha4, q4, chunk_size=4, keep_factors=True)
        factors = factors.momentum_factors
    assert factors is not None
    args = [fake(t) for t in (ws, ss, k, v, theta, eta, alpha)]
    given = MomentumFactors(*(tuple(fake(t) for t in part) for part in (factors.ys, factors.acts)))
    fq, own_ws, own_ss = fake(q), fake(ws), fake(ss)  # the state given up: tensors of the call's own
    kw = {"chunk_size": 4, "read": read, "max_grad_norm": 1.0, "keep_factors": True}
    cases = ((args[0], args[1], fq, False), (args[0], given, None, False), (own_ws, own_ss, fq, True))
    with torch.no_grad(), mode, NoCpuTensors():
        for weights, momentum, queries, overwrite in cases:
            res = memory_scan(weights, momentum, *args[2:], queries, capturable=True, overwrite_state=overwrite, **kw)
            assert res.weights[0].shape == ws[0].shape and res.surprise.shape == (2, n)
        with pytest.raises(DataDependentOutputException):  # the gates' range check
            memory_scan(*args, fq, **kw)


@pytest.mark.filterwarnings(FAKE_POINTERS)
def test_the_capturable_layer_has_no_data_dependent_operation(on_fake_device) -> None:  # type: ignore[no-untyped-def]  # noqa: ARG001
    """The models' layer on fake tensors: blocks (``block_tokens``), an unfinished chunk, and a
    stream of calls that carries the state (its ``pending`` tokens too)."""
    cfg = ModelConfig(width=8, heads=2, chunk=4, segment=8, memory_depth=2, eta_init=1e-5)
    with torch.device("meta"):
        layer = NeuralMemoryLayer(cfg)
    mode = FakeTensorMode(allow_non_fake_inputs=True)  # the parameters: meta tensors, made fake on use
    layer.block_tokens = 8
    layer.capturable = True
    with torch.no_grad(), mode, NoCpuTensors():
        x = torch.empty(2, 30, 8, device="meta")
        out, state = layer(x)
        assert out.shape == (2, 30, 8) and state.pending.shape == (2, 2, 8)
        for lo in range(0, 24, 6):  # 54 tokens in all: 2 pending again
            out, state = layer(x[:, lo : lo + 6], state)
    assert out.shape == (2, 6, 8) and state.pending.shape == (2, 2, 8)


def test_capturable_refuses_rejection_and_leaves_the_gate_ranges_to_the_caller() -> None:
    ws, ss, k, v, theta, eta, alpha, q = _inputs(1, 8, 4, 8)
    with pytest.raises(ValueError, match="capturable"):
        memory_scan(ws, ss, k, v, theta, eta, alpha, q, chunk_size=4, capturable=True, reject_nonfinite=True)
    with pytest.raises(ValueError, match="eta must be"):
        memory_scan(ws, ss, k, v, theta, eta + 1.0, alpha, q, chunk_size=4)
    # unchecked (a check would read the gates back): the caller's guarantee, as documented
    res = memory_scan(ws, ss, k, v, theta, eta + 1.0, alpha, q, chunk_size=4, capturable=True)
    assert res.reads is not None and res.reads.shape == k.shape


@pytest.mark.parametrize("memory_read", ["token", "chunk"])
def test_the_capturable_layer_equals_the_default_one_and_reads_nothing_back(memory_read: str) -> None:
    """The models' layer with ``capturable`` set, one call and a stream of calls carrying the state,
    longer than a block (``block_tokens``): the same outputs and state as without it (float32; a
    momentum decay of 1e-5 makes the default path factor the momentum). Up to float32 rounding,
    which the output norm over 4-wide heads magnifies: each path is about 1e-4 from float64 here."""
    cfg = ModelConfig(width=8, heads=2, chunk=4, segment=8, memory_depth=2, memory_read=memory_read, eta_init=1e-5)
    torch.manual_seed(0)
    layer = NeuralMemoryLayer(cfg)
    layer.block_tokens = 8
    x = torch.randn(2, 30, 8)
    with torch.no_grad():
        want, want_end = layer(x)
        layer.capturable = True
        with no_host_reads():
            got, end = layer(x)
            outs, state = [], None
            for lo in range(0, 30, 6):
                out, state = layer(x[:, lo : lo + 6], state)
                outs.append(out)
    assert state is not None
    torch.testing.assert_close(got, want, rtol=1e-4, atol=2e-4)
    torch.testing.assert_close(torch.cat(outs, dim=1), got, rtol=1e-5, atol=1e-5)  # the same path: tight
    for a, b in zip((*end.weights, *state.dense_momentum()), (*want_end.weights, *want_end.dense_momentum())):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=2e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("memory_read", ["token", "chunk"])
def test_a_cuda_graph_of_the_capturable_layer_replays_eager_results(memory_read: str) -> None:
    """Captured once (blocks, an unfinished last chunk, a given state), replayed on its input and
    then on new inputs copied into the captured ones: the eager results each time."""
    cfg = ModelConfig(width=64, heads=2, chunk=16, segment=16, memory_depth=2, memory_read=memory_read)
    layer = NeuralMemoryLayer(cfg).cuda().eval()
    layer.block_tokens = 64
    layer.capturable = True
    x, x_new = torch.randn(1, 200, 64, device="cuda"), torch.randn(1, 200, 64, device="cuda")
    with torch.no_grad():
        _, start = layer(torch.randn(1, 40, 64, device="cuda"))  # a state with 8 pending tokens
        eager, _ = layer(x, start)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                layer(x, start)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            out, _ = layer(x, start)
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, eager, rtol=1e-5, atol=1e-5)
        x.copy_(x_new)
        graph.replay()
        want, _ = layer(x_new, start)
        torch.cuda.synchronize()
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
