"""benchmarks/gpu_check.sh, the one command of the GPU check, rehearsed on the CPU: GPU time is scarce,
and a mistake found there costs a run. The dry run goes through every stage at tiny sizes, on the data
the check's bundle holds, and leaves every stage's figures in its JSON."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from offline import mirror_with

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
STAGES = ["tests", "eager", "compiled", "lecture"]


def gpu_check(*args, timeout=900, **env):
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", **env}
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_check_says_how_to_run_it_and_refuses_unknown_options():
    usage = gpu_check("--help", timeout=30)
    assert usage.returncode == 0 and "--cpu-dry-run" in usage.stdout and "--bundle" in usage.stdout
    wrong = gpu_check("--gpus", "8", timeout=30)
    assert wrong.returncode == 2 and "unknown option --gpus" in wrong.stderr


@pytest.mark.slow
def test_a_cpu_dry_run_goes_through_every_stage_and_records_its_figures(tmp_path):
    mirror_with("wikitext2_raw/wiki.valid.raw")
    bundle = gpu_check("--bundle", str(tmp_path / "data"), timeout=120)
    assert bundle.returncode == 0, bundle.stderr
    files = sorted(p.relative_to(tmp_path / "data").as_posix() for p in (tmp_path / "data").rglob("*") if p.is_file())
    assert files == [
        "bert_vocab/vocab.txt", "squad_v1.1/dev-v1.1.json", "wikitext2_raw/wiki.test.raw",
        "wikitext2_raw/wiki.valid.raw"]

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "benchmark_eager.jsonl").write_text('{"an earlier run": true}\n')  # not this run's figures
    run = gpu_check("--cpu-dry-run", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    figures = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert figures["mode"] == "cpu dry run" and list(figures["stages"]) == STAGES
    assert all(s["passed"] and 0 < s["seconds"] < s["limit_s"] for s in figures["stages"].values())

    tests = figures["tests"]
    assert tests["passed"] == tests["tests"] >= 12 and tests["skipped"] == 0  # rehearsed, not skipped
    recorded = {name for case in tests["cases"].values() for name in case} - {"outcome", "seconds"}
    assert {"compile_seconds", "bf16_largest_gap_to_fp32", "fp16_largest_gap_to_fp32"} <= recorded

    for kind, compiled in (("eager", None), ("compiled", "aot_eager")):
        bench = figures["benchmark"][kind]
        assert bench["settings"]["compile"] == compiled and bench["ratio"] > 0 and bench["ratio_padded"] > 0
        for library in ("minibert", "minibert, padded", "transformers"):
            result = bench["results"][library]  # peak memory: measured on a GPU only
            assert result["tokens_per_s"] > 0 and result["peak_memory_gib"] is None and result["warmup_s"] > 0

    lecture = figures["lecture"]
    assert lecture["steps"] == 3 and lecture["device"] == "cpu" and lecture["settings"]["objective"] == "none"
    assert math.isfinite(lecture["eval_loss"]) and lecture["unigram_loss"] > 0 and "below_plateau" in lecture
    log = (tmp_path / "out" / "gpu_check.log").read_text()
    assert all(f"=== {stage} passed in" in log for stage in STAGES)
