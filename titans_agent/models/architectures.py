"""The Titans model family (paper section 4, docs/titans.md section 3): MAC, MAG, MAL, LMM, and the
sliding-window-attention-only baseline, as small token-level language models.

Every block is pre-norm with residual connections: a sequence mixer (attention and/or the neural
memory) then a SwiGLU feed-forward layer. Persistent memory (eq. 19) is ``N_p`` learnable tokens
per block, always visible to attention and prepended to the memory's input in MAG, MAL and LMM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from titans_agent.models.config import ModelConfig
from titans_agent.models.layers import (
    CausalConv,
    FeedForward,
    LayerMemoryState,
    NeuralMemoryLayer,
    WindowAttention,
    window_mask,
)

__all__ = ["BlockCache", "TitansLM", "build_model", "shift_init"]


@torch.no_grad()
def shift_init(conv: CausalConv, shifted: slice | None = None) -> None:
    """Start a depthwise causal convolution as the identity (a unit tap at lag 0, zero bias); the
    channels in ``shifted`` instead pass the previous token (a unit tap at lag 1), the "shift" that
    lets a key be the token before the value (H3, Fu et al. 2023). Every tap stays trainable."""
    w, b = conv.conv.weight, conv.conv.bias  # (channels, 1, kernel), (channels,)
    w.zero_()
    w[:, 0, -1] = 1.0
    if shifted is not None and conv.kernel > 1:
        w[shifted, 0, -1] = 0.0
        w[shifted, 0, -2] = 1.0
    if b is not None:
        b.zero_()


@dataclass(frozen=True)
class BlockCache:
    """What one block carries from one call to the next (streaming).

    Attributes:
        memory: the memory layer's state (MAC: as of the start of the current segment).
        tail: the last ``window + conv_kernel - 2`` inputs of the window attention.
        prefix: MAL's persistent prefix as read out by the memory on the first call.
        segment: MAC's inputs of the unfinished current segment.
        retrieve: MAC's retrieval convolution cache at the start of the current segment.
    """

    memory: LayerMemoryState | None = None
    tail: Tensor | None = None
    prefix: Tensor | None = None
    segment: Tensor | None = None
    retrieve: Tensor | None = None


class _GateCombine(nn.Module):
    """``o = W_o (sigmoid(norm(y)) * norm(m))``: the non-linear gate of MAG and MAC (eq. 25, 28).

    The normalised attention output ``y`` gates the normalised memory read ``m`` channel by channel;
    the gate starts near 0.5, so what the memory recalls reaches the output from the first step.
    (Measured on recall, width 64: with ``norm(y) * SiLU(norm(m))`` MAG was still on the loss
    plateau after 346 steps; with this gate it was at 98% at 8x the window after 338.)"""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.norm_y = nn.RMSNorm(config.width)
        self.norm_m = nn.RMSNorm(config.width)
        self.proj = nn.Linear(config.width, config.width, bias=False)

    def forward(self, y: Tensor, m: Tensor) -> Tensor:
        return self.proj(torch.sigmoid(self.norm_y(y)) * self.norm_m(m))


class Block(nn.Module):
    """One block of the architecture named by ``config.architecture``."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        arch = config.architecture
        d = config.width
        self.norm = nn.RMSNorm(d)
        self.ffn_norm = nn.RMSNorm(d)
        self.ffn = FeedForward(config)
        self.persistent = nn.Parameter(0.02 * torch.randn(config.persistent_tokens, d))
        self.attn = WindowAttention(config) if arch != "lmm" else None
        self.memory = NeuralMemoryLayer(config) if arch != "swa" else None
        if self.memory is not None and arch == "mac":  # MAC reads the memory before each segment
            self.memory.defer_update = False
        if arch in ("mac", "mag"):
            self.combine = _GateCombine(config)
        if arch == "mac":
            # W_Q of the retrieval h = M*_{prev}(S W_Q) (eq. 21), with its own causal convolution.
            self.retrieve_q = nn.Linear(d, d, bias=False)
            self.retrieve_conv = CausalConv(d, config.conv_kernel)

    def _prefix(self, u: Tensor) -> Tensor:
        return self.persistent.unsqueeze(0).expand(u.shape[0], -1, -1).to(u.dtype)

    def _memory_stream(self, u: Tensor, cache: BlockCache | None) -> tuple[Tensor, LayerMemoryState]:
        """The memory over ``[persistent] || u`` (the prefix only on the first call): ``(b, p + n, d)``
        on the first call, ``(b, n, d)`` after."""
        assert self.memory is not None
        if cache is None:
            return self.memory(torch.cat([self._prefix(u), u], dim=1))
        assert cache.memory is not None
        return self.memory(u, cache.memory)

    def _attend(self, u: Tensor, prefix: Tensor, tail: Tensor | None) -> tuple[Tensor, Tensor]:
        """Sliding-window attention for ``u`` ``(b, n, d)`` continuing ``tail`` (the last inputs before
        ``u``); returns ``(b, n, d)`` and the new tail, ``window + conv_kernel - 2`` inputs long: all
        that the next tokens' keys and values depend on."""
        assert self.attn is not None
        c = self.config
        full = u if tail is None else torch.cat([tail, u], dim=1)
        mask = window_mask(full.shape[1], prefix.shape[1], c.window, u.device)
        out = self.attn(full, prefix, mask)[:, full.shape[1] - u.shape[1] :]
        keep = c.window + c.conv_kernel - 2
        return out, full[:, max(0, full.shape[1] - keep) :]

    def _mac_segment(
        self, seg: Tensor, state: LayerMemoryState, rcache: Tensor | None
    ) -> tuple[Tensor, LayerMemoryState, Tensor]:
        """Memory as context (eq. 21-25) over one segment ``(b, C', d)`` from its start.

        ``y = Attn([persistent] || h || S)`` (eq. 22-23); the memory learns the attention sub-layer's
        output with its residual connection, ``S + y`` (eq. 24 with the residual of section 4.4: the
        tokens themselves plus what attention adds), and reads it back at every token with the
        memory as of that token; the output is ``o = y (x) M*(S + y)`` (eq. 25), gated by the
        attention output ``y`` itself, as in MAG (eq. 28).

        Why the gate takes ``y`` and not ``S + y``: at initialisation the attention output is about
        5% of the normalised input (RMS 0.05 vs 1.0, width 64), so ``sigmoid(norm(S + y))`` is
        a function of the current token alone (attention moved it by 0.008 on average) and the
        attention barely reaches the block's output; on recall (width 64, 70 CPU-s) MAC stayed at
        the loss plateau (26% / 11% at 2x / 8x the window) and at 5% after 240 s, against 100% /
        100% with the gate on ``y``. Storing ``y`` alone instead of ``S + y`` loses the tokens'
        identity (attention averages over the segment): 2% / 3%, chance."""
        assert self.memory is not None and self.attn is not None
        size = seg.shape[1]
        p = self._prefix(seg)
        # h = M*_{prev}(S W_Q): read with the memory as it was before this segment (eq. 21).
        rq, rcache = self.retrieve_conv(self.retrieve_q(seg), rcache)
        rq = F.normalize(self.memory._heads(F.silu(rq)), dim=-1)
        h = self.memory.output(self.memory.read_static(state.weights, rq), seg)
        # y = Attn([persistent] || h || S), causal inside the segment (eq. 22-23).
        tril = torch.ones(size, size, dtype=torch.bool, device=seg.device).tril()
        mask = torch.cat([torch.ones(size, p.shape[1], dtype=torch.bool, device=seg.device), tril, tril], dim=1)
        y = self.attn(seg, torch.cat([p, h], dim=1), mask)
        # The memory learns the attention sub-layer's output with its residual connection (eq. 24,
        # section 4.4) and reads it at every token as of that token: the updated memory of eq. 25.
        m, state = self.memory(seg + y, state)
        # o = y (x) M*(.): the normalised attention output gates the normalised read (eq. 25).
        return self.combine(y, m), state, rcache

    def _mac(self, u: Tensor, cache: BlockCache | None) -> tuple[Tensor, BlockCache]:
        """MAC segment by segment; an unfinished segment is kept and recomputed from its start."""
        assert self.memory is not None
        c = self.config
        if cache is None:
            cache = BlockCache(memory=self.memory.init_state(u.shape[0]), segment=u[:, :0])
        assert cache.memory is not None and cache.segment is not None
        done = cache.segment.shape[1]  # tokens of the current segment already returned
        seq = torch.cat([cache.segment, u], dim=1)
        state, rcache, outs = cache.memory, cache.retrieve, []
        for s0 in range(0, seq.shape[1], c.segment):
            seg = seq[:, s0 : s0 + c.segment]
            out, new_state, new_rcache = self._mac_segment(seg, state, rcache)
            outs.append(out[:, done:] if s0 == 0 else out)
            if seg.shape[1] == c.segment:
                state, rcache = new_state, new_rcache
        rest = seq.shape[1] % c.segment
        return torch.cat(outs, dim=1), BlockCache(memory=state, retrieve=rcache, segment=seq[:, seq.shape[1] - rest :])

    def forward(self, x: Tensor, cache: BlockCache | None = None) -> tuple[Tensor, BlockCache]:
        """``(b, n, d) -> (b, n, d)``, continuing ``cache`` (None: the start of a sequence).

        Returns:
            The outputs and the cache after the last token.
        """
        c = self.config
        arch = c.architecture
        u = self.norm(x)
        n_p = c.persistent_tokens if cache is None else 0  # the memory's prefix, first call only
        tail = None if cache is None else cache.tail
        if arch == "mac":
            mixed, new = self._mac(u, cache)
        elif arch == "swa":
            mixed, tail = self._attend(u, self._prefix(u), tail)
            new = BlockCache(tail=tail)
        else:
            m, state = self._memory_stream(u, cache)
            if arch == "lmm":
                mixed = m[:, n_p:]
                new = BlockCache(memory=state)
            elif arch == "mag":
                y, tail = self._attend(u, self._prefix(u), tail)
                mixed = self.combine(y, m[:, n_p:])
                new = BlockCache(memory=state, tail=tail)
            else:  # mal: y = M([persistent] || x), o = y + SWA(y) with the memory's prefix visible
                # (the memory is a layer of its own with a residual connection, section 4.4; without
                # it a read reaches the output only through attention averaged over the window)
                prefix = m[:, :n_p] if cache is None else cache.prefix
                assert prefix is not None
                attended, tail = self._attend(m[:, n_p:], prefix, tail)
                mixed = m[:, n_p:] + attended
                new = BlockCache(memory=state, tail=tail, prefix=prefix)
        x = x + mixed
        return x + self.ffn(self.ffn_norm(x)), new


