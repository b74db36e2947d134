"""The Titans model family (titans_agent.models): shapes, causality, gradients, the memory layer's
chunked update against a naive token loop, state carried across calls, the task generators, and a
short training run in which the memory model beats the window-only baseline."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError

from titans_agent.errors import InvalidInputError
from titans_agent.models import ARCHITECTURES, ModelConfig, NeuralMemoryLayer, build_model
from titans_agent.models.tasks import (
    IGNORE,
    TaskConfig,
    associative_recall_batch,
    permutation_batch,
    train_and_eval,
)

torch.set_num_threads(1)
F64 = torch.float64

SMALL = dict(vocab_size=20, width=16, layers=2, heads=2, window=6, segment=8, chunk=4, persistent_tokens=2)


def _model(arch: str, dtype: torch.dtype = torch.float64, memory_read: str = "token", gate_rank: int = 0):
    torch.manual_seed(0)
    cfg = ModelConfig(architecture=arch, memory_read=memory_read, gate_rank=gate_rank, **SMALL)
    return build_model(cfg).to(dtype)


# (architecture, memory_read, gate_rank): token-level reads for all, chunk-start reads and
# per-channel gates for the memory models
MEMORY_READS = (
    [(a, "token", 0) for a in ARCHITECTURES]
    + [(a, "chunk", 0) for a in ("lmm", "mag", "mal")]
    + [(a, "token", 3) for a in ("lmm", "mac", "mag", "mal")]
    + [("mag", "chunk", 3)]
)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_shapes_and_finite(arch: str) -> None:
    model = _model(arch, torch.float32)
    tokens = torch.randint(0, 20, (3, 29))  # not a multiple of the chunk, segment or window
    logits = model(tokens)
    assert logits.shape == (3, 29, 20)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize(("arch", "memory_read", "gate_rank"), MEMORY_READS)
def test_causal(arch: str, memory_read: str, gate_rank: int) -> None:
    """The logits at t do not change when tokens after t change (across chunk, segment and window
    boundaries), with token-level or chunk-start reads, per-token or per-channel gates."""
    model = _model(arch, memory_read=memory_read, gate_rank=gate_rank)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 20, (2, 30), generator=g)
    base = model(tokens)
    for t in (0, 5, 11, 17, 28):
        changed = tokens.clone()
        changed[:, t + 1 :] = torch.randint(0, 20, changed[:, t + 1 :].shape, generator=g)
        out = model(changed)
        torch.testing.assert_close(out[:, : t + 1], base[:, : t + 1], rtol=0, atol=1e-10)
        assert not torch.allclose(out[:, t + 1 :], base[:, t + 1 :])  # the future does change them


@pytest.mark.parametrize(("arch", "gate_rank"), [(a, 0) for a in ARCHITECTURES] + [("mag", 3)])
def test_gradients_reach_every_parameter(arch: str, gate_rank: int) -> None:
    model = _model(arch, torch.float32, gate_rank=gate_rank)
    logits = model(torch.randint(0, 20, (2, 24)))
    torch.nn.functional.cross_entropy(logits.reshape(-1, 20), torch.randint(0, 20, (48,))).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


@pytest.mark.parametrize(("arch", "memory_read", "gate_rank"), MEMORY_READS)
def test_streaming_equals_one_pass(arch: str, memory_read: str, gate_rank: int) -> None:
    """A prompt in one pass, then the rest token by token (and in uneven pieces), gives the logits
    of one pass over the whole sequence (token-level or chunk-start reads, per-channel gates)."""
    model = _model(arch, memory_read=memory_read, gate_rank=gate_rank)
    tokens = torch.randint(0, 20, (2, 31), generator=torch.Generator().manual_seed(2))
    whole = model(tokens)
    for cuts in ([13, *range(14, 31)], [1, 6, 7, 19, 27]):
        outs, cache = [], None
        for lo, hi in zip([0, *cuts], [*cuts, 31]):
            out, cache = model.stream(tokens[:, lo:hi], cache)
            outs.append(out)
        torch.testing.assert_close(torch.cat(outs, 1), whole, rtol=0, atol=1e-10)
    tails = [c.tail for c in cache if c.tail is not None]
    assert all(t.shape[1] <= SMALL["window"] + 4 - 2 for t in tails)  # the cache does not grow


def _naive(mem, m, s, q, k, v, theta, eta, alpha, chunk):
    """Token loop of eq. 13-14 with every gradient taken at its chunk's start (docs/titans.md section 5, oracle 1)."""
    reads = []
    for s0 in range(0, q.shape[2], chunk):
        start = m.clone()
        for t in range(s0, min(s0 + chunk, q.shape[2])):
            err = start @ k[:, :, t, :, None] - v[:, :, t, :, None]
            s = eta[:, :, t, None, None] * s - theta[:, :, t, None, None] * 2 * err @ k[:, :, t, None, :]
            m = (1 - alpha[:, :, t, None, None]) * m + s
            reads.append((m @ q[:, :, t, :, None]).squeeze(-1))
    return torch.stack(reads, 2), m, s


