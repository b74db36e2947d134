"""Long-context tasks: what the Titans memory adds over a window-only model of the same size.

Trains LMM, MAC, MAG, MAL and the sliding-window-attention baseline (SWA) on sequences up to
``train_multiple x window`` tokens and evaluates them at several multiples of the window, in one run
with the same seeds. On associative recall the pairs sit at the start and the queries at the end, so
at 8x and 16x every pair is beyond the baseline's whole receptive field (layers x (window + conv - 1)).

Prints a table and writes benchmarks/results/long_context_<task>.md, .json and .png.

Each model trains for ``--time-budget-s`` seconds of this process's CPU time (one thread: one
core's time, whatever else shares the machine); the wall time is reported next to it. The models
can run side by side, one process each, then be merged into one table:

    for a in lmm mac mag mal swa; do
        python benchmarks/long_context.py --task recall --architectures $a --time-budget-s 240 --tag _$a &
    done; wait
    cd benchmarks/results && python ../long_context.py --merge long_context_recall_{lmm,mac,mag,mal,swa}.json
    python benchmarks/long_context.py --task permutation --time-budget-s 45
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from titans_agent.models.config import ARCHITECTURES
from titans_agent.models.tasks import ArchitectureResult, TaskConfig, TaskReport, train_and_eval

RESULTS = Path(__file__).resolve().parent / "results"


def plot(report: TaskReport, path: Path) -> None:
    """Accuracy against context length, one line per architecture, chance as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    styles = ["o-", "s--", "^-.", "v:", "D-"]  # distinct, so overlapping lines stay visible
    for i, r in enumerate(report.results):
        lengths = sorted(r.accuracy)
        acc = [100 * r.accuracy[n] for n in lengths]
        ax.plot(lengths, acc, styles[i % len(styles)], label=r.architecture.upper(), markersize=9 - 1.5 * i)
    ax.axhline(100 * report.chance, color="grey", linestyle="--", label="chance")
    ax.axvline(
        report.config.train_multiple * report.config.window, color="grey", linestyle=":", label="longest trained"
    )
    ax.axvline(report.receptive_field, color="red", linestyle=":", label="SWA receptive field")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"{report.config.task}: window {report.config.window}, width {report.config.width}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=["recall", "permutation"], default="recall")
    parser.add_argument("--architectures", default=",".join(ARCHITECTURES))
    parser.add_argument("--steps", type=int, default=100_000, help="at most (the time budget ends training)")
    parser.add_argument("--time-budget-s", type=float, default=240.0, help="per architecture")
    parser.add_argument(
        "--budget-clock", choices=["wall", "cpu"], default="cpu", help="what --time-budget-s counts (cpu: this process)"
    )
    parser.add_argument("--eval-sequences", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--tag", default="", help="suffix of the output files (a partial run)")
    parser.add_argument(
        "--merge", nargs="+", metavar="JSON", help="only combine the rows of earlier runs (later files win)"
    )
    args = parser.parse_args(argv)
    if args.merge:
        return merge([Path(p) for p in args.merge], args.task)
    torch.set_num_threads(args.threads)
    overrides: dict[str, object] = {}
    if args.task == "permutation":
        overrides.update(group=3, window=16, eval_multiples=(2, 4, 8, 16))  # 32 .. 256 steps of S_3
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    report: TaskReport = train_and_eval(
        task=args.task,
        architectures=tuple(args.architectures.split(",")),
        steps=args.steps,
        time_budget_s=args.time_budget_s,
        budget_clock=args.budget_clock,
        eval_sequences=args.eval_sequences,
        seed=args.seed,
        lr=args.lr,
        progress=lambda line: print(line, flush=True),
        **overrides,
    )
    cfg = report.config
    header = (
        f"# Long-context task: {cfg.task}\n\n"
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {args.threads} thread(s); "
        f"total {time.perf_counter() - started:.0f} s; load average {load_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end (other processes share the machine).\n\n"
        f"Models: width {cfg.width}, {cfg.layers} layers, {cfg.heads} heads, window {cfg.window} "
        f"(MAC segment {cfg.window}), chunk {cfg.chunk}, {cfg.persistent_tokens} persistent tokens. "
        f"Trained on lengths up to {cfg.train_multiple * cfg.window} tokens; "
        f"SWA receptive field {report.receptive_field} tokens; chance {100 * report.chance:.1f}%.\n"
    )
    if cfg.task == "recall":
        header += (
            f"\nAssociative recall: {cfg.pairs} key-value pairs among distractor value tokens, "
            f"{cfg.keys} keys, {cfg.values} values; accuracy over every query.\n"
        )
    else:
        header += f"\nPermutation composition over S_{cfg.group}; accuracy at the last position.\n"
    swa = cfg.model_config_for("swa")
    header += (
        f"\nAdamW, lr {cfg.lr}, batch {cfg.batch_size}, at most {cfg.steps} steps or {cfg.time_budget_s} s "
        f"({cfg.budget_clock} clock) each. "
        f"Memory gates at initialisation: theta {0.5 * cfg.theta_max:g} (theta_max {cfg.theta_max:g}), "
        f"eta {cfg.eta_init:g}, alpha {cfg.alpha_init:g}; convolutions start as a shift "
        f"(conv_init={swa.conv_init!r}); the baseline's feed-forward expansion is {swa.mlp_expansion} "
        f"(the others' {cfg.model_config_for('mac').mlp_expansion}) so its parameter count matches.\n"
    )
    write(report, header, RESULTS / f"long_context_{cfg.task}{args.tag}")
    return 0


def write(report: TaskReport, header: str, stem: Path) -> None:
    """Print the table and write ``stem``.md, .json and .png."""
    cfg = report.config
    text = header + "\n" + report.table() + "\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    stem.with_suffix(".md").write_text(text)
    payload = {
        "config": cfg.model_dump(),
        "chance": report.chance,
        "receptive_field": report.receptive_field,
        "results": [asdict(r) for r in report.results],
    }
    stem.with_suffix(".json").write_text(json.dumps(payload, indent=2))
    plot(report, stem.with_suffix(".png"))


def merge(paths: list[Path], task: str) -> int:
    """Combine the rows of several runs' JSON files into long_context_<task>.md/.json/.png."""
    rows: dict[str, ArchitectureResult] = {}
    notes: dict[str, str] = {}
    report = None
    for path in paths:
        data = json.loads(path.read_text())
        cfg = TaskConfig.model_validate(data["config"])
        for r in data["results"]:
            acc = {int(k): v for k, v in r.pop("accuracy").items()}
            rows[r["architecture"]] = ArchitectureResult(**r, accuracy=acc)
            notes[r["architecture"]] = f"- {r['architecture'].upper()}: {path.name}, lr {cfg.lr}"
        report = TaskReport(cfg, data["chance"], data["receptive_field"], [])
    if report is None:
        return 1
    order = [a for a in ARCHITECTURES if a in rows]
    report.results = [rows[a] for a in order]
    header = (
        (Path(paths[0]).with_suffix(".md").read_text().split("\n|")[0]).rstrip()
        + "\n\nRows from:\n"
        + "\n".join(notes[a] for a in order)
        + "\n"
    )
    write(report, header, RESULTS / f"long_context_{task}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
