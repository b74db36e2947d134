"""The meta-learned memory: the packaged parameters, the ``MemoryConfig.init`` switch, and the outer
loop of benchmarks/train_memory.py (a tiny run on synthetic streams must lower its loss)."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import load_benchmark

from titans_agent.config import MemoryConfig
from titans_agent.core.memory import NeuralMemory
from titans_agent.data import META_FIELDS, meta_learned_metadata, meta_learned_params
from titans_agent.errors import InvalidInputError


@pytest.fixture(scope="module")
def trainer():
    return load_benchmark("train_memory")


def test_packaged_parameters_fit_the_default_config_and_are_finite():
    cfg = MemoryConfig()
    params = meta_learned_params(cfg)
    expected = NeuralMemory(cfg).state_dict()
    assert set(params) == set(expected)
    for name, t in params.items():
        assert t.shape == expected[name].shape, name
        assert torch.isfinite(t).all(), name
    meta = meta_learned_metadata()
    trained = json.loads(meta["config"])
    assert {k: trained[k] for k in META_FIELDS} == {k: getattr(cfg, k) for k in META_FIELDS}
    assert meta["embedder"] == "all-MiniLM-L6-v2"
    assert int(meta["steps"]) > 0


def test_init_switch_loads_the_packaged_parameters():
    random_mem = NeuralMemory(MemoryConfig(init="random"))
    meta_mem = NeuralMemory(MemoryConfig(init="meta-learned"))
    params = meta_learned_params(MemoryConfig())
    for name, t in meta_mem.state_dict().items():
        assert torch.equal(t, params[name]), name
    assert not torch.equal(random_mem.W_K, meta_mem.W_K)
    # the seed no longer matters, the dtype is honoured
    other = NeuralMemory(MemoryConfig(init="meta-learned", seed=7, dtype="float64"))
    assert other.W_V.dtype == torch.float64
    assert torch.equal(other.W_V.float(), meta_mem.W_V)
    # the default is unchanged: random, seeded
    assert MemoryConfig().init == "random"
    assert torch.equal(NeuralMemory(MemoryConfig()).W_K, random_mem.W_K)


def test_meta_learned_memory_writes_and_reads_finite_values():
    mem = NeuralMemory(MemoryConfig(init="meta-learned"))
    x = torch.nn.functional.normalize(torch.randn(40, 384, generator=torch.Generator().manual_seed(0)), dim=-1)
    with torch.no_grad():
        res = mem.update(mem.init_state(), x)
        y = mem.read(res.state, x[:5])
    assert res.state.is_finite() and res.rejected_chunks == 0
    assert torch.isfinite(res.surprise).all() and torch.isfinite(y).all()
    cfg = mem.config
    assert (res.theta > 0).all() and (res.theta < cfg.theta_max).all()
    assert (res.alpha > 0).all() and (res.alpha < cfg.alpha_max).all()


@pytest.mark.parametrize("change", [{"dim": 32}, {"depth": 1}, {"expansion": 4}, {"theta_max": 0.2, "theta_init": 0.1}])
def test_meta_learned_refuses_a_config_it_was_not_trained_for(change):
    with pytest.raises(InvalidInputError, match="init='random'"):
        NeuralMemory(MemoryConfig(init="meta-learned", **change))


def test_tiny_outer_loop_lowers_the_loss(trainer):
    """A few Adam steps on synthetic streams (units: random unit vectors; cues: noisy copies of
    some of them) lower the held-out InfoNCE loss of the read-out, and stay finite."""
    torch.manual_seed(0)
    d, n_units = 16, 640
    gen = torch.Generator().manual_seed(0)
    units = torch.nn.functional.normalize(torch.randn(n_units, d, generator=gen), dim=-1)
    cue_unit = torch.arange(0, n_units, 2)
    cues = torch.nn.functional.normalize(
        units[cue_unit] + 0.6 * torch.randn(cue_unit.numel(), d, generator=gen), dim=-1
    )
    split = trainer.Split(units, cues, cue_unit)
    mem = NeuralMemory(MemoryConfig(dim=d, chunk_size=4, seed=3))
    with torch.no_grad():  # a poor start, so that there is something to learn
        mem.W_Q.copy_(torch.linalg.qr(torch.randn(d, d, generator=gen))[0])
    before = trainer.evaluate(mem, split, stream=16, n_windows=32, tau=0.1)
    curve, kept = trainer.train(
        mem,
        split,
        steps=60,
        batch=8,
        stream=16,
        max_cues=8,
        lr=1e-2,
        tau=0.1,
        seed=0,
        log_every=20,
        progress=lambda s: None,
    )
    after = trainer.evaluate(mem, split, stream=16, n_windows=32, tau=0.1)
    assert all(torch.isfinite(p).all() for p in mem.parameters())
    assert kept == 60 and curve[-1][1] < curve[0][1]
    assert after["loss"] < 0.8 * before["loss"], (before, after)
    assert after["r1"] > before["r1"]


def test_meta_learned_init_refuses_another_embedder(tmp_path, fake_embedder):
    """The shipped parameters fit all-MiniLM-L6-v2 only: a namespace with another embedder of the
    same width is refused with a clear error instead of silently using mismatched projections."""
    from titans_agent import AgentConfig, MemoryAgent

    cfg = AgentConfig(memory=MemoryConfig(init="meta-learned"))
    with MemoryAgent.open(tmp_path / "m.db", cfg, embedder=fake_embedder) as agent:
        with pytest.raises(InvalidInputError, match="trained for the embedder"):
            agent.remember("a note")
