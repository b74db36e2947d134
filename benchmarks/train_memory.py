"""Meta-learn the Titans memory's outer parameters (W_K, W_V, W_Q, the gates, M_0) for the default
:class:`~titans_agent.config.MemoryConfig`, and write ``titans_agent/data/memory_meta.safetensors``.

Titans (Behrouz et al. 2024, sec. 3.1-3.2) learns *how to memorise* in an outer loop: the inner
loop writes a stream into the memory by gradient descent with momentum and forgetting (eq. 12-14),
the outer loop trains the projections, gates and initial weights so that the memory, after
reading a stream, answers what it is asked. Here the question is the one recall asks: given a cue,
which of the units written so far does it point to? (``RetrievalConfig.use_neural`` ranks records by
``cos(M*(W_Q q), W_V x_j)``.)

Data recipe (offline, freely licensed, the same on every machine with the same Python):

- every ``*.py`` file of the running Python's standard library (``sysconfig`` "stdlib" path;
  Python Software Foundation License), sorted by path, without ``test``/``tests``/``idlelib``/
  ``turtledemo``/``site-packages`` folders; parsed with :mod:`ast` (nothing is imported or run);
- the docstrings of each module, class and function, in source order, cleaned with
  :func:`inspect.cleandoc`, split into paragraphs (blank lines); doctest, table and very short
  paragraphs are skipped; whitespace collapsed; at most 400 characters per text;
- units and cues: a paragraph of two or more sentences gives a cue (its first sentence) and a unit
  (the rest); a docstring whose first paragraph is a single sentence followed by another paragraph
  gives that summary as the cue of the next paragraph's unit; other paragraphs are units without a
  cue (distractors). Files whose path hashes into the last tenth (sha1) are the validation split.
- every text is embedded with the default embedder (all-MiniLM-L6-v2, unit-norm); the vectors are
  cached under the system temp folder (``titans-agent-train-memory-cache``), never in the repository.
- LoCoMo is never used for training (its licence forbids shipping derived weights).

Objective (self-supervised): a stream is ``--stream`` consecutive units of the corpus (a window
over one or several neighbouring files, in source order). All of it is written into a fresh memory
from M_0 with :func:`titans_agent.core.scan.memory_scan` (``--batch`` streams at once along its N
dimension, chunk size and gate bounds from the config, so theta and alpha stay in their ranges);
then each cue whose unit is in the stream reads ``y = M*(W_Q c)`` and is scored by InfoNCE over the
stream's units: ``softmax_j(cos(y, W_V x_j) / tau)`` against its own unit (``tau`` = ``--tau``).
Adam (50 warm-up steps, cosine decay), gradient clipping, a proximal penalty ``--prox`` towards
the starting parameters, and early stopping on the validation loss (measured every 50 steps on
held-out files); the loss is checked finite at every step. The start (``--start identity``) is
``W_Q = W_V = I`` and a random orthogonal ``W_K``: the read-out begins as plain embedding cosine
(the memory's residual branch starts small) while keys and values differ, so the memory has
something to learn and surprise means something (docs/titans.md section 7).

Reproduce the shipped file (the defaults; about 11 minutes on one loaded CPU core after a one-time
embedding pass of about 7 minutes)::

    OMP_NUM_THREADS=1 python benchmarks/train_memory.py --out titans_agent/data/memory_meta.safetensors

What that run measured (Python 3.11.7; 10,281 units, 4,452 cues; validation = 50 held-out files,
1,052 units, 469 cues, each cue scored in every window holding its unit): training loss per 50
steps 3.16, 1.93, 1.41, 1.18, 1.06, 0.93, 0.92, 0.86, 0.81, 0.80, 0.76, 0.74; validation loss
3.08 at step 50, then 3.19-3.41 (the training cues are over-fitted after that), so early stopping
kept step 50. Validation, streams of 64 / 256 units, R@1 and R@10 of the cue's own unit among the
stream's: embedding cosine .261 / .698 and .232 / .593; untrained memory (random init)
.108 / .515 and .106 / .424; meta-learned .296 / .746 and .246 / .619. Float16 storage changes
none of these numbers at three decimals.

On LoCoMo (benchmarks/locomo.py, 5 dev conversations, 760 questions, R@10) the shipped parameters
beat the random initialisation (neural signal alone .448 vs .161), but the starting point alone
(W_Q = W_V = I, no training) gives .470 alone and .638 fused at weight 0.25 against .640 for the
meta-learned ones: the docstring objective did not transfer to conversation retrieval beyond its
start, and no fused neural row reaches the default pipeline (.656). See benchmarks/results/locomo.md.

It prints the loss curve, the validation metrics of the trained memory against the untrained one
(random init, seed 0) and plain embedding cosine, and the effect of float16 storage. The file
holds float16 tensors named as ``NeuralMemory.state_dict()`` plus metadata (the config it was
trained for, steps, corpus digest, Python version, validation numbers).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import inspect
import json
import math
import os
import re
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from titans_agent.config import MemoryConfig
from titans_agent.core.memory import NeuralMemory
from titans_agent.core.scan import memory_scan, mlp_forward

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "titans_agent" / "data" / "memory_meta.safetensors"
CACHE_DIR = Path(tempfile.gettempdir()) / "titans-agent-train-memory-cache"
SKIP_DIRS = {"test", "tests", "idlelib", "turtledemo", "site-packages", "__pycache__", "lib2to3"}
MAX_CHARS = 400
MIN_CHARS = 25
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`'\"])")


# ------------------------------------------------------------------------------------ corpus
@dataclass
class Corpus:
    """Units in stream order and cues pointing at them.

    Attributes:
        units: unit texts, corpus order. unit_file: the file index of each unit.
        cues: cue texts. cue_unit: the index of each cue's unit. val_file: per file, True for
        the validation split.
    """

    units: list[str]
    unit_file: list[int]
    cues: list[str]
    cue_unit: list[int]
    files: list[str]
    val_file: list[bool]

    def digest(self) -> str:
        h = hashlib.sha256()
        for t in self.units:
            h.update(t.encode() + b"\0")
        for t, u in zip(self.cues, self.cue_unit):
            h.update(f"{u}\0{t}\0".encode())
        return h.hexdigest()


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()[:MAX_CHARS]


def _paragraphs(doc: str) -> list[str]:
    out = []
    for p in re.split(r"\n\s*\n", inspect.cleandoc(doc)):
        s = p.strip()
        if not s or s.startswith((">>>", "...", "+", "|", "=", "-" * 3)) or ">>>" in s:
            continue
        s = _clean(s)
        if len(s) >= MIN_CHARS and sum(c.isalpha() for c in s) > 0.6 * len(s):
            out.append(s)
    return out


def docstring_pairs(source: str) -> list[tuple[str, str | None]]:
    """(unit, cue or None) of one Python source text, in source order (see the module docstring)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out: list[tuple[str, str | None]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                paras = _paragraphs(doc)
                if len(paras) >= 2 and len(_SENT.split(paras[0])) == 1:
                    out.append((paras[1], paras[0]))  # the summary line cues the next paragraph
                    paras = paras[2:]
                for p in paras:
                    sents = _SENT.split(p)
                    rest = " ".join(sents[1:])
                    if len(sents) >= 2 and len(sents[0]) >= MIN_CHARS and len(rest) >= MIN_CHARS:
                        out.append((rest, sents[0]))
                    else:
                        out.append((p, None))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def build_corpus(max_units: int | None = None) -> Corpus:
    """The standard-library docstring corpus (see the module docstring), up to ``max_units`` units."""
    root = Path(sysconfig.get_paths()["stdlib"])
    paths = sorted(
        p for p in root.rglob("*.py") if not (SKIP_DIRS & set(p.relative_to(root).parts[:-1])) and p.is_file()
    )
    c = Corpus([], [], [], [], [], [])
    for p in paths:
        rel = str(p.relative_to(root))
        try:
            pairs = docstring_pairs(p.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
        if not pairs:
            continue
        fi = len(c.files)
        c.files.append(rel)
        c.val_file.append(int(hashlib.sha1(rel.encode()).hexdigest(), 16) % 10 == 9)
        for unit, cue in pairs:
            if cue is not None:
                c.cues.append(cue)
                c.cue_unit.append(len(c.units))
            c.units.append(unit)
            c.unit_file.append(fi)
        if max_units is not None and len(c.units) >= max_units:
            break
    return c


def embed_texts(texts: list[str], embedder, tag: str) -> np.ndarray:
    """Embeddings ``(n, d)`` float32 of ``texts``, cached in ``CACHE_DIR`` under a digest of them."""
    h = hashlib.sha256(getattr(embedder, "name", "?").encode())
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\0")
    path = CACHE_DIR / f"{tag}-{h.hexdigest()[:16]}.npy"
    if path.is_file():
        return np.load(path)
    out = np.concatenate([embedder.embed(texts[i : i + 512]) for i in range(0, len(texts), 512)]).astype(np.float32)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.npy")
    np.save(tmp, out)
    os.replace(tmp, path)
    return out


# ------------------------------------------------------------------------------------ streams
@dataclass
class Split:
    """One split's tensors: units ``U (n, d)``, cues ``C (m, d)`` and each cue's unit index."""

    U: torch.Tensor
    C: torch.Tensor
    cue_unit: torch.Tensor  # (m,) int64, index into U

    def windows(self, stream: int) -> torch.Tensor:
        """Start positions of windows of ``stream`` units that hold at least one cued unit."""
        has = torch.zeros(self.U.shape[0] + 1, dtype=torch.long)
        has[self.cue_unit + 1] = 1
        csum = has.cumsum(0)
        starts = torch.arange(0, self.U.shape[0] - stream + 1)
        return starts[(csum[starts + stream] - csum[starts]) > 0]


def make_splits(c: Corpus, U: np.ndarray, C: np.ndarray) -> tuple[Split, Split]:
    out = []
    for val in (False, True):
        keep_u = np.array([c.val_file[f] == val for f in c.unit_file])
        new_index = np.cumsum(keep_u) - 1
        cu = np.array(c.cue_unit)
        keep_c = keep_u[cu]
        out.append(
            Split(
                torch.from_numpy(U[keep_u]),
                torch.from_numpy(C[keep_c]),
                torch.from_numpy(new_index[cu[keep_c]]).long(),
            )
        )
    return out[0], out[1]


def make_batch(
    split: Split, starts: torch.Tensor, stream: int, max_cues: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Streams ``xs (N, n, d)``, cues ``(N, m, d)``, their targets ``(N, m)`` (index in the stream)
    and a mask ``(N, m)`` of real cues, for windows starting at ``starts``."""
    n_seq, d = starts.shape[0], split.U.shape[1]
    idx = starts[:, None] + torch.arange(stream)[None, :]
    xs = split.U[idx]
    cues = torch.zeros(n_seq, max_cues, d)
    targets = torch.zeros(n_seq, max_cues, dtype=torch.long)
    mask = torch.zeros(n_seq, max_cues, dtype=torch.bool)
    for i, s in enumerate(starts.tolist()):
        inside = ((split.cue_unit >= s) & (split.cue_unit < s + stream)).nonzero().squeeze(1)
        if inside.numel() > max_cues:
            inside = inside[torch.randperm(inside.numel(), generator=gen)[:max_cues]]
        j = inside.numel()
        cues[i, :j] = split.C[inside]
        targets[i, :j] = split.cue_unit[inside] - s
        mask[i, :j] = True
    return xs, cues, targets, mask


def stream_logits(memory: NeuralMemory, xs: torch.Tensor, cues: torch.Tensor) -> torch.Tensor:
    """Write streams ``xs (N, n, d)`` into fresh memories (from M_0, chunked scan, eq. 12-14), read
    ``y = M*(W_Q c)`` for cues ``(N, m, d)`` (eq. 15) and return ``cos(y, W_V x_j)`` ``(N, m, n)``:
    exactly the neural score recall ranks by."""
    cfg = memory.config
    n_seq, n, d = xs.shape
    flat = xs.reshape(-1, d).to(memory.dtype)
    k, v, _ = memory.project(flat)
    theta, eta, alpha = (g.reshape(n_seq, n) for g in memory.gates(flat))
    w0 = tuple(p.unsqueeze(0).expand(n_seq, *p.shape) for p in memory.M0)
    res = memory_scan(
        w0,
        tuple(torch.zeros_like(w) for w in w0),
        k.reshape(n_seq, n, d),
        v.reshape(n_seq, n, d),
        theta,
        eta,
        alpha,
        chunk_size=cfg.chunk_size,
        activation=cfg.activation,
        max_grad_norm=cfg.max_grad_norm,
    )
    weights = res.tail_weights if res.tail_weights is not None else res.weights
    q = F.normalize(cues.to(memory.dtype) @ memory.W_Q.T, dim=-1)
    y = F.normalize(mlp_forward(weights, q, cfg.activation), dim=-1)
    vals = F.normalize(v.reshape(n_seq, n, d), dim=-1)
    return y @ vals.transpose(-1, -2)


def infonce(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, tau: float) -> torch.Tensor:
    """Mean cross-entropy of ``logits / tau`` ``(N, m, n)`` against ``targets`` over the masked cues."""
    return F.cross_entropy(logits[mask] / tau, targets[mask])


@torch.no_grad()
def evaluate(memory: NeuralMemory | None, split: Split, stream: int, n_windows: int, tau: float, seed: int = 1):
    """InfoNCE loss, R@1 and R@10 of cues against their stream's units, on ``n_windows`` fixed
    windows; ``memory`` None scores by plain embedding cosine ``cos(c, x_j)`` instead."""
    gen = torch.Generator().manual_seed(seed)
    all_starts = split.windows(stream)
    starts = all_starts[torch.randperm(all_starts.numel(), generator=gen)[:n_windows]]
    tot = {"loss": 0.0, "r1": 0.0, "r10": 0.0, "n": 0}
    for i in range(0, starts.numel(), 16):
        xs, cues, targets, mask = make_batch(split, starts[i : i + 16], stream, 64, gen)
        logits = (cues @ xs.transpose(-1, -2)) if memory is None else stream_logits(memory, xs, cues).float()
        lm, tm = logits[mask], targets[mask]
        rank = (lm > lm.gather(1, tm[:, None])).sum(1)  # 0-based rank of the true unit
        m = int(mask.sum())
        tot["loss"] += float(F.cross_entropy(lm / tau, tm, reduction="sum"))
        tot["r1"] += float((rank < 1).sum())
        tot["r10"] += float((rank < 10).sum())
        tot["n"] += m
    n = max(tot.pop("n"), 1)
    return {key: val / n for key, val in tot.items()} | {"cues": n}


# ------------------------------------------------------------------------------------ training
def train(
    memory: NeuralMemory,
    split: Split,
    *,
    steps: int,
    batch: int,
    stream: int,
    max_cues: int,
    lr: float,
    tau: float,
    seed: int,
    log_every: int = 50,
    time_budget_s: float | None = None,
    prox: float = 0.0,
    val: Split | None = None,
    progress=print,
) -> tuple[list[tuple[int, float]], int]:
    """Adam on the outer parameters against :func:`infonce` plus ``prox`` times the squared
    distance of the parameters from where they started (a proximal penalty against over-fitting
    the training cues); returns ``(step, mean training loss)`` every ``log_every`` steps
    and the step whose parameters were kept. With ``val``, the
    validation loss is measured every ``log_every`` steps and the parameters of the best one are
    kept (early stopping). Raises FloatingPointError when a loss is not finite."""
    gen = torch.Generator().manual_seed(seed)
    starts_all = split.windows(stream)
    start = {k: v.detach().clone() for k, v in memory.named_parameters()}
    best: tuple[float, int, dict[str, torch.Tensor]] | None = None
    opt = torch.optim.Adam(memory.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 50) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
    )
    curve, acc, t0 = [], [], time.perf_counter()
    for step in range(1, steps + 1):
        starts = starts_all[torch.randint(0, starts_all.numel(), (batch,), generator=gen)]
        xs, cues, targets, mask = make_batch(split, starts, stream, max_cues, gen)
        loss = infonce(stream_logits(memory, xs, cues), targets, mask, tau)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"non-finite outer loss at step {step}")
        total = loss
        if prox > 0:
            total = loss + prox * sum(((p - start[k]) ** 2).sum() for k, p in memory.named_parameters())
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(memory.parameters(), 1.0)
        opt.step()
        sched.step()
        acc.append(float(loss.detach()))
        if step % log_every == 0 or step == steps:
            curve.append((step, float(np.mean(acc))))
            msg = f"  step {step:5d}  loss {curve[-1][1]:.4f}"
            if val is not None:
                ev = evaluate(memory, val, stream, 64, tau, seed=2)
                msg += f"  validation loss {ev['loss']:.4f} R@1 {ev['r1']:.3f}"
                if best is None or ev["loss"] < best[0]:
                    best = (ev["loss"], step, {k: v.detach().clone() for k, v in memory.state_dict().items()})
            progress(f"{msg}  ({time.perf_counter() - t0:.0f} s)")
            acc = []
        if time_budget_s is not None and time.perf_counter() - t0 > time_budget_s:
            if acc:
                curve.append((step, float(np.mean(acc))))
            progress(f"  time budget reached after {step} steps")
            break
    kept = step
    if best is not None:
        memory.load_state_dict(best[2])
        kept = best[1]
        progress(f"  kept the parameters of step {kept} (validation loss {best[0]:.4f})")
    return curve, kept


def save_params(memory: NeuralMemory, path: Path, metadata: dict[str, str]) -> None:
    """Write the outer parameters as float16 safetensors with ``metadata`` (all strings)."""
    from safetensors.torch import save_file

    tensors = {k: v.detach().to(torch.float16).contiguous().cpu() for k, v in memory.state_dict().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata=metadata)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=8, help="streams per step (memory_scan's N)")
    p.add_argument("--stream", type=int, default=64, help="units per stream")
    p.add_argument("--cues", type=int, default=32, help="most cues per stream")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (50 warm-up steps, cosine decay)")
    p.add_argument("--tau", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-units", type=int, default=None, help="cap the corpus (default: all of it)")
    p.add_argument("--time-budget-s", type=float, default=None)
    p.add_argument("--eval-windows", type=int, default=256)
    p.add_argument(
        "--start",
        choices=["random", "identity"],
        default="identity",
        help="identity: W_Q = W_V = I (the read-out starts as embedding cosine), W_K random orthogonal",
    )
    p.add_argument("--prox", type=float, default=1e-2, help="proximal penalty towards the start")
    p.add_argument(
        "--early-stop",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep the parameters of the best validation loss (measured every 50 steps)",
    )
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    torch.manual_seed(args.seed)

    from titans_agent.config import DEFAULT_EMBEDDER
    from titans_agent.embeddings import load_embedder

    t0 = time.perf_counter()
    corpus = build_corpus(args.max_units)
    print(
        f"corpus: {len(corpus.files)} files, {len(corpus.units)} units, {len(corpus.cues)} cues "
        f"(validation files: {sum(corpus.val_file)}), digest {corpus.digest()[:16]}",
        flush=True,
    )
    embedder = load_embedder(DEFAULT_EMBEDDER)
    U = embed_texts(corpus.units, embedder, "units")
    C = embed_texts(corpus.cues, embedder, "cues")
    t_embed = time.perf_counter() - t0
    print(f"embedded in {t_embed:.0f} s (cached in {CACHE_DIR})", flush=True)
    tr, va = make_splits(corpus, U, C)
    print(
        f"train: {tr.U.shape[0]} units, {tr.C.shape[0]} cues; validation: {va.U.shape[0]} units, {va.C.shape[0]} cues"
    )

    cfg = MemoryConfig(dim=U.shape[1], init="random")
    memory = NeuralMemory(cfg)
    untrained = NeuralMemory(cfg)
    if args.start == "identity":
        with torch.no_grad():
            eye = torch.eye(cfg.dim, dtype=memory.dtype)
            memory.W_Q.copy_(eye)
            memory.W_V.copy_(eye)
    before = {
        n: evaluate(m, va, args.stream, args.eval_windows, args.tau)
        for n, m in (("dense", None), ("untrained", untrained))
    }
    t1 = time.perf_counter()
    curve, kept_step = train(
        memory,
        tr,
        steps=args.steps,
        batch=args.batch,
        stream=args.stream,
        max_cues=args.cues,
        lr=args.lr,
        tau=args.tau,
        seed=args.seed,
        time_budget_s=args.time_budget_s,
        prox=args.prox,
        val=va if args.early_stop else None,
    )
    t_train = time.perf_counter() - t1
    steps_done = curve[-1][0] if curve else 0
    if not all(torch.isfinite(p).all() for p in memory.parameters()):
        raise FloatingPointError("trained parameters are not finite")
    # float16 storage: the parameters as they will be loaded
    half = NeuralMemory(cfg)
    half.load_state_dict({k: v.half().float() for k, v in memory.state_dict().items()})
    rows = dict(before)
    rows["meta-learned (float32)"] = evaluate(memory, va, args.stream, args.eval_windows, args.tau)
    rows["meta-learned (float16 stored)"] = evaluate(half, va, args.stream, args.eval_windows, args.tau)
    long_stream = 4 * args.stream
    for name, m in (("dense", None), ("untrained", untrained), ("meta-learned (float16 stored)", half)):
        rows[f"{name}, stream {long_stream}"] = evaluate(m, va, long_stream, args.eval_windows // 2, args.tau)
    with torch.no_grad():
        g = half.gates(va.U[:2000])
        gate_txt = ", ".join(
            f"{n} {float(t.min()):.4f}..{float(t.max()):.4f}" for n, t in zip(("theta", "eta", "alpha"), g)
        )
    print(
        f"\ntrained {steps_done} steps in {t_train:.0f} s, kept step {kept_step}; loss curve (step, mean loss): {curve}"
    )
    print(f"gates on validation units: {gate_txt}")
    print("\n| validation (held-out stdlib files) | InfoNCE loss | R@1 | R@10 | cues |\n|---|---:|---:|---:|---:|")
    for n, r in rows.items():
        length = long_stream if "stream " in n else args.stream
        print(f"| {n} (stream {length}) | {r['loss']:.3f} | {r['r1']:.3f} | {r['r10']:.3f} | {r['cues']} |")
    meta = {
        "format": "titans-agent-memory-meta",
        "version": "1",
        "config": cfg.model_dump_json(exclude={"init", "seed"}),
        "embedder": DEFAULT_EMBEDDER,
        "steps": str(kept_step),
        "steps_run": str(steps_done),
        "train_s": f"{t_train:.0f}",
        "corpus": (
            f"python {sys.version.split()[0]} stdlib docstrings: {len(corpus.units)} units, {len(corpus.cues)} cues"
        ),
        "corpus_sha256": corpus.digest(),
        "objective": (
            f"InfoNCE tau {args.tau}, stream {args.stream}, batch {args.batch}, cues {args.cues}, lr {args.lr}, "
            f"start {args.start}, prox {args.prox}, early stop {args.early_stop}, seed {args.seed}"
        ),
        "validation": json.dumps({k: {kk: round(vv, 4) for kk, vv in v.items()} for k, v in rows.items()}),
        "loss_curve": json.dumps(curve),
    }
    save_params(memory, args.out, meta)
    print(f"\nwrote {args.out} ({args.out.stat().st_size} bytes); wall {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
