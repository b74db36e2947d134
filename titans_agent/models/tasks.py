"""Long-context tasks that show what the memory adds, and the loop that trains and evaluates on them.

- **Multi-query associative recall** (:func:`associative_recall_batch`): ``pairs`` key-value pairs
  scattered among distractors that reuse the value tokens, a long stretch of filler (value tokens
  again), then the keys asked one at a time, each followed by its value. Only the answers are scored.
  The pairs sit at the start, so at a long length they are beyond a window model's receptive field.
- **Permutation composition** (:func:`permutation_batch`): a sequence of elements of S_3 (or S_5);
  the target at every position is the composition of all elements so far, a state-tracking task.
  Only the last ``score_last`` positions are scored.

:func:`train_and_eval` trains each architecture on lengths up to ``train_multiple x window`` and
evaluates at several multiples of the window; ``titans-agent train`` and ``benchmarks/long_context.py``
call it.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor

from titans_agent.errors import InvalidInputError
from titans_agent.models.architectures import TitansLM, build_model
from titans_agent.models.config import ARCHITECTURES, ModelConfig

__all__ = [
    "ArchitectureResult",
    "TaskConfig",
    "TaskReport",
    "associative_recall_batch",
    "evaluate",
    "permutation_batch",
    "train_and_eval",
]

logger = logging.getLogger(__name__)
IGNORE = -100
Task = Literal["recall", "permutation"]


class TaskConfig(BaseModel):
    """What :func:`train_and_eval` runs.

    Attributes:
        task: ``"recall"`` (multi-query associative recall) or ``"permutation"`` (composition).
        architectures: which models to train, among ``lmm, mac, mag, mal, swa``.
        width, layers, heads, window, chunk, persistent_tokens: the model (MAC's segment = window).
        eta_init, alpha_init, theta_max: the memory's gates at initialisation (see :class:`ModelConfig`);
            a small momentum decay lets a write land once, as the delta rule that recall needs.
        memory_read: ``"token"`` (reads see the memory as of their token) or ``"chunk"`` (as of
            their chunk's start, cheaper; :class:`ModelConfig`).
        gate_rank: 0 for per-token gates, r >= 1 for per-channel gates through a rank-r map
            (:class:`ModelConfig`).
        match_baseline: give the window-only baseline the feed-forward expansion that brings its
            parameter count closest to the mean of MAC, MAG and MAL (the "same size" baseline).
        pairs: key-value pairs per recall sequence (>= 8 in the issue's target).
        keys, values: sizes of the key and value vocabularies (chance is ``1 / values``).
        group: ``3`` or ``5``, the symmetric group of the permutation task.
        train_multiple: training lengths go up to this multiple of the window.
        eval_multiples: evaluated lengths, as multiples of the window.
        steps: optimiser steps per architecture (at most; see ``time_budget_s``).
        time_budget_s: stop training an architecture after this many seconds (None: no limit).
        budget_clock: what ``time_budget_s`` counts: ``"wall"`` seconds, or ``"cpu"`` seconds of this
            process (``time.process_time``; with one thread, one core's time, unaffected by other
            processes sharing the machine). Both are reported.
        batch_size, lr: optimiser settings (AdamW, cosine decay after a short warm-up).
        eval_sequences: sequences per evaluated length.
        seed: seeds the model initialisation and every batch (runs are repeatable).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: Task = "recall"
    architectures: tuple[str, ...] = ARCHITECTURES
    width: int = Field(64, ge=4)
    layers: int = Field(2, ge=1)
    heads: int = Field(2, ge=1)
    window: int = Field(32, ge=4)
    chunk: int = Field(16, ge=1)
    persistent_tokens: int = Field(4, ge=0)
    eta_init: float = Field(0.05, gt=0.0, lt=1.0)
    alpha_init: float = Field(0.001, gt=0.0, lt=1.0)
    theta_max: float = Field(1.0, gt=0.0, le=10.0)
    memory_read: Literal["token", "chunk"] = "token"
    gate_rank: int = Field(0, ge=0, le=1024)
    match_baseline: bool = True
    pairs: int = Field(8, ge=1)
    keys: int = Field(32, ge=1)
    values: int = Field(32, ge=2)
    group: Literal[3, 5] = 3
    train_multiple: int = Field(2, ge=1)
    eval_multiples: tuple[int, ...] = (2, 8, 16)
    steps: int = Field(1500, ge=1)
    time_budget_s: float | None = Field(None, gt=0)
    budget_clock: Literal["wall", "cpu"] = "wall"
    batch_size: int = Field(32, ge=1)
    lr: float = Field(3e-3, gt=0)
    eval_sequences: int = Field(256, ge=1)
    seed: int = 0

    def vocab_size(self) -> int:
        """Token ids the task uses."""
        return self.keys + self.values if self.task == "recall" else len(_group_elements(self.group))

    def model_config_for(self, architecture: str) -> ModelConfig:
        """The :class:`ModelConfig` of one architecture under this task."""
        if architecture not in ARCHITECTURES:
            raise InvalidInputError(f"unknown architecture {architecture!r}; expected one of {ARCHITECTURES}")
        config = self._model_config(architecture, 2)
        if architecture == "swa" and self.match_baseline:
            config = config.model_copy(update={"mlp_expansion": self.baseline_expansion()})
        return config

    def baseline_expansion(self) -> int:
        """The window-only baseline's feed-forward expansion (1..16) whose parameter count is closest to
        the mean parameter count of MAC, MAG and MAL under this task."""
        target = sum(_count(self._model_config(a, 2)) for a in ("mac", "mag", "mal")) / 3
        return min(range(1, 17), key=lambda e: abs(_count(self._model_config("swa", e)) - target))

    def _model_config(self, architecture: str, mlp_expansion: int) -> ModelConfig:
        return ModelConfig(
            architecture=architecture,  # type: ignore[arg-type]
            vocab_size=self.vocab_size(),
            width=self.width,
            layers=self.layers,
            heads=self.heads,
            window=self.window,
            segment=self.window,
            chunk=self.chunk,
            persistent_tokens=self.persistent_tokens,
            mlp_expansion=mlp_expansion,
            eta_init=self.eta_init,
            alpha_init=self.alpha_init,
            theta_max=self.theta_max,
            memory_read=self.memory_read,
            gate_rank=self.gate_rank,
        )


def _count(config: ModelConfig) -> int:
    """Trainable parameters of the model of ``config`` (built on the meta device: no memory, no time)."""
    with torch.device("meta"):
        return build_model(config).num_parameters()


# ---------------------------------------------------------------------- generators
def associative_recall_batch(
    batch: int, length: int, pairs: int, keys: int, values: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Multi-query associative recall sequences.

    Token ids: keys ``0..keys-1``, values ``keys..keys+values-1``. A sequence is a storage region of
    ``3 * pairs`` tokens (``pairs`` key-value pairs in random order among ``pairs`` single value
    tokens), filler value tokens, and the ``pairs`` keys asked one at a time in random order, each
    followed by its value. The target at a query key is its value; everywhere else ``-100``.

    Returns:
        Token ids ``(batch, length)`` and targets ``(batch, length)``, both int64.

    Raises:
        InvalidInputError: ``length < 5 * pairs`` or ``pairs > keys``.
    """
    if length < 5 * pairs or pairs > keys:
        raise InvalidInputError(f"need length >= 5 * pairs and pairs <= keys (length {length}, pairs {pairs})")
    g = generator
    tokens = keys + torch.randint(values, (batch, length), generator=g)  # value tokens everywhere
    targets = torch.full((batch, length), IGNORE, dtype=torch.long)
    for i in range(batch):
        ks = torch.randperm(keys, generator=g)[:pairs]
        vs = keys + torch.randint(values, (pairs,), generator=g)
        # storage: 2 * pairs slots, half of them pairs (2 tokens) and half single distractors
        slots = torch.randperm(2 * pairs, generator=g) < pairs
        pos, j = 0, 0
        for is_pair in slots.tolist():
            if is_pair:
                tokens[i, pos], tokens[i, pos + 1] = ks[j], vs[j]
                pos, j = pos + 2, j + 1
            else:
                pos += 1
        order = torch.randperm(pairs, generator=g)
        start = length - 2 * pairs
        for q, j in enumerate(order.tolist()):
            tokens[i, start + 2 * q], tokens[i, start + 2 * q + 1] = ks[j], vs[j]
            targets[i, start + 2 * q] = vs[j]
    return tokens, targets


def _group_elements(n: int) -> list[tuple[int, ...]]:
    return list(itertools.permutations(range(n)))


def permutation_batch(
    batch: int, length: int, group: int, generator: torch.Generator, score_last: int | None = None
) -> tuple[Tensor, Tensor]:
    """Permutation composition over S_group: tokens are group elements (ids into the sorted list of
    permutations); the target at position t is the id of ``g_t o ... o g_1``.

    Args:
        score_last: score only the last this many positions (None: all).

    Returns:
        Token ids and targets, both ``(batch, length)`` int64.
    """
    elems = _group_elements(group)
    index = {p: i for i, p in enumerate(elems)}
    table = torch.tensor([[index[tuple(a[x] for x in b)] for b in elems] for a in elems])  # table[a, b] = a o b
    tokens = torch.randint(len(elems), (batch, length), generator=generator)
    targets = torch.empty_like(tokens)
    state = torch.full((batch,), index[tuple(range(group))], dtype=torch.long)
    for t in range(length):
        state = table[tokens[:, t], state]
        targets[:, t] = state
    if score_last is not None:
        targets[:, : max(0, length - score_last)] = IGNORE
    return tokens, targets


def _batch(cfg: TaskConfig, batch: int, length: int, g: torch.Generator, progress: float) -> tuple[Tensor, Tensor]:
    if cfg.task == "recall":
        # Curriculum: up to 1 + (pairs - 1) * progress / 0.4 pairs (all of them from 40% of the steps on);
        # a fixed 8 pairs from the start leaves every model on the loss plateau.
        top = 1 + round((cfg.pairs - 1) * min(1.0, progress / 0.4))
        pairs = int(torch.randint(max(1, top - 2), top + 1, (1,), generator=g))
        return associative_recall_batch(batch, length, pairs, cfg.keys, cfg.values, g)
    return permutation_batch(batch, length, cfg.group, g, score_last=None)


# ---------------------------------------------------------------------- training
@dataclass
class ArchitectureResult:
    """One architecture's run: size, training cost and accuracy per evaluated length."""

    architecture: str
    parameters: int
    steps: int
    train_s: float
    final_loss: float
    cpu_s: float = float("nan")
    accuracy: dict[int, float] = field(default_factory=dict)


@dataclass
class TaskReport:
    """What :func:`train_and_eval` returns: the task settings, the chance level and every result."""

    config: TaskConfig
    chance: float
    receptive_field: int
    results: list[ArchitectureResult]

    def table(self) -> str:
        """A Markdown table: architecture, parameters, steps, training seconds, accuracy per length."""
        lengths = list(self.config.eval_multiples)
        head = ["model", "params", "steps", "train s (wall)", "train s (CPU)"] + [
            f"{m}x = {m * self.config.window} tok" for m in lengths
        ]
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in self.results:
            cells = [r.architecture.upper(), f"{r.parameters:,}", str(r.steps), f"{r.train_s:.0f}", f"{r.cpu_s:.0f}"]
            cells += [f"{100 * r.accuracy[m * self.config.window]:.1f}%" for m in lengths]
            rows.append("| " + " | ".join(cells) + " |")
        return "\n".join(rows)


@torch.no_grad()
def evaluate(model: TitansLM, cfg: TaskConfig, length: int, sequences: int, seed: int) -> float:
    """Accuracy (fraction of scored positions whose arg-max is the target) on fresh sequences of
    ``length`` tokens; for the permutation task only the last position of each sequence is scored."""
    g = torch.Generator().manual_seed(seed)
    model.eval()
    correct, total = 0, 0
    for s0 in range(0, sequences, 32):
        n = min(32, sequences - s0)
        if cfg.task == "recall":
            tokens, targets = associative_recall_batch(n, length, cfg.pairs, cfg.keys, cfg.values, g)
        else:
            tokens, targets = permutation_batch(n, length, cfg.group, g, score_last=1)
        pred = model(tokens).argmax(-1)
        scored = targets != IGNORE
        correct += int((pred[scored] == targets[scored]).sum())
        total += int(scored.sum())
    model.train()
    return correct / max(total, 1)


def train_one(
    cfg: TaskConfig, architecture: str, progress: Callable[[str], None] | None = None
) -> tuple[TitansLM, ArchitectureResult]:
    """Train one architecture on lengths ``pairs * 5 .. train_multiple * window`` (recall) or
    ``window .. train_multiple * window`` (permutation), with seeded batches."""
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model_config_for(architecture))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    g = torch.Generator().manual_seed(cfg.seed + 1)
    max_len = cfg.train_multiple * cfg.window
    min_len = min(max_len, 5 * cfg.pairs + 1) if cfg.task == "recall" else max(2, cfg.window // 2)
    start, cpu_start, loss_ema, step = time.perf_counter(), time.process_time(), float("nan"), 0
    clock = time.process_time if cfg.budget_clock == "cpu" else time.perf_counter
    clock_start = clock()
    for step in range(1, cfg.steps + 1):
        # Progress through training: by steps, or by time when a time budget ends it sooner. The
        # curriculum and the learning rate (warm-up, then cosine decay) follow it.
        frac = step / cfg.steps
        if cfg.time_budget_s is not None:
            frac = max(frac, (clock() - clock_start) / cfg.time_budget_s)
        if frac > 1.0:
            break
        for group in opt.param_groups:
            group["lr"] = cfg.lr * min(1.0, frac / 0.05) * 0.5 * (1.0 + math.cos(math.pi * frac))
        length = int(torch.randint(min_len, max_len + 1, (1,), generator=g))
        tokens, targets = _batch(cfg, cfg.batch_size, length, g, frac)
        logits = model(tokens)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        lv = float(loss.detach())
        loss_ema = lv if loss_ema != loss_ema else 0.95 * loss_ema + 0.05 * lv
        if progress is not None and step % 100 == 0:
            progress(
                f"{architecture} step {step} loss {loss_ema:.3f} {time.perf_counter() - start:.0f}s wall "
                f"{time.process_time() - cpu_start:.0f}s cpu"
            )
    result = ArchitectureResult(
        architecture,
        model.num_parameters(),
        step,
        time.perf_counter() - start,
        loss_ema,
        time.process_time() - cpu_start,
    )
    return model, result


def train_and_eval(
    cfg: TaskConfig | None = None, progress: Callable[[str], None] | None = None, **overrides: object
) -> TaskReport:
    """Train every architecture of ``cfg`` on short sequences and evaluate it at every length.

    Args:
        cfg: the settings (default :class:`TaskConfig`); keyword ``overrides`` replace its fields,
            e.g. ``train_and_eval(task="permutation", steps=500)``.
        progress: called with a one-line status every 100 steps and after each evaluation.

    Returns:
        A :class:`TaskReport` (``report.table()`` is the Markdown table).

    Raises:
        InvalidInputError: an unknown architecture or override, or lengths too short for the task.
    """
    base = cfg or TaskConfig()
    try:
        cfg = TaskConfig.model_validate({**base.model_dump(), **overrides})
        for arch in cfg.architectures:
            cfg.model_config_for(arch)  # every model is valid before any training starts
    except InvalidInputError:
        raise
    except ValueError as exc:
        raise InvalidInputError(str(exc)) from exc
    results = []
    for arch in cfg.architectures:
        model, res = train_one(cfg, arch, progress)
        for m in cfg.eval_multiples:
            length = m * cfg.window
            res.accuracy[length] = evaluate(model, cfg, length, cfg.eval_sequences, seed=cfg.seed + 1000 + m)
            if progress is not None:
                progress(f"{arch} length {length}: accuracy {100 * res.accuracy[length]:.1f}%")
        logger.info("%s: %s", arch, res)
        results.append(res)
    chance = 1.0 / cfg.values if cfg.task == "recall" else 1.0 / len(_group_elements(cfg.group))
    rf = cfg.model_config_for("swa").receptive_field()
    return TaskReport(cfg, chance, rf, results)
