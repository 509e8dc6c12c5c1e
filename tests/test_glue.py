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


def test_the_glue_table_reads_its_sizes_from_the_data_and_its_average_from_the_paper(tmp_path):
    """The table's figures were typed from two papers; what can be checked against something else is:
    the sizes, by loading the offline data (MRPC, STS-B, RTE, SST-2, CoNLL-2003), and the paper's
    figures, by Table 1's own average (of nine numbers: MNLI counts twice, matched and mismatched)."""
    from minibert.experiments.glue_benchmark import BY_KEY, GLUE, MNLI_MISMATCHED, TABLE1_AVERAGE, glue_table
    from minibert.tasks.ner import load_ner
    from minibert.tasks.pairs import load_pairs
    from minibert.tasks.sst2 import load_sst2

    with fresh_data_dir(tmp_path, "mrpc/msr_paraphrase_train.txt"):
        for task in ("mrpc", "stsb"):
            assert (BY_KEY[task].train, BY_KEY[task].test) == (len(load_pairs(task, "train")), len(load_pairs(task, "test")))
        assert BY_KEY["rte"].train == len(load_pairs("rte", "train"))
        assert BY_KEY["sst2"].train == len(load_sst2("train")) and BY_KEY["sst2"].test == 1_821
        assert (BY_KEY["ner"].train, BY_KEY["ner"].test) == (len(load_ner("conll2003", "train")),
                                                             len(load_ner("conll2003", "test")))
    for model in ("bert_base", "bert_large"):
        name = "BERT-base" if model == "bert_base" else "BERT-large"
        nine = [getattr(t, model) for t in GLUE if getattr(t, model) is not None] + [MNLI_MISMATCHED[name]]
        assert len(nine) == 9 and round(sum(nine) / 9, 1) == TABLE1_AVERAGE[name], name
    assert [t.name for t in GLUE if t.bert_base is None] == ["WNLI"], "the paper left out WNLI, and only WNLI"

    ours = [{"task": "mrpc", "metric": "f1", "ours": 83.8, "split": "GLUE MRPC test: 1,725 pairs"},
            {"task": "rte", "metric": "accuracy", "ours": 54.9, "split": "GLUE RTE dev: 277 pairs"},
            {"task": "qnli", "metric": "accuracy", "ours": None, "why_not": "no train set"}]
    rows = {r["task"]: r for r in glue_table(ours)}
    assert (rows["MRPC"]["ours"], rows["MRPC"]["ours_on"], rows["RTE"]["ours_on"]) == (83.8, "test", "dev")
    assert rows["QNLI"]["ours"] is None and rows["CoLA"]["metric"] == "Matthews correlation"
    with pytest.raises(ValueError, match="scores mrpc by 'accuracy'.*re-run"):
        glue_table([{**ours[0], "metric": "accuracy"}])