@pytest.mark.parametrize("chunk", [1, 3, 4])
def test_chunked_update_equals_token_loop(chunk: int) -> None:
    cfg = ModelConfig(width=8, heads=2, chunk=chunk, segment=12, max_grad_norm=1e6)
    mem = NeuralMemoryLayer(cfg).double()
    g = torch.Generator().manual_seed(0)
    shape = (2, 2, 11, 4)
    q, k = (torch.nn.functional.normalize(torch.randn(shape, generator=g, dtype=torch.float64), dim=-1) for _ in "qk")
    v = torch.randn(shape, generator=g, dtype=torch.float64)
    theta, eta = (torch.rand(shape[:3], generator=g, dtype=torch.float64) for _ in "te")
    alpha = 0.3 * torch.rand(shape[:3], generator=g, dtype=torch.float64)
    m0 = torch.randn(2, 2, 4, 4, generator=g, dtype=torch.float64)
    s0 = torch.randn(2, 2, 4, 4, generator=g, dtype=torch.float64)
    want = _naive(mem, m0, s0, q, k, v, theta, eta, alpha, chunk)
    reads, m, s = [], m0, s0
    for c0 in range(0, 11, chunk):
        sl = slice(c0, c0 + chunk)
        r, m, s = mem._chunk(m, s, q[:, :, sl], k[:, :, sl], v[:, :, sl], theta[..., sl], eta[..., sl], alpha[..., sl])
        reads.append(r)
    torch.testing.assert_close(torch.cat(reads, 2), want[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(m, want[1], rtol=0, atol=1e-12)
    torch.testing.assert_close(s, want[2], rtol=0, atol=1e-12)


def test_split_across_calls_equals_one_call() -> None:
    """Carrying the layer state (weights, momentum, convolution caches) across calls split
    anywhere (token by token too) equals one call (docs/titans.md section 5, oracle 3)."""
    cfg = ModelConfig(width=8, heads=2, chunk=4, segment=8)
    torch.manual_seed(0)
    mem = NeuralMemoryLayer(cfg).double()
    x = torch.randn(2, 21, 8, dtype=torch.float64)
    whole, end = mem(x)
    for cuts in ([8, 12], [3, 5, 6, 13, 20], list(range(1, 21))):
        outs, state = [], None
        for lo, hi in zip([0, *cuts], [*cuts, 21]):
            out, state = mem(x[:, lo:hi], state)
            outs.append(out)
        torch.testing.assert_close(torch.cat(outs, 1), whole, rtol=0, atol=1e-12)
        torch.testing.assert_close(state.weights, end.weights, rtol=0, atol=1e-12)
        torch.testing.assert_close(state.pending, x[:, 20:], rtol=0, atol=0)


def test_gradcheck_through_the_inner_update() -> None:
    """Gradients of the outer parameters (here M_0 and the gate projection) flow through the update
    (docs/titans.md section 5, oracle 6)."""
    cfg = ModelConfig(width=4, heads=1, chunk=2, segment=2, conv_kernel=2)
    torch.manual_seed(0)
    mem = NeuralMemoryLayer(cfg).double()
    x = torch.randn(1, 5, 4, dtype=torch.float64)

    def f(m0: torch.Tensor, gate_w: torch.Tensor) -> torch.Tensor:
        params = {"M0": m0, "gate_proj.weight": gate_w}
        return torch.func.functional_call(mem, params, (x,))[0]

    inputs = (mem.M0.detach().clone().requires_grad_(), mem.gate_proj.weight.detach().clone().requires_grad_())
    assert torch.autograd.gradcheck(f, inputs)


def test_mac_computes_eq_21_to_25() -> None:
    """MAC over two segments, by hand (docs/titans.md section 3): h = M*_prev(S W_Q) with the memory
    from before the segment; y = Attn([persistent] || h || S); the memory learns S + y (the attention
    sub-layer with its residual connection) and is read as of each token; o = y (x) M*(S + y), the
    gate driven by the attention output y."""
    model = _model("mac")
    block = model.blocks[0]
    seg_len = SMALL["segment"]
    u = torch.randn(2, 2 * seg_len, SMALL["width"], dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    mem = block.memory
    state, rcache, outs = mem.init_state(2), None, []
    for s0 in (0, seg_len):
        seg = u[:, s0 : s0 + seg_len]
        rq, rcache = block.retrieve_conv(block.retrieve_q(seg), rcache)
        rq = torch.nn.functional.normalize(mem._heads(torch.nn.functional.silu(rq)), dim=-1)
        h = mem.output(mem.read_static(state.weights, rq), seg)
        tril = torch.ones(seg_len, seg_len, dtype=torch.bool).tril()
        mask = torch.cat([torch.ones(seg_len, SMALL["persistent_tokens"], dtype=torch.bool), tril, tril], dim=1)
        y = block.attn(seg, torch.cat([block._prefix(seg), h], dim=1), mask)
        m, state = mem(seg + y, state)
        outs.append(block.combine(y, m))
    out, cache = block._mac(u, None)
    torch.testing.assert_close(out, torch.cat(outs, dim=1), rtol=0, atol=1e-12)
    for got, want in zip(cache.memory.weights, state.weights):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_checkpoint_rebuilds_the_model() -> None:
    model = _model("mac", torch.float32)
    ckpt = model.checkpoint()
    again = build_model(ckpt["config"], ckpt["state_dict"])
    tokens = torch.randint(0, 20, (1, 17))
    torch.testing.assert_close(again(tokens), model(tokens))


def test_config_rejects_mistakes() -> None:
    with pytest.raises(ValidationError):
        ModelConfig(widht=64)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="multiple of chunk"):
        ModelConfig(segment=10, chunk=4)
    with pytest.raises(ValueError, match="multiple of heads"):
        ModelConfig(width=30, heads=4)
    with pytest.raises(ValueError):
        build_model(ModelConfig(**SMALL))(torch.zeros(2, 3))  # float tokens
    with pytest.raises(InvalidInputError):
        train_and_eval(architectures=("transformer",))
    with pytest.raises(InvalidInputError, match="multiple of chunk"):
        train_and_eval(window=20, chunk=16)  # MAC's segment is the window
    with pytest.raises(ValidationError):
        ModelConfig(memory_read="lagged")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs a matrix memory"):
        ModelConfig(gate_rank=4, memory_depth=2)
    assert TaskConfig(memory_read="chunk")._model_config("mag", 2).memory_read == "chunk"
    assert TaskConfig(gate_rank=4)._model_config("lmm", 2).gate_rank == 4


def test_recall_generator_places_pairs_beyond_the_baseline_field() -> None:
    cfg = TaskConfig()
    length = 8 * cfg.window
    tokens, targets = associative_recall_batch(16, length, 8, 32, 32, torch.Generator().manual_seed(0))
    field = cfg.model_config_for("swa").receptive_field()
    for row, tgt in zip(tokens.tolist(), targets.tolist()):
        asked = [i for i, t in enumerate(tgt) if t != IGNORE]
        assert len(asked) == 8
        keys_in_filler = [t for t in row[24 : length - 16] if t < 32]
        assert keys_in_filler == []  # filler and distractors are value tokens only
        for i in asked:
            key, value = row[i], tgt[i]
            stored = [j for j in range(24) if row[j] == key]
            assert len(stored) == 1 and row[stored[0] + 1] == value
            assert i - stored[0] > field  # out of the window model's reach


def test_permutation_generator_composes() -> None:
    tokens, targets = permutation_batch(4, 40, 3, torch.Generator().manual_seed(0))
    elems = list(itertools.permutations(range(3)))
    for row, tgt in zip(tokens.tolist(), targets.tolist()):
        state = tuple(range(3))
        for tok, want in zip(row, tgt):
            g = elems[tok]
            state = tuple(g[x] for x in state)
            assert elems[want] == state


def test_causal_convolution_is_the_depthwise_conv1d_with_its_cache() -> None:
    """The shifted multiply-adds compute torch's depthwise Conv1d over (cache, x), gradients too;
    the cache is the last kernel - 1 inputs before ``cache_at``."""
    from titans_agent.models.layers import CausalConv

    torch.manual_seed(0)
    conv = CausalConv(6, 4).double()
    x = torch.randn(2, 9, 6, dtype=torch.float64, requires_grad=True)
    cache = torch.randn(2, 3, 6, dtype=torch.float64)
    y, new_cache = conv(x, cache, cache_at=5)
    full = torch.cat([cache, x], dim=1)
    want = torch.nn.functional.conv1d(full.transpose(1, 2), conv.conv.weight, conv.conv.bias, groups=6).transpose(1, 2)
    torch.testing.assert_close(y, want, rtol=0, atol=1e-14)
    torch.testing.assert_close(new_cache, full[:, 5:8], rtol=0, atol=0)
    (gx,) = torch.autograd.grad(y.square().sum(), x)
    (gw,) = torch.autograd.grad(want.square().sum(), x)
    torch.testing.assert_close(gx, gw, rtol=0, atol=1e-12)
    y0, c0 = conv(x[:, :2])  # no cache: zeros before the first token
    torch.testing.assert_close(y0, conv(x[:, :2], torch.zeros(2, 3, 6, dtype=torch.float64))[0], rtol=0, atol=0)
    assert c0.shape == (2, 3, 6)
    assert torch.autograd.gradcheck(lambda t: conv(t, cache[:1])[0], (x[:1, :4].detach().requires_grad_(),))


def test_memory_layer_convolves_its_three_streams_as_each_own_conv() -> None:
    """The layer's q, k, v (one convolution over the 3d channels) equal each stream through its own
    projection, CausalConv and SiLU (q and k normalised per head), with the same caches: views into
    one copy of their few tokens (not into the input); every conv's parameters get their gradients."""
    from titans_agent.models.layers import NeuralMemoryLayer

    torch.manual_seed(0)
    layer = NeuralMemoryLayer(ModelConfig(width=12, heads=2, conv_kernel=4)).double()
    x = torch.randn(2, 7, 12, dtype=torch.float64)
    caches = tuple(torch.randn(2, 3, 12, dtype=torch.float64) for _ in range(3))
    q, k, v, got = layer._qkv(x, caches, 5)
    outs = []
    for proj, conv, cache in zip(
        (layer.q_proj, layer.k_proj, layer.v_proj), (layer.q_conv, layer.k_conv, layer.v_conv), caches
    ):
        y, c = conv(proj(x), cache, 5)
        outs.append(layer._heads(F.silu(y)))
        torch.testing.assert_close(got[len(outs) - 1], c, rtol=0, atol=0)
    torch.testing.assert_close(q, F.normalize(outs[0], dim=-1), rtol=0, atol=1e-14)
    torch.testing.assert_close(k, F.normalize(outs[1], dim=-1), rtol=0, atol=1e-14)
    torch.testing.assert_close(v, outs[2], rtol=0, atol=1e-14)
    assert all(c.untyped_storage().nbytes() == 2 * 3 * 36 * 8 for c in got)  # the 3 tokens' 3d channels only
    (q.sum() + k.square().sum() + v.sum()).backward()
    for conv in (layer.q_conv, layer.k_conv, layer.v_conv):
        assert conv.conv.weight.grad is not None and bool(conv.conv.weight.grad.abs().sum() > 0)


def test_memory_layer_state_holds_no_view_of_the_callers_input() -> None:
    """A caller that refills its input buffer after a call does not change what the next call
    computes: the state's pending tokens and conv caches are copies, not views of the input."""
    torch.manual_seed(0)
    layer = NeuralMemoryLayer(ModelConfig(width=16, heads=2, chunk=4, conv_kernel=4))
    x, y = torch.randn(1, 10, 16), torch.randn(1, 3, 16)
    with torch.no_grad():
        _, state = layer(x)
        want, _ = layer(y, state)
        buffer = x.clone()
        _, state = layer(buffer)
        assert state.pending.shape[1] == 2
        buffer.zero_()
        got, _ = layer(y, state)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    held = [state.pending, *state.conv]
    assert all(t.untyped_storage().data_ptr() != buffer.untyped_storage().data_ptr() for t in held)


def test_shift_initialisation_of_the_convolutions() -> None:
    """conv_init="shift": memory and attention keys see the previous token on half the channels,
    queries and values the current token; "default" leaves PyTorch's initialisation."""
    cfg = ModelConfig(architecture="mag", width=16, heads=2, layers=1, vocab_size=8)
    block = build_model(cfg).blocks[0]
    x = torch.randn(1, 6, 16)
    k, _ = block.memory.k_conv(x)
    torch.testing.assert_close(k[:, 1:, :8], x[:, :-1, :8])  # previous token
    torch.testing.assert_close(k[:, :, 8:], x[:, :, 8:])  # current token
    for conv in (block.memory.q_conv, block.memory.v_conv):
        torch.testing.assert_close(conv(x)[0], x)
    qkv, _ = block.attn.conv(torch.cat([x, x, x], dim=-1))
    torch.testing.assert_close(qkv[:, 1:, 16:24], x[:, :-1, :8])
    torch.testing.assert_close(qkv[:, :, :16], x)
    plain = build_model(cfg.model_copy(update={"conv_init": "default"})).blocks[0]
    assert not torch.allclose(plain.memory.q_conv(x)[0], x)


@pytest.mark.slow
def test_memory_model_beats_window_baseline_beyond_its_reach() -> None:
    """The smallest recall case (300 steps each, about 25 s of one core in all): at 8x the window
    the pairs lie beyond the window model's receptive field; LMM and MAG still recall them, the
    same-size window-only baseline stays near chance."""
    report = train_and_eval(
        architectures=("lmm", "mag", "swa"),
        width=32,
        layers=1,
        heads=1,
        window=8,
        chunk=4,
        persistent_tokens=2,
        pairs=2,
        keys=8,
        values=8,
        steps=300,
        batch_size=32,
        lr=1e-2,
        eval_multiples=(8,),
        eval_sequences=128,
    )
    lmm, mag, swa = report.results
    assert abs(swa.parameters - mag.parameters) < 0.15 * mag.parameters  # the same size
    acc_lmm, acc_mag, acc_swa = lmm.accuracy[64], mag.accuracy[64], swa.accuracy[64]
    # Measured here (seed 0): LMM 100%, MAG 100%, SWA 10.5% at 64 tokens (chance 12.5%).
    assert acc_swa < report.chance + 0.1
    assert acc_lmm > acc_swa + 0.5
    assert acc_mag > acc_swa + 0.5


def test_token_ids_out_of_range_or_an_empty_first_call_are_clear_errors() -> None:
    model = build_model(ModelConfig(architecture="mag", vocab_size=20, width=8, heads=2, chunk=4, segment=8, window=8))
    with pytest.raises(ValueError, match="token ids"):
        model(torch.tensor([[25, 1]]))
    with pytest.raises(ValueError, match="token ids"):
        model(torch.tensor([[-1, 1]]))
    with pytest.raises(ValueError, match="empty"):
        model(torch.zeros(2, 0, dtype=torch.long))
    logits, cache = model.stream(torch.tensor([[1, 2, 3]]))
    empty, same = model.stream(torch.zeros(1, 0, dtype=torch.long), cache)
    assert empty.shape == (1, 0, 20) and same is cache
    assert model(torch.tensor([[1, 2]], dtype=torch.uint8)).shape == (1, 2, 20)


def test_docs_models_snippet_runs_as_written() -> None:
    """The Python example of the models page (docs/design/models.md) runs as written and its
    comments hold: the streamed logits equal one pass, and the checkpoint rebuilds the same model."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "design" / "models.md").read_text(encoding="utf-8")
    start = text.index('config = ModelConfig(architecture="mag"')
    begin = text.rindex("```python", 0, start) + len("```python")
    snippet = text[begin : text.index("```", start)]
    scope: dict = {}
    exec(compile(snippet, "docs/design/models.md", "exec"), scope)  # noqa: S102 - the project's own docs
    logits, out, again, tokens = scope["logits"], scope["out"], scope["again"], scope["tokens"]
    assert logits.shape == (1, 100, 256)
    torch.testing.assert_close(out, logits[:, 90:91], rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # the same model: bitwise the same logits on the same path; without
        # autograd the scan updates in place (rounding apart from the autograd pass's logits)
        torch.testing.assert_close(again(tokens), scope["model"](tokens), rtol=0, atol=0)
        torch.testing.assert_close(again(tokens), logits.detach(), rtol=1e-4, atol=1e-5)


def test_per_channel_gates_reach_the_scan_per_channel(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``gate_rank`` the low-rank map's offsets make the gates per channel: with the map's up
    projection at zero the layer is exactly the per-token one (same parameters otherwise); with
    it, every channel of a head gets its own theta, eta, alpha (the scan's per-channel path, whose
    oracle is in test_scan.py) and the outputs change."""
    torch.manual_seed(0)
    base = ModelConfig(width=8, heads=2, chunk=4, segment=8)
    plain = NeuralMemoryLayer(base).double()
    channel = NeuralMemoryLayer(base.model_copy(update={"gate_rank": 2})).double()
    missing = channel.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert sorted(missing) == ["gate_down.weight", "gate_up.weight"]
    x = torch.randn(2, 13, 8, dtype=F64)
    assert channel.gate_up is not None
    with torch.no_grad():
        channel.gate_up.weight.zero_()
        torch.testing.assert_close(channel(x)[0], plain(x)[0], rtol=0, atol=1e-13)
        channel.gate_up.weight.normal_()
        assert not torch.allclose(channel(x)[0], plain(x)[0])
    seen = []
    import titans_agent.models.layers as layers_mod

    real = layers_mod.memory_scan

    def spy(*args, **kwargs):
        seen.append(args[4].shape)  # theta
        return real(*args, **kwargs)

    monkeypatch.setattr(layers_mod, "memory_scan", spy)
    with torch.no_grad():
        channel(x)
    assert seen == [(2 * 2, 13, 4)]  # (batch x heads, tokens, head_dim): one theta per channel
