"""``titans-agent train``: train the Titans models (LMM, MAC, MAG, MAL) and the sliding-window
baseline on a long-context task and print their accuracy against context length.

A thin front end over :func:`titans_agent.models.train_and_eval`; torch and the models are
imported only when the command runs, so ``titans-agent --help`` stays fast.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import click

__all__ = ["train"]

ARCHITECTURES = ("lmm", "mac", "mag", "mal", "swa")
MEMORY_READS = ("token", "chunk")  # ModelConfig.memory_read's values (a test keeps them equal)


@click.command("train")
@click.option(
    "--task",
    type=click.Choice(["recall", "permutation"]),
    default="recall",
    show_default=True,
    help="Multi-query associative recall, or permutation composition (state tracking).",
)
@click.option(
    "--arch",
    "architectures",
    multiple=True,
    type=click.Choice(ARCHITECTURES),
    help="Architecture to train (repeatable; default: all five).",
)
@click.option("--steps", type=click.IntRange(min=1), default=1500, show_default=True, help="Optimiser steps per model.")
@click.option(
    "--time-budget-s",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Stop training each model after this many seconds.",
)
@click.option(
    "--budget-clock",
    type=click.Choice(["wall", "cpu"]),
    default="wall",
    show_default=True,
    help="What --time-budget-s counts: wall seconds, or this process's CPU seconds.",
)
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=3e-3, show_default=True, help="AdamW lr.")
@click.option("--width", type=click.IntRange(min=4), default=64, show_default=True, help="Model width.")
@click.option("--layers", type=click.IntRange(min=1), default=2, show_default=True, help="Blocks per model.")
@click.option("--window", type=click.IntRange(min=4), default=32, show_default=True, help="Attention window (tokens).")
@click.option(
    "--memory-read",
    type=click.Choice(MEMORY_READS),
    default="token",
    show_default=True,
    help="Memory reads see the memory as of their token, or of their chunk's start (cheaper).",
)
@click.option(
    "--gate-rank",
    type=click.IntRange(min=0, max=1024),
    default=0,
    show_default=True,
    help="0: one theta/eta/alpha per token and head; r >= 1: per channel too, through a rank-r map.",
)
@click.option("--pairs", type=click.IntRange(min=1), default=8, show_default=True, help="Key-value pairs (recall).")
@click.option(
    "--eval-sequences", type=click.IntRange(min=1), default=256, show_default=True, help="Sequences per length."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds initialisation and every batch.")
@click.option("--out", type=click.Path(dir_okay=False, writable=True), help="Also write the results as JSON here.")
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
def train(
    task: str,
    architectures: tuple[str, ...],
    steps: int,
    time_budget_s: float | None,
    budget_clock: str,
    lr: float,
    width: int,
    layers: int,
    window: int,
    memory_read: str,
    gate_rank: int,
    pairs: int,
    eval_sequences: int,
    seed: int,
    out: str | None,
    quiet: bool,
) -> None:
    """Train tiny Titans models and the window-only baseline on a long-context task.

    Models train on sequences up to 2x the attention window and are tested at 2x, 8x and 16x, so a
    needle lies beyond the baseline's whole receptive field. Prints a Markdown table of accuracy
    per model and length (chance is in the header). Runs on the CPU (the global --device is not
    used here); a full default run takes minutes per model on a laptop CPU. See benchmarks/long_context.py for
    the plot and README "Titans models and long-context tasks" for measured results.

    Examples:

    \b
        titans-agent train --task recall --arch mac --arch swa --time-budget-s 300
        titans-agent train --task permutation --steps 500 --out results.json
    """
    from titans_agent.models import TaskConfig, train_and_eval

    defaults = TaskConfig()
    if window % defaults.chunk:
        raise click.BadParameter(
            f"must be a multiple of the memory's chunk ({defaults.chunk} tokens): MAC's segment is the window",
            param_hint="--window",
        )
    if width % defaults.heads:
        raise click.BadParameter(f"must be a multiple of the {defaults.heads} heads", param_hint="--width")
    if out is not None:
        parent = Path(out).resolve().parent
        if not parent.is_dir() or not os.access(parent, os.W_OK):
            raise click.BadParameter(f"cannot write into {str(parent)!r}", param_hint="--out")

    def progress(line: str) -> None:
        if not quiet:
            click.echo(line, err=True)

    overrides: dict[str, object] = {
        "task": task,
        "steps": steps,
        "time_budget_s": time_budget_s,
        "budget_clock": budget_clock,
        "lr": lr,
        "width": width,
        "layers": layers,
        "window": window,
        "memory_read": memory_read,
        "gate_rank": gate_rank,
        "pairs": pairs,
        "eval_sequences": eval_sequences,
        "seed": seed,
    }
    if architectures:
        overrides["architectures"] = tuple(dict.fromkeys(architectures))
    report = train_and_eval(None, progress=progress, **overrides)
    reads = "as of the chunk start" if memory_read == "chunk" else "as of each token"
    click.echo(
        f"{task}: chance {100 * report.chance:.1f}%, window-only receptive field {report.receptive_field} tokens, "
        f"memory reads {reads}"
    )
    click.echo(report.table())
    for r in report.results:
        if not math.isfinite(r.final_loss):
            click.echo(f"warning: {r.architecture} diverged (final training loss {r.final_loss}); lower --lr", err=True)
    if out is not None:
        rows = [
            {
                "architecture": r.architecture,
                "parameters": r.parameters,
                "steps": r.steps,
                "train_s": round(r.train_s, 3),
                "cpu_s": round(r.cpu_s, 3),
                "final_loss": r.final_loss if math.isfinite(r.final_loss) else None,
                "accuracy": {str(n): a for n, a in r.accuracy.items()},
            }
            for r in report.results
        ]
        payload = {"config": report.config.model_dump(mode="json"), "chance": report.chance, "results": rows}
        Path(out).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
