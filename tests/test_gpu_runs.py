"""The GPU runs of issue [4/4] rehearsed on the CPU (`--cpu-dry-run`): `benchmarks/gpu_throughput.sh` (§1),
`benchmarks/gpu_course_bert.sh` (§2), `benchmarks/gpu_both_sides.sh` (§3) and `benchmarks/gpu_lectures.sh` (§4),
each one command for a loan of a GPU machine. GPU time is scarce
and a mistake found there costs a loan, so each goes through every stage here at tiny sizes, from a data
archive made the way its --bundle makes one, and leaves the figures the loan is for."""
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from offline import fresh_data_dir, mirror_with

from minibert.pretraining.corpus import source_files

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def script(name, *args, timeout=900):
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    return subprocess.run(["bash", str(ROOT / "benchmarks" / name), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """What a dry run reads, packed as --bundle packs (data/ in an xz tar): WikiText-2 raw, the vocabulary,
    UD English EWT (the part-of-speech probe's sentences), SST-2 and SQuAD v1.1 dev."""
    mirror_with("wikitext2_raw/wiki.valid.raw")
    folder = tmp_path_factory.mktemp("bundle")
    names = ["wikitext2_raw", "bert_vocab", "ud_english_ewt", "sst2", "squad_v1.1"]
    fetch = subprocess.run([sys.executable, "-m", "minibert.data", "fetch", *names, "--dest", str(folder / "data")],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert fetch.returncode == 0, fetch.stderr
    path = folder / "data.tar.xz"
    with tarfile.open(path, "w:xz") as tar:
        tar.add(folder / "data", arcname="data")
    return path


def test_the_scripts_say_how_to_run_them_and_refuse_what_they_do_not_know():
    for name in ("gpu_throughput.sh", "gpu_course_bert.sh", "gpu_both_sides.sh", "gpu_lectures.sh"):
        usage = script(name, "--help", timeout=30)
        assert usage.returncode == 0 and "--cpu-dry-run" in usage.stdout and "--archive" in usage.stdout
        wrong = script(name, "--gpus", "8", timeout=30)
        assert wrong.returncode == 2 and "unknown option --gpus" in wrong.stderr
    missing = script("gpu_throughput.sh", "--archive", "/nonexistent.tar.xz", "--cpu-dry-run", timeout=30)
    assert missing.returncode == 2 and "no data archive" in missing.stderr
    both = script("gpu_both_sides.sh", "--archive", "/nonexistent.tar.xz", "--objective", "no-mask", timeout=30)
    assert both.returncode == 2 and "--objective must be mlm or ltr" in both.stderr


def test_the_text_every_gpu_setting_names_exists(tmp_path):
    """The dry runs read WikiText-2; on the GPU the scripts name other text (Wikipedia, a folder of its
    shards). Each --corpus / --eval-corpus a script names must be text the data layer finds."""
    mirror_with("wikipedia_2015/AA/wiki_02")
    named = {value for path in (ROOT / "benchmarks").glob("gpu_*.sh")
             for value in re.findall(r"--(?:eval-)?corpus ([^\s)]+)", path.read_text()) if "$" not in value and value != "none"}
    assert {"wikipedia_2015", "wikipedia_2015/AA", "wikitext2_raw/wiki.valid.raw"} <= named
    with fresh_data_dir(tmp_path):
        for value in sorted(named):
            assert source_files(value), value


def test_the_throughput_grid_records_every_cell_of_every_stage(archive, tmp_path):
    (tmp_path / "throughput.jsonl").write_text('{"an earlier run": true}\n')  # replaced, not added to
    run = script("gpu_throughput.sh", "--archive", str(archive), "--cpu-dry-run", "--out", str(tmp_path))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    stages = [line.split("\t") for line in (tmp_path / "stages.tsv").read_text().splitlines()]
    assert [(name, status) for name, status, *_ in stages] == [
        ("compiled-128", "0"), ("eager-128", "0"), ("eager-512", "0")]
    cells = [json.loads(line) for line in (tmp_path / "throughput.jsonl").read_text().splitlines()]
    assert [(bool(c["settings"]["compile"]), c["seq"], c["batch"]) for c in cells] == [
        (True, 32, 4), (True, 32, 8), (False, 32, 4), (False, 32, 8), (False, 64, 4)]
    for cell in cells:
        assert set(cell["results"]) == {"transformers", "minibert, padded", "minibert"}
        for result in cell["results"].values():
            low, mid, high = result["tokens_per_s_low"], result["tokens_per_s"], result["tokens_per_s_high"]
            assert 0 < low <= mid <= high and len(result["rounds_s"]) == 2
        assert cell["ratio"] > 0 and cell["ratio_padded"] > 0 and 0.5 < cell["real_token_fraction"] <= 1
    profile = (tmp_path / "profile.txt").read_text()
    assert profile.count("== minibert, seq 32") == 2 and "aten::mm" in profile
    assert "5 cells in" in (tmp_path / "throughput.log").read_text()


def test_the_course_bert_trains_exports_and_goes_on_from_its_export(archive, tmp_path):
    first = script("gpu_course_bert.sh", "--archive", str(archive), "--cpu-dry-run", "--out", str(tmp_path / "one"))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    for name in ("timing:", "== train:", "== export", "eval_mlm_accuracy", "eval_nsp_accuracy"):
        assert name in first.stdout
    recipe = json.loads((tmp_path / "one" / "recipe.json").read_text())
    assert recipe["step"] >= 10 and recipe["device"] == "cpu"
    with tarfile.open(tmp_path / "one" / "course_bert.tar") as tar:
        names = tar.getnames()
    assert {"course-bert/config.json", "course-bert/held_out.json", "course-bert/vocab.txt"} <= set(names)

    # a later loan: from the export, a fixed number of steps (no timing run), a lower peak rate
    second = script("gpu_course_bert.sh", "--archive", str(archive), "--cpu-dry-run", "--steps", "4",
                    "--init-from", str(tmp_path / "one" / "course_bert.tar"), "--out", str(tmp_path / "two"))
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "timing:" not in second.stdout
    recipe = json.loads((tmp_path / "two" / "recipe.json").read_text())
    assert recipe["step"] == 4 and recipe["args"]["lr"] == 0.0005 and recipe["args"]["init_from"]


def test_the_bidirectionality_curve_of_one_objective_lands_and_goes_on_from_an_earlier_call(archive, tmp_path):
    run = script("gpu_both_sides.sh", "--archive", str(archive), "--objective", "mlm", "--cpu-dry-run",
                 "--out", str(tmp_path / "one"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    stored = json.loads((tmp_path / "one" / "bidirectionality_mlm.json").read_text())
    assert [(r["objective"], r["seed"]) for r in stored["runs"]] == [("mlm", 0), ("mlm", 1)]
    assert all([p["step"] for p in r["curve"]] == [3, 6] for r in stored["runs"])
    assert stored["references"]["word_identity_pos_accuracy"] > 0 and "in_progress" not in stored
    assert "mlm#1: hidden-word POS / fill-in-the-blank loss at step 3:" in run.stdout

    again = script("gpu_both_sides.sh", "--archive", str(archive), "--objective", "mlm", "--cpu-dry-run",
                   "--results", str(tmp_path / "one" / "bidirectionality_mlm.json"), "--out", str(tmp_path / "two"))
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert json.loads((tmp_path / "two" / "bidirectionality_mlm.json").read_text())["runs"] == stored["runs"]
    assert "2 finished runs" in again.stdout and "pre-training runs" not in again.stdout  # kept, not run again


def test_the_lectures_notebooks_settings_run_through_their_recipes_and_give_minutes(archive, tmp_path):
    (tmp_path / "05_masking.json").write_text("{}")  # an earlier run's: replaced, not gone on from
    run = script("gpu_lectures.sh", "--archive", str(archive), "--cpu-dry-run", "--out", str(tmp_path))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    figures = json.loads((tmp_path / "lectures.json").read_text())
    assert figures["mode"] == "cpu dry run" and list(figures["stages"]) == ["04", "05", "07", "10"]
    assert all(stage["passed"] for stage in figures["stages"].values())
    notebooks = figures["notebooks"]
    assert list(notebooks) == ["04", "05", "07", "10"] and all(n["updates_per_s"] > 0 for n in notebooks.values())
    assert notebooks["04"]["steps"] > 0 and "eval_mlm_loss" in notebooks["04"]["held_out"]
    assert notebooks["05"]["grid_minutes"] > 0
    assert notebooks["07"]["paper_steps"] == 6_315 and notebooks["10"]["paper_minutes"] > 0
    assert "notebook 10: bert-base fine-tuning" in run.stdout
