"""Code retrieval on SWE-bench Lite: which file (and function) does an issue need?

Data: ``../shared/data/swe-bench-lite/swe-bench-lite.json`` (Jimenez et al. 2024, MIT licence; 300
real GitHub issues, each fixed by a patch to one file; evaluation only). The query is the issue text
(``problem_statement``, tracebacks and code included); the corpus is the project's ``*.py`` files
at the instance's version; the gold is the file the patch changes and the functions it changes.

Corpora: each project's sdist on PyPI, the latest release of the instance's minor series (SWE-bench
"5.4" -> pytest 5.4.3; the mapping is printed in the results). ``pip download --no-binary :all:``
runs the sdist's build backend to read its metadata, which fails for old releases under today's
setuptools (requests 2.3.0), so the script downloads the same file pip would, from the URL and
sha256 that PyPI's JSON API lists, into ``benchmarks/.cache/code/sdists`` (the product itself never
downloads anything), and extracts it into ``benchmarks/.cache/code/src/<project>-<version>/``.

Retrievers, in the same run over the same files:

- titans-agent: ``MemoryAgent.ingest(src_dir, include=["*.py"])`` into a database of its own per
  (project, version) under ``benchmarks/.cache/code/db`` (kept: a rerun only queries), then
  ``recall(issue, k=K)`` (default 100 chunks). The embedder's vectors are memoised by text
  (``benchmarks/.cache/code/embeddings``): consecutive releases share most chunks, so each is
  embedded once; the vectors are the model's own.
- BM25 over the same chunks: the chunks listed by ``agent.records(kinds=["chunk"])`` (text, source,
  lines), ``rank_bm25.BM25Okapi`` with a code tokenizer (identifiers split on non-alphanumerics and
  camelCase/snake_case, lowercased, the whole identifier kept beside its parts, English stopwords
  dropped).
- BM25 over whole files: the same tokenizer over each ingested file's full text.

Scores (files of the returned chunks, deduplicated in rank order): file-level recall@1/5/10 and MRR
(0 when the gold file is not in the list: K chunks, or the top K files for the file baseline), and
function-level hit@10: one of the top 10 chunks lies in the gold file and its line range overlaps a
gold function (found with ``ast`` in the release's file). Gold functions: for each hunk, the nearest
``def``/``class`` line of the pre-image above its first changed line inside the hunk, else the one
named in the hunk header (the header names the definition above the hunk's context, which is often
the previous function). Gold paths are matched on the path suffix (an sdist with or without a
``src/`` prefix). Paired bootstrap 95% intervals (10,000 resamples over queries) of the product minus
each baseline on R@10 and MRR.

Also: an analysis of where the product loses (long queries past the embedder's 256 word pieces,
tracebacks, identifiers named in the issue, tests/docs chunks among the top 10) and an experiment
with ``RetrievalConfig`` weights (the same databases reopened; reported, not used to pick defaults).
With ``--grid``, every setting of :data:`GRID` instead, tuned leave one project out (each project
scored with the setting that has the best file MRR on the others), the default against one change
at a time beside it. ``--one-release`` ranks each project's issues against one release (its most
common series): twelve corpora for all 300 issues.

Prints the table and writes ``<out>/code.md``, ``<out>/code.png``, the per-query
``<out>/code_per_query.jsonl`` and ``<out>/code_result.json`` (which ``--merge`` reads, so projects
run one at a time report as one).

    python benchmarks/code.py [--projects requests,flask] [--all] [--limit N] [--k 100]
    python benchmarks/code.py --all --one-release --grid          # what make bench-docs runs
    python benchmarks/code.py --merge a/code_result.json b/code_result.json --out DIR
    python benchmarks/code.py --source-dir DIR --instances FILE   # offline: one local corpus
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import sys
import tarfile
import time
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if (
    __name__ == "__main__"
):  # run as a script, this folder leads sys.path, and this file would shadow the stdlib's `code`
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
if str(HERE) not in sys.path:
    sys.path.append(str(HERE))  # last, after the stdlib: for locomo's embedding cache

from locomo import CachedEmbedder  # noqa: E402

DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "swe-bench-lite" / "swe-bench-lite.json"
if not DEFAULT_DATA.is_file():
    DEFAULT_DATA = Path("/work/shared/data/swe-bench-lite/swe-bench-lite.json")
CACHE = HERE / ".cache" / "code"

PYPI_NAMES = {
    "psf/requests": "requests",
    "pallets/flask": "Flask",
    "mwaskom/seaborn": "seaborn",
    "pytest-dev/pytest": "pytest",
    "pylint-dev/pylint": "pylint",
    "pydata/xarray": "xarray",
    "sphinx-doc/sphinx": "Sphinx",
    "astropy/astropy": "astropy",
    "django/django": "Django",
    "matplotlib/matplotlib": "matplotlib",
    "scikit-learn/scikit-learn": "scikit-learn",
    "sympy/sympy": "sympy",
}
# the slice a bare run takes (each issue's own release: sphinx's nine releases alone take about 35
# minutes on one core); `make bench-docs` runs --all --one-release --grid (about 2.5 hours at first)
DEFAULT_PROJECTS = ("requests", "flask", "seaborn", "pytest", "pylint", "xarray")
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+")
QUERY_WINDOW = 256  # all-MiniLM-L6-v2's maximum sequence length in word pieces ([CLS] and [SEP] included)


# ------------------------------------------------------------------------------------- gold
@dataclass
class Instance:
    instance_id: str
    repo: str
    version: str
    query: str
    gold_path: str
    gold_functions: list[str]

    @property
    def project(self) -> str:
        return self.repo.split("/")[-1]


_DEF = re.compile(r"^\s*(?:async\s+def|def|class)\s+(\w+)")


def parse_patch(patch: str) -> tuple[str, list[str]]:
    """The file a patch changes and the functions (or classes) whose bodies its hunks change.

    For each hunk: the nearest ``def``/``class`` line of the pre-image (context or removed lines)
    above the hunk's first changed line; when the hunk shows none, the definition named in the
    hunk header (``@@ -a,b +c,d @@ def name(``). Names are deduplicated in order.
    """
    path = ""
    names: list[str] = []
    header: str | None = None
    before: list[str] = []
    seen_change = False

    def close() -> None:
        if header is None:
            return
        inner = [m.group(1) for line in before if (m := _DEF.match(line))]
        if inner:
            names.append(inner[-1])
        elif (m := re.search(r"(?:def|class)\s+(\w+)", header)) is not None:
            names.append(m.group(1))

    for line in patch.splitlines():
        if line.startswith("--- a/") and not path:
            path = line[6:].strip()
        elif line.startswith("@@"):
            if not seen_change:
                close()
            header, before, seen_change = line.split("@@", 2)[-1], [], False
        elif header is not None and not seen_change:
            if line.startswith(("-", "+")) and not line.startswith(("---", "+++")):
                close()
                seen_change = True
            elif line.startswith(" "):
                before.append(line[1:])
            elif line.startswith("diff "):
                header = None
    if header is not None and not seen_change:
        close()
    return path, list(dict.fromkeys(names))


def load_instances(path: Path, projects: Sequence[str] | None, limit: int | None) -> list[Instance]:
    out = []
    for row in json.loads(Path(path).read_text()):
        gold_path, funcs = parse_patch(row["patch"])
        inst = Instance(
            row["instance_id"], row["repo"], str(row["version"]), row["problem_statement"], gold_path, funcs
        )
        if projects is None or inst.project in projects:
            out.append(inst)
    if limit is not None:  # the first N of each project, so a small run still covers every project
        kept: dict[str, int] = {}
        out = [i for i in out if (kept.__setitem__(i.project, kept.get(i.project, 0) + 1) or kept[i.project]) <= limit]
    return out


def function_ranges(source: str, names: Iterable[str]) -> list[tuple[int, int]]:
    """Line ranges (1-based, inclusive, decorators included) of every def/class with one of these names."""
    wanted = set(names)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in wanted:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            out.append((start, node.end_lineno or node.lineno))
    return out


def match_gold(gold: str, files: Iterable[str]) -> str | None:
    """The corpus file (relative path) that is the gold path: exact, else the one sharing the
    longest path suffix (``src/_pytest/x.py`` against ``_pytest/x.py`` and back)."""
    files = list(files)
    if gold in files:
        return gold
    cands = [f for f in files if f.endswith("/" + gold) or gold.endswith("/" + f)]
    return min(cands, key=len) if cands else None


# ------------------------------------------------------------------------------------- corpora
def pypi_json(name: str, cache: Path) -> dict:
    path = cache / "pypi" / f"{name}.json"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(f"https://pypi.org/pypi/{name}/json", timeout=60) as r:
            path.write_bytes(r.read())
    return json.loads(path.read_text())


def pick_release(meta: dict, series: str) -> tuple[str, dict] | None:
    """The latest final release of ``series`` ("5.4" -> "5.4.3") that has an sdist, and that file."""
    from packaging.version import InvalidVersion, Version

    best = None
    for ver, files in meta["releases"].items():
        try:
            v = Version(ver)
        except InvalidVersion:
            continue
        if v.is_prerelease or v.is_devrelease or f"{v.major}.{v.minor}" != series:
            continue
        sdists = [f for f in files if f["packagetype"] == "sdist" and not f.get("yanked")]
        if sdists and (best is None or v > best[0]):
            best = (v, ver, sdists[0])
    return None if best is None else (best[1], best[2])


def fetch_source(pypi_name: str, series: str, cache: Path) -> tuple[str, Path] | str:
    """``(release, extracted folder)``, or the reason there is none."""
    try:
        picked = pick_release(pypi_json(pypi_name, cache), series)
    except OSError as exc:
        return f"PyPI unreachable ({exc})"
    if picked is None:
        return f"no sdist of {pypi_name} {series}.x on PyPI"
    release, info = picked
    dest = cache / "src" / f"{pypi_name.lower()}-{release}"
    if dest.is_dir():
        return release, dest
    sdist = cache / "sdists" / info["filename"]
    if not sdist.is_file():
        sdist.parent.mkdir(parents=True, exist_ok=True)
        url = urllib.parse.urljoin(f"https://pypi.org/pypi/{pypi_name}/json", info["url"])  # a mirror's are relative
        with urllib.request.urlopen(url, timeout=120) as r:
            data = r.read()
        if hashlib.sha256(data).hexdigest() != info["digests"]["sha256"]:
            return f"sha256 mismatch for {info['filename']}"
        sdist.write_bytes(data)
    tmp = dest.with_name(dest.name + ".part")
    tmp.mkdir(parents=True, exist_ok=True)
    if sdist.name.endswith(".zip"):
        with zipfile.ZipFile(sdist) as z:
            z.extractall(tmp)
    else:
        with tarfile.open(sdist) as t:
            t.extractall(tmp, filter="data")
    inner = [p for p in tmp.iterdir()]
    (inner[0] if len(inner) == 1 and inner[0].is_dir() else tmp).rename(dest)
    if tmp.exists():
        tmp.rmdir()
    return release, dest


# ------------------------------------------------------------------------------------- retrieval
_WORD = re.compile(r"[A-Za-z0-9]+")
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def code_tokens(text: str) -> list[str]:
    """Lowercased identifier parts (``getHTTPResponse_code`` -> get, http, response, code) and each
    compound identifier whole (``gethttpresponse_code``), English stopwords dropped."""
    from titans_agent.text import STOPWORDS

    out = []
    for ident in re.findall(r"[A-Za-z0-9_]+", text):
        parts = [p.lower() for w in _WORD.findall(ident) for p in _PART.findall(w)]
        out += [p for p in parts if p not in STOPWORDS]
        if len(parts) > 1:
            out.append(ident.lower())
    return out


@dataclass
class Corpus:
    """One ingested (project, release): the database, its chunks and its files."""

    key: str
    root: Path
    db: Path
    chunks: list[tuple[str, int, int, str]] = field(default_factory=list)  # (rel path, start, end, text)
    files: dict[str, str] = field(default_factory=dict)  # rel path -> text
    bm25_chunks: object = None
    bm25_files: object = None
    file_names: list[str] = field(default_factory=list)


def rel(source: str, root: Path) -> str:
    return os.path.relpath(source, root).replace(os.sep, "/")


def build_corpus(key: str, root: Path, db: Path, embedder, log=print) -> Corpus:
    from rank_bm25 import BM25Okapi

    from titans_agent import AgentConfig, MemoryAgent

    corpus = Corpus(key, root, db)
    db.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with MemoryAgent.open(db, AgentConfig(device="cpu", threads=None), embedder=embedder) as agent:
        report = agent.ingest(root, include=["*.py"])
        hits = agent.records(kinds=["chunk"])
    if hasattr(embedder, "save"):
        embedder.save()
    log(
        f"  {key}: {report.files} files ingested, {report.unchanged} unchanged, {len(hits)} chunks, "
        f"{time.perf_counter() - t0:.0f} s"
    )
    corpus.chunks = [(rel(h.source, root), h.start_line or 0, h.end_line or 0, h.text) for h in hits]
    for path in dict.fromkeys(c[0] for c in corpus.chunks):
        corpus.files[path] = (root / path).read_text(encoding="utf-8", errors="replace")
    corpus.bm25_chunks = BM25Okapi([code_tokens(c[3]) or ["<empty>"] for c in corpus.chunks])
    corpus.file_names = list(corpus.files)
    corpus.bm25_files = BM25Okapi([code_tokens(corpus.files[f]) or ["<empty>"] for f in corpus.file_names])
    return corpus


def dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def agent_rankings(
    db: Path, configs: dict, embedder, queries: Sequence[str], root: Path, k: int
) -> dict[str, list[list[tuple[str, int, int]]]]:
    """``recall(query, k)`` for each query under each named configuration, on the database opened
    once (``agent.config`` is set before each recall): name -> per query, (path, start, end)."""
    from titans_agent import MemoryAgent

    out: dict[str, list[list[tuple[str, int, int]]]] = {name: [] for name in configs}
    first = next(iter(configs.values()))
    with MemoryAgent.open(db, first, embedder=embedder) as agent:
        for query in queries:
            for name, config in configs.items():
                agent.config = config
                hits = agent.recall(query, k=k)
                out[name].append([(rel(h.source, root), h.start_line or 0, h.end_line or 0) for h in hits])
    return out


def bm25_top(model, tokens: list[str], k: int) -> list[int]:
    scores = model.get_scores(tokens)
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


# ------------------------------------------------------------------------------------- scoring
def file_rank(files: Sequence[str], gold: str) -> int | None:
    """1-based rank of the gold file in a deduplicated file list, or None."""
    return files.index(gold) + 1 if gold in files else None


def function_hit(
    chunks: Sequence[tuple[str, int, int]], gold: str, ranges: Sequence[tuple[int, int]], top: int = 10
) -> bool:
    return any(p == gold and s <= e2 and s2 <= e for p, s, e in chunks[:top] for s2, e2 in ranges)


def summary(ranks: Sequence[int | None]) -> dict[str, float]:
    r = [x or 10**9 for x in ranks]
    return {
        "r1": float(np.mean([x <= 1 for x in r])),
        "r5": float(np.mean([x <= 5 for x in r])),
        "r10": float(np.mean([x <= 10 for x in r])),
        "mrr": float(np.mean([1.0 / x if x < 10**9 else 0.0 for x in r])),
    }


def paired_bootstrap(a: np.ndarray, b: np.ndarray, n: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    d = np.asarray(a, float) - np.asarray(b, float)
    if len(d) == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n, len(d)))].mean(axis=1)
    return float(d.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def r10(ranks: Sequence[int | None]) -> np.ndarray:
    return np.array([1.0 if r is not None and r <= 10 else 0.0 for r in ranks])


def rr(ranks: Sequence[int | None]) -> np.ndarray:
    return np.array([1.0 / r if r else 0.0 for r in ranks])


def is_test_or_doc(path: str) -> bool:
    parts = path.lower().split("/")
    return any(p in ("tests", "test", "testing", "doc", "docs", "examples") for p in parts[:-1]) or parts[
        -1
    ].startswith(("test_", "conftest"))


# ------------------------------------------------------------------------------------- running
PRODUCT = "titans-agent recall"
BM25_CHUNKS = "BM25, same chunks"
BM25_FILES = "BM25, whole files"


GRID = {
    "lexical_weight": (0.45, 1.0),
    "dense_coverage": (False, True),
    "file_weight": (0.0, 1.0, 2.0),
    "auxiliary_weight": (1.0, 0.5),
}
"""The settings tuned leave-one-project-out (``--grid``): the lexical signal's weight and the two
code signals of :mod:`titans_agent.code_rank`."""


def grid_defaults() -> dict:
    """The values :data:`GRID`'s settings take in the default ``RetrievalConfig``."""
    from titans_agent import RetrievalConfig

    d = RetrievalConfig()
    return {k: getattr(d, k) for k in GRID}


def grid_name(kw: dict) -> str:
    return ", ".join(
        f"{k.removesuffix('_weight')} {v:g}"
        if not isinstance(v, bool)
        else (k.replace("_", " ") if v else "no " + k.replace("_", " "))
        for k, v in kw.items()
    )


def experiment_configs(grid: bool = False) -> dict[str, dict]:
    """``RetrievalConfig`` variants tried on the same databases: with ``grid``, every combination
    of :data:`GRID` (the first is the default), which :func:`lopo_lines` tunes leave-one-project-out;
    else a few variants (an experiment, not a tuning)."""
    if grid:
        import itertools

        default = grid_defaults()
        combos = [dict(zip(GRID, vals)) for vals in itertools.product(*GRID.values())]
        combos.sort(key=lambda kw: kw != default)
        return {
            f"{grid_name(kw)}" + (" (default)" if kw == default else ""): ({} if kw == default else kw) for kw in combos
        }
    return {
        "default (lexical 0.45, dense 1)": {},
        "dense only": {"use_lexical": False},
        "lexical only": {"use_dense": False},
        "lexical 1.0": {"lexical_weight": 1.0},
        "lexical 2.0": {"lexical_weight": 2.0},
        "lexical 4.0": {"lexical_weight": 4.0},
        "file locality (chunks in neighbour_kinds)": {"neighbour_kinds": ("turn", "chunk")},
        "lexical 2.0 + file locality": {"lexical_weight": 2.0, "neighbour_kinds": ("turn", "chunk")},
        "rank fusion": {"fusion": "rank"},
    }


def names_file(query: str, gold: str) -> bool:
    """The issue names the gold file: its file name (``models.py``) or dotted module path."""
    stem = gold[:-3] if gold.endswith(".py") else gold
    parts = stem.split("/")
    if parts[0] == "src":
        parts = parts[1:]
    dotted = ".".join(p for p in parts if p != "__init__")
    return gold.rsplit("/", 1)[-1] in query or (dotted.count(".") >= 1 and dotted in query)


def one_release_groups(groups: dict[tuple[str, str], list[Instance]]) -> dict[tuple[str, str], list[Instance]]:
    """Every instance of a project against one release: the series with the most instances (the
    later on a tie). Twelve corpora instead of sixty-four make all 300 issues affordable on a CPU;
    an issue whose gold file the release lacks is skipped and reported."""
    from packaging.version import Version

    by_repo: dict[str, dict[str, list[Instance]]] = {}
    for (repo, series), insts in groups.items():
        by_repo.setdefault(repo, {})[series] = insts
    out: dict[tuple[str, str], list[Instance]] = {}
    for repo, per_series in by_repo.items():
        chosen = max(per_series, key=lambda s: (len(per_series[s]), Version(s)))
        out[(repo, chosen)] = [i for s in sorted(per_series, key=Version) for i in per_series[s]]
    return out


def run(args, embedder, log=print) -> dict:
    from titans_agent import AgentConfig, RetrievalConfig

    cache = Path(args.cache)
    if args.source_dir:
        instances = load_instances(Path(args.instances), None, args.limit)
    else:
        projects = None if args.all else [p.strip() for p in args.projects.split(",") if p.strip()]
        instances = load_instances(Path(args.instances or args.data), projects, args.limit)
    groups: dict[tuple[str, str], list[Instance]] = {}
    for inst in instances:
        groups.setdefault((inst.repo, inst.version), []).append(inst)
    if getattr(args, "one_release", False) and not args.source_dir:
        groups = one_release_groups(groups)
    mapping, skipped, rows = [], [], []
    exp_names = [] if args.no_experiments else list(experiment_configs(args.grid))
    for (repo, series), insts in sorted(groups.items()):
        if args.source_dir:
            release, root = "local", Path(args.source_dir).resolve()
            pypi = repo
        else:
            pypi = PYPI_NAMES.get(repo, repo.split("/")[-1])
            got = fetch_source(pypi, series, cache)
            if isinstance(got, str):
                mapping.append((repo, series, pypi, "-", 0, got))
                skipped += [(i.instance_id, got) for i in insts]
                continue
            release, root = got
            root = root.resolve()
        key = f"{pypi.lower()}-{release}"
        log(f"{repo} {series} -> {pypi} {release} ({len(insts)} instances)")
        corpus = build_corpus(key, root, cache / "db" / f"{key}.db", embedder, log=log)
        base = AgentConfig(device="cpu", threads=None)
        todo = []
        for inst in insts:
            gold = match_gold(inst.gold_path, corpus.files)
            if gold is None:
                skipped.append((inst.instance_id, f"gold file {inst.gold_path} not among the ingested files of {key}"))
            else:
                todo.append((inst, gold))
        queries = [inst.query for inst, _ in todo]
        configs = {"": base} | {
            name: base.model_copy(update={"retrieval": RetrievalConfig(**kw)})
            for name, kw in experiment_configs(args.grid).items()
            if name in exp_names and kw
        }
        experiments = agent_rankings(corpus.db, configs, embedder, queries, root, args.k)
        products = experiments.pop("")
        for j, ((inst, gold), product) in enumerate(zip(todo, products)):
            ranges = function_ranges(corpus.files[gold], inst.gold_functions)
            toks = code_tokens(inst.query)
            bc = [corpus.chunks[i][:3] for i in bm25_top(corpus.bm25_chunks, toks, args.k)]
            bf = [corpus.file_names[i] for i in bm25_top(corpus.bm25_files, toks, args.k)]
            pieces = len(embedder.tokenizer(inst.query, add_special_tokens=True)["input_ids"])
            row = {
                "instance_id": inst.instance_id,
                "project": inst.project,
                "series": inst.version,
                "corpus_series": series,
                "release": release,
                "gold": gold,
                "gold_by_suffix": gold != inst.gold_path,
                "gold_functions": inst.gold_functions,
                "function_found": bool(ranges),
                "query_pieces": pieces,
                "traceback": bool(TRACEBACK.search(inst.query)),
                "traceback_names_gold": any(
                    m.group(1).replace("\\", "/").endswith(gold.removeprefix("src/"))
                    for m in re.finditer(r'File "([^"]+)", line \d+', inst.query)
                ),
                "names_file": names_file(inst.query, gold),
                "names_function": any(re.search(rf"\b{re.escape(f)}\b", inst.query) for f in inst.gold_functions),
                "rank": {
                    PRODUCT: file_rank(dedupe(p for p, _, _ in product), gold),
                    BM25_CHUNKS: file_rank(dedupe(p for p, _, _ in bc), gold),
                    BM25_FILES: file_rank(bf, gold),
                },
                "fn_hit10": {PRODUCT: function_hit(product, gold, ranges), BM25_CHUNKS: function_hit(bc, gold, ranges)},
                "top10_test_doc": {
                    PRODUCT: sum(is_test_or_doc(p) for p, _, _ in product[:10]),
                    BM25_CHUNKS: sum(is_test_or_doc(p) for p, _, _ in bc[:10]),
                },
                "product_top10": [f"{p}:{s}-{e}" for p, s, e in product[:10]],
                "experiments": {
                    name: file_rank(dedupe(p for p, _, _ in experiments.get(name, products)[j]), gold)
                    for name in exp_names
                },
                # the default ranking without tests/docs/examples chunks: what ingest(exclude=[...]) would
                # roughly give (BM25 statistics aside), computed from the same recall
                "without_tests_docs": file_rank(dedupe(p for p, _, _ in product if not is_test_or_doc(p)), gold),
            }
            rows.append(row)
        ran = len(todo)
        mapping.append((repo, series, pypi, release, ran, f"{len(corpus.files)} files, {len(corpus.chunks)} chunks"))
        if hasattr(embedder, "save"):
            embedder.save()
    return {
        "rows": rows, "mapping": mapping, "skipped": skipped, "k": args.k, "experiments": exp_names,
        "grid": bool(args.grid),
    }  # fmt: skip


# ------------------------------------------------------------------------------------- reporting
def fmt_ci(t: tuple[float, float, float]) -> str:
    return f"{t[0]:+.3f} [{t[1]:+.3f}, {t[2]:+.3f}]"


def main_table(rows: list[dict]) -> list[str]:
    lines = [
        "| retriever | queries | R@1 | R@5 | R@10 | MRR | function hit@10 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    fn_rows = [r for r in rows if r["function_found"]]
    for name in (PRODUCT, BM25_CHUNKS, BM25_FILES):
        s = summary([r["rank"][name] for r in rows])
        fn = f"{np.mean([r['fn_hit10'][name] for r in fn_rows]):.3f}" if fn_rows and name != BM25_FILES else "n/a"
        lines.append(
            f"| {name} | {len(rows)} | {s['r1']:.3f} | {s['r5']:.3f} | {s['r10']:.3f} | {s['mrr']:.3f} | {fn} |"
        )
    return lines


def ci_table(rows: list[dict]) -> list[str]:
    lines = ["| difference (paired, over queries) | R@10 [95% CI] | MRR [95% CI] |", "|---|---|---|"]
    p = [r["rank"][PRODUCT] for r in rows]
    for name in (BM25_CHUNKS, BM25_FILES):
        b = [r["rank"][name] for r in rows]
        lines.append(
            f"| {PRODUCT} minus {name} | {fmt_ci(paired_bootstrap(r10(p), r10(b)))} "
            f"| {fmt_ci(paired_bootstrap(rr(p), rr(b)))} |"
        )
    return lines


def subgroup_lines(rows: list[dict]) -> list[str]:
    """R@10 of each retriever on subsets of the queries: the analysis of where the product loses."""
    tests = {
        f"query over {QUERY_WINDOW} word pieces (dense sees a prefix)": lambda r: r["query_pieces"] > QUERY_WINDOW,
        f"query within {QUERY_WINDOW} word pieces": lambda r: r["query_pieces"] <= QUERY_WINDOW,
        "has a traceback": lambda r: r["traceback"],
        "a traceback frame is in the gold file": lambda r: r.get("traceback_names_gold", False),
        "no traceback": lambda r: not r["traceback"],
        "names the gold file (file name or module path)": lambda r: r["names_file"],
        "does not name the gold file": lambda r: not r["names_file"],
        "names a gold function": lambda r: r["names_function"],
        "names no gold function": lambda r: not r["names_function"],
    }
    lines = [
        "| queries | n | titans R@10 | BM25 chunks R@10 | BM25 files R@10 | titans MRR | BM25 files MRR "
        "| titans median gold rank |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, keep in tests.items():
        sub = [r for r in rows if keep(r)]
        if not sub:
            lines.append(f"| {label} | 0 | | | | | | |")
            continue
        p, c, f = ([r["rank"][n] for r in sub] for n in (PRODUCT, BM25_CHUNKS, BM25_FILES))
        med = np.median([x or 10**4 for x in p])
        med_s = f"{med:.0f}" if med < 10**4 else "not found"
        lines.append(
            f"| {label} | {len(sub)} | {r10(p).mean():.3f} | {r10(c).mean():.3f} | {r10(f).mean():.3f} "
            f"| {rr(p).mean():.3f} | {rr(f).mean():.3f} | {med_s} |"
        )
    return lines


def analysis_lines(rows: list[dict], k: int) -> list[str]:
    pieces = np.array([r["query_pieces"] for r in rows])
    seen = np.minimum(1.0, QUERY_WINDOW / pieces)
    p, f = [r["rank"][PRODUCT] for r in rows], [r["rank"][BM25_FILES] for r in rows]
    wins = sum(a > b for a, b in zip(r10(p), r10(f)))
    losses = sum(a < b for a, b in zip(r10(p), r10(f)))
    lost = [r for r, a, b in zip(rows, r10(p), r10(f)) if a < b]
    share = {n: np.mean([r["top10_test_doc"][n] for r in rows]) / 10 for n in (PRODUCT, BM25_CHUNKS)}
    share_lost = np.mean([r["top10_test_doc"][PRODUCT] for r in lost]) / 10 if lost else float("nan")
    gold_test = sum(is_test_or_doc(r["gold"]) for r in rows)
    return [
        f"- Query length: median {np.median(pieces):.0f} word pieces (IQR {np.percentile(pieces, 25):.0f}-"
        f"{np.percentile(pieces, 75):.0f}, max {pieces.max()}); {np.mean(pieces > QUERY_WINDOW):.0%} of the issues "
        f"are longer than the embedder's {QUERY_WINDOW}; the dense signal sees on average {seen.mean():.0%} of an "
        f"issue's word pieces (median {np.median(seen):.0%}); BM25 sees all of them.",
        f"- Against BM25 over whole files at R@10 the product wins {wins} queries and loses {losses} "
        f"(ties {len(rows) - wins - losses}).",
        f"- Tests/docs/examples among the top 10 chunks: {share[PRODUCT]:.0%} for the product "
        f"({share_lost:.0%} on the queries it loses to BM25-files), {share[BM25_CHUNKS]:.0%} for BM25 over the "
        f"same chunks; {gold_test} of {len(rows)} gold files are themselves tests/docs.",
        f"- Gold file not among the files of the product's {k} chunks: {sum(x is None for x in p)} of {len(rows)} "
        f"queries (BM25-files: {sum(x is None for x in f)} not in its top {k} files).",
    ]


def experiment_lines(rows: list[dict], names: Sequence[str]) -> list[str]:
    if not names:
        return []
    long_rows = [r for r in rows if r["query_pieces"] > QUERY_WINDOW]
    lines = [
        f"| RetrievalConfig | R@1 | R@5 | R@10 | MRR | R@10 on queries > {QUERY_WINDOW} pieces (n={len(long_rows)}) "
        "| ΔR@10 vs default [95% CI] |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    default = [r["experiments"][names[0]] for r in rows]
    post = "default, tests/docs/examples chunks dropped from its list (post-filter)"
    for r in rows:
        r["experiments"][post] = r.get("without_tests_docs")
    for name in [*names, post]:
        ranks = [r["experiments"][name] for r in rows]
        s = summary(ranks)
        lr = r10([r["experiments"][name] for r in long_rows]).mean() if long_rows else float("nan")
        ci = "" if name == names[0] else fmt_ci(paired_bootstrap(r10(ranks), r10(default)))
        lines.append(f"| {name} | {s['r1']:.3f} | {s['r5']:.3f} | {s['r10']:.3f} | {s['mrr']:.3f} | {lr:.3f} | {ci} |")
    return lines


def r1(ranks: Sequence[int | None]) -> np.ndarray:
    return np.array([1.0 if r == 1 else 0.0 for r in ranks])


def lopo_choice(rows: list[dict], names: Sequence[str], held_out: str | None) -> str:
    """The setting with the best file MRR on the projects other than ``held_out`` (all: None);
    ties go to the earlier name (the default first)."""
    train = [r for r in rows if r["project"] != held_out]
    if not train:  # a single project: nothing to tune on
        return names[0]
    return max(names, key=lambda n: (rr([r["experiments"][n] for r in train]).mean(), -list(names).index(n)))


def lopo_lines(rows: list[dict], names: Sequence[str]) -> list[str]:
    """Leave one project out: each project scored with the setting chosen on the others (by file
    MRR), against BM25 over whole files, with paired bootstrap intervals; the in-fold choice beside."""
    if not names:
        return []
    projects = list(dict.fromkeys(r["project"] for r in rows))
    chosen = {p: lopo_choice(rows, names, p) for p in projects}
    oof = [r["experiments"][chosen[r["project"]]] for r in rows]
    infold_name = lopo_choice(rows, names, None)
    infold = [r["experiments"][infold_name] for r in rows]
    default = [r["experiments"][names[0]] for r in rows]
    files = [r["rank"][BM25_FILES] for r in rows]
    fn_rows = [i for i, r in enumerate(rows) if r["function_found"]]
    lines = [
        "| ranking | queries | R@1 | R@5 | R@10 | MRR |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, ranks in (
        ("titans-agent, setting chosen out of fold (leave one project out)", oof),
        (f"titans-agent, in-fold best ({infold_name}; not out of sample)", infold),
        (f"titans-agent, {names[0]}", default),
        (BM25_FILES, files),
    ):
        m = summary(ranks)
        lines.append(f"| {label} | {len(rows)} | {m['r1']:.3f} | {m['r5']:.3f} | {m['r10']:.3f} | {m['mrr']:.3f} |")
    lines += [
        "",
        "| difference (paired over queries, 95% CI) | R@1 | R@10 | MRR |",
        "|---|---|---|---|",
        f"| out of fold minus BM25 whole files | {fmt_ci(paired_bootstrap(r1(oof), r1(files)))} "
        f"| {fmt_ci(paired_bootstrap(r10(oof), r10(files)))} | {fmt_ci(paired_bootstrap(rr(oof), rr(files)))} |",
        f"| out of fold minus {names[0]} | {fmt_ci(paired_bootstrap(r1(oof), r1(default)))} "
        f"| {fmt_ci(paired_bootstrap(r10(oof), r10(default)))} | {fmt_ci(paired_bootstrap(rr(oof), rr(default)))} |",
        "",
        "| held-out project | n | setting chosen on the other projects | R@1 | R@10 | MRR | BM25 files MRR |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for p in projects:
        idx = [i for i, r in enumerate(rows) if r["project"] == p]
        o, f = [oof[i] for i in idx], [files[i] for i in idx]
        lines.append(
            f"| {p} | {len(idx)} | {chosen[p]} | {r1(o).mean():.3f} | {r10(o).mean():.3f} | {rr(o).mean():.3f} "
            f"| {rr(f).mean():.3f} |"
        )
    if fn_rows:
        lines += ["", f"Function hit@10 is reported for the default run above ({len(fn_rows)} queries)."]
    return lines


def ablation_lines(rows: list[dict], names: Sequence[str]) -> list[str]:
    """The default setting against each setting of the grid that changes one of its values (the
    same run, the same queries; paired bootstrap intervals of the change)."""
    settings = {n: ({**grid_defaults(), **kw} if kw else grid_defaults()) for n, kw in experiment_configs(True).items()}
    if not names or names[0] not in settings or any(n not in settings for n in names):
        return []
    base = settings[names[0]]
    default = [r["experiments"][names[0]] for r in rows]
    lines = [
        "| change from the default | R@1 | R@10 | MRR | ΔR@1 [95% CI] | ΔMRR [95% CI] |",
        "|---|---:|---:|---:|---|---|",
    ]
    m = summary(default)
    lines.append(f"| none ({names[0]}) | {m['r1']:.3f} | {m['r10']:.3f} | {m['mrr']:.3f} | | |")
    for name in names[1:]:
        changed = {k: v for k, v in settings[name].items() if base[k] != v}
        if len(changed) != 1:
            continue
        ranks = [r["experiments"][name] for r in rows]
        m = summary(ranks)
        d1, dm = paired_bootstrap(r1(ranks), r1(default)), paired_bootstrap(rr(ranks), rr(default))
        lines.append(
            f"| {grid_name(changed)} | {m['r1']:.3f} | {m['r10']:.3f} | {m['mrr']:.3f} | {fmt_ci(d1)} | {fmt_ci(dm)} |"
        )
    return lines


def per_project_lines(rows: list[dict]) -> list[str]:
    lines = [
        "| project | n | titans R@10 | BM25 chunks R@10 | BM25 files R@10 | titans MRR | BM25 files MRR |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for proj in dict.fromkeys(r["project"] for r in rows):
        sub = [r for r in rows if r["project"] == proj]
        p, c, f = ([r["rank"][n] for r in sub] for n in (PRODUCT, BM25_CHUNKS, BM25_FILES))
        lines.append(
            f"| {proj} | {len(sub)} | {r10(p).mean():.3f} | {r10(c).mean():.3f} | {r10(f).mean():.3f} "
            f"| {rr(p).mean():.3f} | {rr(f).mean():.3f} |"
        )
    return lines


def report(result: dict, title_extra: str = "") -> str:
    rows, k = result["rows"], result["k"]
    out = [
        "# Code retrieval on SWE-bench Lite (issue 19)",
        "",
        f"Query: the issue text; corpus: the project's `*.py` files at the instance's release; gold: the file the fix "
        f"changes. titans-agent `recall(issue, k={k})` (default `AgentConfig`, all-MiniLM-L6-v2) against BM25 "
        f"(rank-bm25, code tokenizer) over the same chunks and over whole files. File ranks are of the files of the "
        f"returned chunks, deduplicated in order; a gold file outside the {k} chunks (or the top {k} files) scores 0. "
        f"Function hit@10: a top-10 chunk in the gold file overlapping a changed function (`ast` line range). "
        f"Produced by `benchmarks/code.py`{title_extra}.",
        "",
        *main_table(rows),
        "",
        *(
            [
                "The runs predate today's defaults: the product's file ranks above are the grid's ranking "
                "with today's default setting (the same run); function hit@10 and the top-10 lists are of "
                "the setting that was the default when they ran (it differs only in `dense_coverage`).",
                "",
            ]
            if any("rank_of_run_default" in r for r in rows)
            else []
        ),
        "Paired bootstrap (10,000 resamples over queries):",
        "",
        *ci_table(rows),
        "",
        f"Function hit@10 is over the {sum(r['function_found'] for r in rows)} queries whose changed function was "
        "found in the release's gold file (module-level changes and renamed functions have none).",
        "",
        "## By project",
        "",
        *per_project_lines(rows),
        "",
        "## Where the product loses (analysis)",
        "",
        *analysis_lines(rows, k),
        "",
        *subgroup_lines(rows),
        "",
    ]
    if result["experiments"] and result.get("grid"):
        out += [
            "## Tuned leave one project out",
            "",
            *lopo_lines(rows, result["experiments"]),
            "",
            "## What each part is worth: the default against one change at a time (same run)",
            "",
            *ablation_lines(rows, result["experiments"]),
            "",
            "## Every setting of the grid (in-fold, over all queries)",
            "",
            *experiment_lines(rows, result["experiments"]),
            "",
        ]
    elif result["experiments"]:
        out += [
            "## Fusion weights (experiment on the same databases; not used to pick defaults)",
            "",
            *experiment_lines(rows, result["experiments"]),
            "",
        ]
    out += [
        "The SWE-bench paper (Jimenez et al. 2024) reports its BM25 retrieval as the recall of the gold files "
        "within a context budget (whole files ranked by BM25, packed up to 13k, 27k or 50k tokens) on the full "
        "SWE-bench test set, not as recall@k of a ranked list on SWE-bench Lite; its figures could not be checked "
        "from this machine, so none are quoted here, and they would not be directly comparable. "
        "'BM25, whole files' above is the closest analogue: BM25 over the release's whole files.",
        "",
        "## Corpora: SWE-bench version -> PyPI release",
        "",
        "| repo | SWE-bench version | PyPI project | release | instances ran | corpus |",
        "|---|---|---|---|---:|---|",
        *[f"| {a} | {b} | {c} | {d} | {e} | {f} |" for a, b, c, d, e, f in result["mapping"]],
        "",
        f"Gold paths matched on their suffix rather than exactly: {sum(r.get('gold_by_suffix', False) for r in rows)} "
        "(an sdist laid out differently from the repository). Per-query ranks, flags and the product's top 10 "
        "chunks: `code_per_query.jsonl` beside this report.",
        "",
        f"Instances that ran: {', '.join(r['instance_id'] for r in rows) or 'none'}.",
        "",
        "Skipped: " + ("; ".join(f"{i} ({why})" for i, why in result["skipped"]) or "none") + ".",
        "",
    ]
    return "\n".join(out)


def chart(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    names = [PRODUCT, BM25_CHUNKS, BM25_FILES]
    metrics = ("r1", "r5", "r10", "mrr")
    fig, axes = plt.subplots(1, 2 if result["experiments"] else 1, figsize=(12, 4.5), squeeze=False)
    ax = axes[0][0]
    x = np.arange(len(metrics))
    for i, name in enumerate(names):
        s = summary([r["rank"][name] for r in rows])
        vals = [s[m] for m in metrics]
        ax.bar(x + (i - 1) * 0.27, vals, 0.27, label=name)
        for xi, v in zip(x + (i - 1) * 0.27, vals):
            ax.text(xi, v + 0.01, f"{v:.2f}", ha="center", fontsize=7)
    ax.set_xticks(x, ["R@1", "R@5", "R@10", "MRR"])
    ax.set_ylim(0, 1)
    ax.set_title(f"Gold file of SWE-bench Lite issues (n={len(rows)})", fontsize=10)
    ax.legend(fontsize=8)
    if result["experiments"]:
        ax = axes[0][1]
        exp = result["experiments"]
        vals = [r10([r["experiments"][n] for r in rows]).mean() for n in exp]
        y = np.arange(len(exp))[::-1]
        ax.barh(y, vals, color="#1f77b4")
        bf = r10([r["rank"][BM25_FILES] for r in rows]).mean()
        ax.axvline(bf, color="red", linestyle="--", linewidth=1, label=f"BM25 whole files ({bf:.2f})")
        for yi, v in zip(y, vals):
            ax.text(v + 0.005, yi, f"{v:.3f}", va="center", fontsize=7)
        ax.set_yticks(y, exp, fontsize=7)
        ax.set_xlim(0, 1)
        ax.set_xlabel("file R@10")
        ax.set_title("titans-agent RetrievalConfig variants (experiment)", fontsize=10)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def merge_results(paths: Sequence[Path]) -> dict:
    """The results of several runs (their ``code_result.json``) as one, for a report over projects
    run one at a time; every run must have run the same settings."""
    results = [json.loads(Path(p).read_text()) for p in paths]
    first = results[0]
    if any(r["experiments"] != first["experiments"] or r["k"] != first["k"] for r in results):
        raise SystemExit("--merge: the runs tried different settings or k")
    rows = [row for r in results for row in r["rows"]]
    names = first["experiments"]
    if first.get("grid"):  # the runs may predate a change of the defaults: label and rank by today's
        current = list(experiment_configs(True))
        plain = {n.removesuffix(" (default)"): n for n in current}
        rename = {n: plain.get(n.removesuffix(" (default)"), n) for n in names}
        if current[0] != rename[names[0]]:
            for row in rows:
                row["experiments"] = {rename.get(n, n): v for n, v in row["experiments"].items()}
                row["rank_of_run_default"] = row["rank"][PRODUCT]
                row["rank"][PRODUCT] = row["experiments"][current[0]]
            names = [current[0], *(rename[n] for n in names if rename[n] != current[0])]
    return {
        **first,
        "experiments": names,
        "rows": rows,
        "mapping": [m for r in results for m in r["mapping"]],
        "skipped": [x for r in results for x in r["skipped"]],
    }


def main(argv: list[str] | None = None, embedder=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--projects", default=",".join(DEFAULT_PROJECTS), help="repo names, comma-separated")
    parser.add_argument("--all", action="store_true", help="every project of SWE-bench Lite")
    parser.add_argument("--limit", type=int, default=None, help="first N instances of each project")
    parser.add_argument("--k", type=int, default=100, help="chunks recalled per query (default 100)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--source-dir", type=Path, default=None, help="one local corpus for every instance (offline)")
    parser.add_argument("--instances", type=Path, default=None, help="instances file (SWE-bench JSON list)")
    parser.add_argument(
        "--one-release",
        action="store_true",
        help="each project's issues against one release (its most common series), not each issue's own",
    )
    parser.add_argument(
        "--merge", type=Path, nargs="+", default=None, help="report over the code_result.json of earlier runs"
    )
    parser.add_argument("--grid", action="store_true", help="tune GRID leave-one-project-out (else a few variants)")
    parser.add_argument("--no-experiments", action="store_true", help="skip the RetrievalConfig variants")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    if args.source_dir and not args.instances:
        parser.error("--source-dir needs --instances")

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        if embedder is None and not args.merge:
            from titans_agent.embeddings import load_embedder

            embedder = CachedEmbedder(
                load_embedder("all-MiniLM-L6-v2", device="cpu"), args.cache / "embeddings", tag="code", save_every=2000
            )
        t0 = time.perf_counter()
        result = merge_results(args.merge) if args.merge else run(args, embedder)
    finally:
        torch.set_num_threads(threads)
    if not result["rows"]:
        print("no instance ran:", result["skipped"], file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "code_result.json").write_text(json.dumps(result))
    with open(args.out / "code_per_query.jsonl", "w") as fh:
        for row in result["rows"]:
            fh.write(json.dumps(row) + "\n")
    command = " ".join(["benchmarks/code.py", *(sys.argv[1:] if argv is None else argv)])
    text = report(result, f" (`{command}`) in {time.perf_counter() - t0:.0f} s on {args.threads} thread(s)")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "code.md").write_text(text)
    chart(result, args.out / "code.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
