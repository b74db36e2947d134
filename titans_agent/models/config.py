"""Configuration of the Titans sequence models (pydantic 2, ``extra="forbid"``).

One :class:`ModelConfig` is passed to every module of a model and stored with its weights in a
checkpoint, so a model can be rebuilt from a checkpoint alone (docs/titans.md section 3).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ARCHITECTURES", "Architecture", "ModelConfig"]

Architecture = Literal["lmm", "mac", "mag", "mal", "swa"]
ARCHITECTURES: tuple[str, ...] = ("lmm", "mac", "mag", "mal", "swa")


class ModelConfig(BaseModel):
    """A Titans language model over a token vocabulary (paper section 4).

    Attributes:
        architecture: ``"mac"`` memory as context (eq. 21-25), ``"mag"`` memory as gating (eq. 26-28),
            ``"mal"`` memory as a layer (eq. 29-31), ``"lmm"`` the memory alone, ``"swa"`` the
            sliding-window-attention-only baseline of the same size.
        vocab_size: number of token ids.
        width: d, the residual stream's width.
        layers: number of blocks.
        heads: attention and memory heads; ``width`` must be a multiple of it.
        window: sliding-window length of the attention (MAG, MAL, SWA), in tokens; a token sees
            itself and the ``window - 1`` tokens before it, plus the persistent prefix.
        segment: MAC's segment length C (its attention sees the persistent tokens, the retrieved
            memory of the segment and the segment itself, causally). Must be a multiple of ``chunk``.
        chunk: b, tokens per chunk of the memory's parallel update (section 3.2).
        persistent_tokens: N_p learnable, input-independent tokens (eq. 19).
        conv_kernel: width of the depthwise causal convolution after the q/k/v projections (4.4).
        mlp_expansion: hidden width of each block's feed-forward layer, as a multiple of ``width``.
        theta_max: upper bound of the inner learning rate theta_t = theta_max * sigmoid(.) (eq. 13).
        alpha_init: forgetting gate alpha_t at initialisation (eq. 14).
        eta_init: momentum decay eta_t at initialisation (eq. 13).
        max_grad_norm: clamp of each token's inner gradient norm (stability, docs/titans.md section 6).
        memory_depth: L_M, layers of each head's memory MLP (3.1): 1 is a matrix memory ``M k``;
            >= 2 is the residual MLP ``k + W_L act(... act(W_1 k))`` updated in the dual form.
        memory_expansion: hidden width of the memory MLP as a multiple of the head width.
        conv_init: how the depthwise causal convolutions start. ``"shift"``: the query and value
            convolutions pass the current token through (a unit tap at lag 0) and the key
            convolution passes the current token on half of the channels and the previous token on
            the other half (the "shift" of H3, Fu et al. 2023), so a write at token t can store
            (token t-1 -> token t) from the first step; every tap stays trainable. ``"default"``:
            PyTorch's uniform initialisation.
        gate_rank: 0 (default): the gates theta, eta, alpha are one scalar per token and head.
            r >= 1: per channel too (each row of a head's matrix memory M and momentum S gets its
            own learning rate, momentum decay and forgetting, MIRAS's per-channel gates): a
            low-rank map ``d -> r -> 3 * heads * head_dim`` (no bias, starting at 1% of the default
            initialisation) adds a per-channel offset to each gate's logit. Needs
            ``memory_depth`` 1.
        memory_read: what a memory layer's read at token t sees. ``"token"``: the memory as of
            token t, the tokens before it in its chunk written (the dual form, eq. 15 with M_t).
            ``"chunk"``: the memory as of the start of t's chunk, as titans-pytorch reads: about
            20% fewer FLOPs for a 2-layer memory (no momentum read, no dual-form terms), coarser
            by up to ``chunk - 1`` tokens. Training and streaming work with either.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    architecture: Architecture = "mac"
    vocab_size: int = Field(256, ge=2)
    width: int = Field(64, ge=4)
    layers: int = Field(2, ge=1, le=64)
    heads: int = Field(2, ge=1)
    window: int = Field(32, ge=1)
    segment: int = Field(32, ge=1)
    chunk: int = Field(16, ge=1)
    persistent_tokens: int = Field(4, ge=0)
    conv_kernel: int = Field(4, ge=1, le=16)
    mlp_expansion: int = Field(2, ge=1, le=16)
    theta_max: float = Field(1.0, gt=0.0, le=10.0)
    alpha_init: float = Field(0.001, gt=0.0, lt=1.0)
    eta_init: float = Field(0.5, gt=0.0, lt=1.0)
    max_grad_norm: float = Field(10.0, gt=0.0)
    memory_depth: int = Field(1, ge=1, le=8)
    memory_expansion: int = Field(2, ge=1, le=16)
    conv_init: Literal["shift", "default"] = "shift"
    gate_rank: int = Field(0, ge=0, le=1024)
    memory_read: Literal["token", "chunk"] = "token"

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        if self.width % self.heads:
            raise ValueError(f"width {self.width} is not a multiple of heads {self.heads}")
        if self.segment % self.chunk:
            raise ValueError(f"segment {self.segment} is not a multiple of chunk {self.chunk}")
        if self.gate_rank and self.memory_depth != 1:
            raise ValueError(
                f"gate_rank {self.gate_rank} (per-channel gates) needs a matrix memory, memory_depth 1, "
                f"not {self.memory_depth}"
            )
        return self

    @property
    def head_dim(self) -> int:
        """Width of one head, ``width // heads``."""
        return self.width // self.heads

    def receptive_field(self) -> int:
        """Tokens back that a stack of window attentions with causal convolutions can see:
        ``layers * (window + conv_kernel - 1)`` (for MAC the window is the segment)."""
        win = self.segment if self.architecture == "mac" else self.window
        return self.layers * (win + self.conv_kernel - 1)
