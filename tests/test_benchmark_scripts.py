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


def test_memory_speed_worker_measures_one_row():
    speed = load_benchmark("memory_speed")
    threads = torch.get_num_threads()
    try:  # the worker sets the thread count of its process: give it back to the test session
        row = speed._worker({"impl": "ours", "mode": "one call", "batch": 1, "length": 128, "threads": 1, "repeats": 1})
    finally:
        torch.set_num_threads(threads)
    assert row["finite"] is True
    assert row["tokens_per_s"] > 0
    assert row["state_mb"] == pytest.approx(9.0)  # weights + momentum of 384 -> 1536 -> 384, float32
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
    assert chunk_row["finite"] is True and chunk_row["state_mb"] == pytest.approx(9.0)
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
    rows = [line for line in text.splitlines() if line.startswith("| 1x128 | ours |")]
    assert len(rows) == 4  # one call and stream64, token-level and chunk-start reads: one row each
    fractions = [line for line in text.splitlines() if line.startswith("| 1x128 | as of")]
    assert len(fractions) == 2 and all("%" in line for line in fractions)
    assert out.with_suffix(".png").stat().st_size > 10_000
    monkeypatch.setattr("sys.argv", ["memory_speed.py", "--rounds", "0", "--out", str(out)])
    with pytest.raises(SystemExit):
        speed.main()
