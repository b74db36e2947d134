"""`make demo`: titans-agent's main job on real input, through the CLI, each step a new process.

1. ingest a real codebase (the standard library's json and email packages) and real legal texts
   (Apache-2.0 and GPL-3);
2. ask two questions and check that the right passage is in the top 3;
3. ingest the same inputs again: 0 new records;
4. ask again in a new process: the same answers.

    python examples/demo.py [--db PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from demo_inputs import QUESTIONS, codebase, legal_texts


def cli() -> list[str]:
    script = Path(sys.executable).parent / "titans-agent"
    if script.exists():
        return [str(script)]
    found = shutil.which("titans-agent")
    return [found] if found else [sys.executable, "-m", "titans_agent.cli.app"]


def run(db: Path, *args: str, capture: bool = False) -> str:
    cmd = [*cli(), "--db", str(db), *args]
    print("$ titans-agent " + " ".join(a if " " not in a else repr(a) for a in cmd[len(cli()) :]), flush=True)
    proc = subprocess.run(cmd, text=True, encoding="utf-8", capture_output=capture)
    if proc.returncode != 0:
        if capture:
            sys.stderr.write(proc.stderr)
        raise SystemExit(f"command failed with exit code {proc.returncode}")
    return proc.stdout if capture else ""


def ask(db: Path) -> list[list[int]]:
    answers, ok = [], True
    for question, fragment, where in QUESTIONS:
        run(db, "recall", question, "-k", "3")
        hits = json.loads(run(db, "recall", question, "-k", "3", "--json", capture=True))
        rank = next(
            (
                i
                for i, h in enumerate(hits, 1)
                if where in (h["source"] or "") and fragment.lower() in h["text"].lower()
            ),
            None,
        )
        verdict = f"rank {rank}" if rank else "NOT in the top 3"
        print(f"  -> the expected passage ({where}, '{fragment}') is at {verdict}\n")
        ok &= rank is not None
        answers.append([h["id"] for h in hits])
    if not ok:
        raise SystemExit("a question's expected passage was not in the top 3")
    return answers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=None, help="database file (default: a new temporary one)")
    args = parser.parse_args()
    tmp = None if args.db else tempfile.mkdtemp(prefix="titans-demo-")
    db = args.db or Path(tmp) / "demo.db"
    inputs = [str(p) for p in codebase() + legal_texts()]
    t0 = time.perf_counter()
    print(f"== 1. ingest a codebase and legal texts into {db}")
    run(db, "ingest", *inputs)
    print("\n== 2. recall")
    first = ask(db)
    print("== 3. ingest the same inputs again")
    report = json.loads(run(db, "ingest", "--json", *inputs, capture=True))
    print(f"  -> {report['stored']} new records, {report['unchanged']} files unchanged\n")
    print("== 4. a new process asks again")
    second = ask(db)
    same = first == second
    print(f"  -> same answers as before: {same}")
    run(db, "stats")
    print(f"\ndemo finished in {time.perf_counter() - t0:.0f} s")
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)  # pass --db PATH to keep the database
    return 0 if report["stored"] == 0 and same else 1


if __name__ == "__main__":
    sys.exit(main())