class TitansLM(nn.Module):
    """A token-level language model of one Titans architecture (or the window-attention baseline).

    Args:
        config: the model configuration; stored in :meth:`checkpoint` so the model can be rebuilt.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.width)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = nn.RMSNorm(config.width)
        self.head = nn.Linear(config.width, config.vocab_size, bias=False)
        nn.init.normal_(self.embed.weight, std=0.5)
        if config.conv_init == "shift":
            self._shift_convs()

    def _shift_convs(self) -> None:
        """``conv_init="shift"``: queries and values see the current token; keys see the previous
        token on the first half of the channels (with an even number of heads: whole heads) and the
        current token on the rest, in the memory and in the attention."""
        c = self.config
        half = c.width // 2
        for block in self.blocks:
            assert isinstance(block, Block)
            memory = block.memory
            if memory is not None:
                shift_init(memory.q_conv)
                shift_init(memory.v_conv)
                shift_init(memory.k_conv, slice(0, half))
            if block.attn is not None:  # one convolution over [q | k | v]
                shift_init(block.attn.conv, slice(c.width, c.width + half))
            if c.architecture == "mac":
                shift_init(block.retrieve_conv)

    def forward(self, tokens: Tensor) -> Tensor:
        """Next-token logits ``(b, n, vocab)`` of token ids ``(b, n)``; causal: the logits at t depend
        only on tokens 0..t.

        Raises:
            ValueError: ``tokens`` is not a 2-D integer tensor of ids below ``vocab_size``.
        """
        return self.stream(tokens)[0]

    def stream(self, tokens: Tensor, cache: list[BlockCache] | None = None) -> tuple[Tensor, list[BlockCache]]:
        """Next-token logits ``(b, n, vocab)`` of ``tokens`` ``(b, n)`` continuing ``cache``.

        A prompt in one call, then the rest token by token (or in any pieces), gives the same
        logits as one call over the whole sequence; the cache's size does not grow with the
        sequence (memory state, a window of inputs, and for MAC the current segment).

        Raises:
            ValueError: ``tokens`` is not a 2-D integer tensor of ids in ``[0, vocab_size)``, or
                the sequence is empty without a cache to return.
        """
        if tokens.ndim != 2 or tokens.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
            raise ValueError(f"expected integer token ids of shape (b, n), got {tuple(tokens.shape)} {tokens.dtype}")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.config.vocab_size):
            raise ValueError(
                f"token ids must lie in [0, {self.config.vocab_size}), got {int(tokens.min())}..{int(tokens.max())}"
            )
        if tokens.shape[1] == 0:
            if cache is None:
                raise ValueError("an empty sequence (n = 0) with no cache: nothing to compute")
            return tokens.new_zeros(tokens.shape[0], 0, self.config.vocab_size, dtype=self.head.weight.dtype), cache
        tokens = tokens.long()
        x = self.embed(tokens).to(self.head.weight.dtype)  # (b, n, d)
        new = []
        for i, block in enumerate(self.blocks):
            x, c = block(x, None if cache is None else cache[i])
            new.append(c)
        return self.head(self.norm(x)), new

    def num_parameters(self) -> int:
        """Number of trainable parameters."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def checkpoint(self) -> dict[str, Any]:
        """The config (as a dict) and the weights: enough to rebuild with :func:`build_model`."""
        return {"config": self.config.model_dump(), "state_dict": self.state_dict()}


def build_model(config: ModelConfig | dict[str, Any], state_dict: dict[str, Tensor] | None = None) -> TitansLM:
    """Build a :class:`TitansLM` from a config (or its dict form), optionally loading weights."""
    cfg = config if isinstance(config, ModelConfig) else ModelConfig.model_validate(config)
    model = TitansLM(cfg)
    if state_dict is not None:
        model.load_state_dict(state_dict)
    return model
