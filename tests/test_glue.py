"""``minibert experiment glue``: one fine-tuning run per task, read back into the paper's table.

A tiny random BERT stands in for MiniLM, for a few updates: what is tested is that each row is the
run's own score on the split the table names, that a finished run is read and not run again, and that
bad input says what to do."""
import json

import pytest
import torch
from offline import fresh_data_dir, one_torch_thread

from minibert import BertConfig, BertForSequenceClassification
from minibert.cli import main
from minibert.experiments.glue import PAPER, SPLITS, GlueSettings, experiment


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with one_torch_thread():
        yield


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory, tokenizer):
    with fresh_data_dir(tmp_path_factory.mktemp("data"), "mrpc/msr_paraphrase_train.txt"):
        folder = tmp_path_factory.mktemp("tiny")
        torch.manual_seed(0)
        config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                            num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
        BertForSequenceClassification(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        yield folder


def test_each_row_is_its_runs_score_on_the_named_split_and_a_finished_run_is_read(tiny_folder, tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "glue.json"
    settings = GlueSettings(out=str(out), runs=str(runs), model=str(tiny_folder), tasks=("mrpc", "qnli"), steps=2,
                            device="cpu")
    experiment(settings, command="minibert experiment glue ...")
    rows = {r["task"]: r for r in json.loads(out.read_text())["rows"]}
    run = json.loads((runs / "mrpc" / "results.json").read_text())
    assert rows["mrpc"]["ours"] == round(100 * run["metrics"]["f1"], 1) and rows["mrpc"]["paper"] == PAPER["mrpc"][1]
    assert rows["mrpc"]["split"].startswith("GLUE MRPC test") and SPLITS["mrpc"] == "test"
    assert rows["mrpc"]["steps"] == 2 and "--preset paper" in rows["mrpc"]["command"]
    assert rows["qnli"]["ours"] is None and "train" in rows["qnli"]["why_not"]
    stamp = (runs / "mrpc" / "results.json").stat().st_mtime_ns
    experiment(settings)
    assert (runs / "mrpc" / "results.json").stat().st_mtime_ns == stamp, "a finished run is read, not run again"


def test_reuse_takes_a_finished_run_and_bad_input_says_what_to_do(tiny_folder, tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match="no results.json there"):
        GlueSettings(out=str(tmp_path / "x.json"), runs=str(tmp_path), reuse={"sst2": str(tmp_path / "none")})
    with pytest.raises(ValueError, match="unknown task"):
        GlueSettings(out=str(tmp_path / "x.json"), runs=str(tmp_path), tasks=("mnli",))
    assert main(["experiment", "glue", "--runs", str(tmp_path), "--out", str(tmp_path / "x.json"),
                 "--reuse", "sst2"]) == 2
    assert "--reuse takes TASK=FOLDER" in capsys.readouterr().err
