"""Sentence pairs (MRPC, STS-B, RTE, QNLI, SNLI): the metrics by hand, the loaders against the data
manifest's counts, ``[CLS] A [SEP] B [SEP]`` encoding against transformers, and a tiny random BERT
through the registry, the recipe's data and ``minibert evaluate``."""
import math

import pytest
import torch
from offline import MINILM, module_fixtures

from minibert import BertConfig, BertForSequenceClassification, data
from minibert.cli import evaluate_parser, finetune_parser, main
from minibert.tasks import TASKS, get_task, pairs

one_thread, data_home = module_fixtures("mrpc/msr_paraphrase_train.txt")


def tiny_model(tokenizer, num_labels):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, num_labels=num_labels)
    return BertForSequenceClassification(config)


# --- metrics by hand ------------------------------------------------------------------------------------------

def test_mrpc_reports_f1_of_paraphrase_and_accuracy():
    gold = [1, 1, 1, 0, 0, 1]
    predicted = [1, 0, 1, 1, 0, 1]  # paraphrase: TP 3, FP 1, FN 1 -> P = R = 3/4; not: TP 1, FP 1, FN 1 -> 1/2
    assert pairs.classification_scores(gold, predicted, positive=1) == pytest.approx({"f1": 0.75, "accuracy": 4 / 6})
    assert pairs.classification_scores(gold, predicted, positive=0)["f1"] == pytest.approx(0.5)
    logits = torch.nn.functional.one_hot(torch.tensor(predicted), 2).float()  # (N, 2)
    assert pairs.scores("mrpc", gold, logits) == pytest.approx({"f1": 0.75, "accuracy": 4 / 6})
    assert list(pairs.scores("mrpc", gold, logits)) == ["f1", "accuracy"]  # the paper's metric first
    assert pairs.scores("rte", gold, logits) == pytest.approx({"accuracy": 4 / 6})
    # F1 = 2PR / (P + R): P = 1/2 (one of two predicted positives), R = 1/3 (one of three gold ones)
    assert pairs.classification_scores([1, 1, 1, 0], [1, 0, 0, 1], positive=1)["f1"] == pytest.approx(0.4)


def test_spearman_is_one_on_a_monotone_nonlinear_pair():
    gold = [0.0, 0.5, 1.0, 2.0, 3.5, 5.0]
    predicted = torch.tensor([math.exp(3 * g) for g in gold])[:, None]  # (N, 1): same order, far from a line
    scores = pairs.scores("stsb", gold, predicted)
    assert list(scores) == ["spearman", "pearson"] and scores["spearman"] == pytest.approx(1.0)
    assert scores["pearson"] < 0.9  # the ranks agree, the values are not linear in each other
    assert pairs.correlations(gold, [-p for p in predicted[:, 0].tolist()])["spearman"] == pytest.approx(-1.0)
    assert pairs.correlations([1, 2, 3], [2, 4, 6]) == pytest.approx({"spearman": 1.0, "pearson": 1.0})


# --- loaders on the real files --------------------------------------------------------------------------------

LABEL_COUNTS = {("mrpc", "train"): [1_194, 2_474], ("mrpc", "dev"): [129, 279], ("mrpc", "test"): [578, 1_147],
                ("rte", "train"): [1_249, 1_241], ("rte", "dev"): [146, 131], ("qnli", "dev"): [2_702, 2_761],
                ("snli", "dev"): [3_329, 3_235, 3_278], ("snli", "test"): [3_368, 3_219, 3_237]}


@pytest.mark.parametrize("task, split", [(t, s) for t, sizes in pairs.SIZES.items() for s in sizes])
def test_every_split_has_the_manifests_count(data_home, task, split):
    dataset = pairs.load_pairs(task, split)
    assert len(dataset) == pairs.SIZES[task][split]
    assert dataset.column_names == ["sentence1", "sentence2", "label"]
    labels = dataset["label"][:]
    if pairs.LABELS[task] is None:
        assert min(labels) == 0.0 and max(labels) == 5.0
    else:
        assert [labels.count(i) for i in range(len(pairs.LABELS[task]))] == LABEL_COUNTS[task, split]
        assert dataset.features["label"].names == list(pairs.LABELS[task])
    first = dataset[0]
    assert first["sentence1"] and first["sentence2"] and first["sentence1"] == first["sentence1"].strip()


def test_first_rows_are_read_from_the_right_columns(data_home):
    train = pairs.load_pairs("mrpc", "train")
    assert train[0]["sentence1"].startswith("Amrozi accused his brother") and train[0]["label"] == 1  # no BOM trouble
    assert pairs.load_pairs("mrpc", "dev")[0]["sentence1"].startswith("He said the foodservice pie business")
    dev_pairs = {(r["sentence1"], r["sentence2"]) for r in pairs.load_pairs("mrpc", "dev")}
    assert not dev_pairs & {(r["sentence1"], r["sentence2"]) for r in train}  # GLUE's dev is held out of train
    test = pairs.load_pairs("stsb", "test")  # no header: its first line is a pair, with its gold score
    assert test[0] == {"sentence1": "A girl is styling her hair.", "sentence2": "A girl is brushing her hair.",
                       "label": 2.5}
    assert pairs.load_pairs("stsb", "train")[0]["label"] == 5.0
    qnli = pairs.load_pairs("qnli", "dev")[0]
    assert qnli["sentence1"].endswith("?") and qnli["label"] == 0  # the question is A, the sentence B


def test_splits_that_are_not_here_are_clear_errors(data_home):
    with pytest.raises(ValueError, match="no 'test' split here; choose one of train, dev"):
        pairs.load_pairs("rte", "test")
    with pytest.raises(ValueError, match="unknown pair task 'mnli'"):
        pairs.load_pairs("mnli", "dev")


def test_malformed_or_short_files_name_the_file_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIBERT_DATA_DIR", str(tmp_path))
    folder = tmp_path / "rte"
    folder.mkdir()
    (folder / "train.tsv").write_text("index\tpremise\thypothesis\tlabel\n0\ta\tb\tentailment\n")
    (folder / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\tmaybe\n")
    # first line of defence: the files are not the registry's, whatever is wrong inside them
    with pytest.raises(data.ChecksumError, match=r"rte/train.tsv is damaged: .*and so are dev.tsv.*fetch rte"):
        pairs.load_pairs("rte", "train")
    # second, for a file the registry has no hash for: the reader names the line and the fix
    monkeypatch.setattr(pairs.data, "ensure", lambda name: tmp_path / name)
    with pytest.raises(ValueError, match=r"train.tsv does not start with the header .*fetch rte --force"):
        pairs.load_pairs("rte", "train")
    with pytest.raises(ValueError, match=r"dev.tsv: label 'maybe' is not one of"):
        pairs.load_pairs("rte", "dev")
    (folder / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta b\n")
    with pytest.raises(ValueError, match=r"dev.tsv, line 3: 2 tab-separated fields where 4"):
        pairs.load_pairs("rte", "dev")
    (folder / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n")
    with pytest.raises(ValueError, match=r"dev.tsv: 1 GLUE RTE dev pairs where the data manifest has 277"):
        pairs.load_pairs("rte", "dev")
    monkeypatch.setenv("MINIBERT_DATA_MIRROR", str(tmp_path / "no-mirror"))
    with pytest.raises(FileNotFoundError, match="qnli/dev.tsv"):
        pairs.load_pairs("qnli", "dev")


# --- [CLS] A [SEP] B [SEP] ------------------------------------------------------------------------------------

PAIRS = [("The cat sat on the mat.", "A cat was sitting on a mat."),
         ("Who wrote Hamlet?", "Hamlet is a tragedy written by William Shakespeare around 1600."),
         ("unbelievably tokenization", "works")]


def test_token_types_switch_right_after_the_first_sep(tokenizer):
    enc = pairs.encode_pairs(tokenizer, [a for a, _ in PAIRS], [b for _, b in PAIRS])
    for ids, types in zip(enc["input_ids"], enc["token_type_ids"]):
        first_sep = ids.index(tokenizer.sep_token_id)
        assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        assert ids.count(tokenizer.sep_token_id) == 2
        assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)


def test_truncation_trims_the_longer_text_and_keeps_both(tokenizer):
    long, short = " ".join(["word"] * 60), "a short one"
    enc = pairs.encode_pairs(tokenizer, [long, short, long], [short, long, long], max_length=24)
    for ids, types in zip(enc["input_ids"], enc["token_type_ids"]):
        assert len(ids) == 24
        a, b = types.count(0) - 2, types.count(1) - 1  # minus [CLS] and the two [SEP]s
        assert a > 0 and b > 0
    short_pieces = len(tokenizer.tokenize(short))
    first, second, both = enc["token_type_ids"]
    assert first.count(1) - 1 == short_pieces and second.count(0) - 2 == short_pieces  # the short text is whole
    assert abs((both.count(0) - 2) - (both.count(1) - 1)) <= 1  # two long texts share the room


def test_pair_encoding_equals_transformers(tokenizer):
    import transformers
    fast = transformers.BertTokenizerFast.from_pretrained(MINILM)
    first, second = [a for a, _ in PAIRS] + ["x " * 40], [b for _, b in PAIRS] + ["y " * 3]
    for max_length in (128, 12):
        ours = pairs.encode_pairs(tokenizer, first, second, max_length=max_length)
        theirs = fast(first, second, truncation="longest_first", max_length=max_length)
        assert ours["input_ids"] == theirs["input_ids"]
        assert ours["token_type_ids"] == theirs["token_type_ids"]


def test_collate_pads_token_types_with_zero_and_keeps_scores_float():
    items = [{"input_ids": [101, 7, 102, 8, 102], "token_type_ids": [0, 0, 0, 1, 1], "labels": 3.2},
             {"input_ids": [101, 7, 102], "token_type_ids": [0, 0, 1], "labels": 0.5}]
    batch = pairs.collate(items)
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 1, 1], [0, 0, 1, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert batch["labels"].dtype == torch.float32 and batch["labels"].tolist() == pytest.approx([3.2, 0.5])


# --- a tiny random BERT end to end ----------------------------------------------------------------------------

def test_mrpc_through_the_registry(data_home, tokenizer):
    task = get_task("mrpc")
    model = tiny_model(tokenizer, task.num_labels)
    data = task.build_data(tokenizer, model, max_length=48, train_examples=8, eval_examples=8, seed=0)
    assert data.description["eval"] == "GLUE MRPC dev: 8 of 408 pairs"
    assert data.description["train"] == "GLUE MRPC train: 8 of 3,668 pairs"
    batch = data.collate([data.train[i] for i in range(4)])
    assert (batch["token_type_ids"] == 1).any() and batch["labels"].dtype == torch.int64
    assert torch.isfinite(model(**batch).loss)
    predictions, metrics = data.evaluate(model, progress=False)
    assert len(predictions) == 8 and set(predictions) <= set(pairs.LABELS["mrpc"])
    assert set(metrics) == {"f1", "accuracy"} and all(0 <= v <= 1 for v in metrics.values())
    test = task.build_data(tokenizer, model, max_length=48, eval_examples=8, training=False, split="test")
    assert test.description["eval"] == "GLUE MRPC test: 8 of 1,725 pairs" and test.train is None


def test_stsb_is_a_regression_scored_by_correlation(data_home, tokenizer):
    task = get_task("stsb")
    assert task.num_labels == 1
    model = tiny_model(tokenizer, task.num_labels)
    data = task.build_data(tokenizer, model, max_length=48, train_examples=8, eval_examples=8, split="test")
    batch = data.collate([data.train[i] for i in range(4)])
    assert batch["labels"].dtype == torch.float32
    output = model(**batch)
    torch.testing.assert_close(output.loss, torch.nn.functional.mse_loss(output.logits[:, 0], batch["labels"]))
    predictions, metrics = data.evaluate(model, progress=False)
    assert len(predictions) == 8 and all(isinstance(p, float) for p in predictions)
    assert set(metrics) == {"spearman", "pearson"} and all(-1 <= v <= 1 for v in metrics.values())
    answers = pairs.classify_pairs(model, tokenizer, PAIRS[:2], "stsb")
    assert [set(a) for a in answers] == [{"score"}, {"score"}]


def test_qnli_evaluates_but_cannot_train_and_snli_trains_on_dev(data_home, tokenizer):
    model = tiny_model(tokenizer, 2)
    with pytest.raises(ValueError, match="no training split.*minibert evaluate qnli"):
        get_task("qnli").build_data(tokenizer, model, max_length=32)
    data = get_task("qnli").build_data(tokenizer, model, max_length=32, eval_examples=4, training=False)
    assert data.description["eval"] == "GLUE QNLI dev: 4 of 5,463 pairs" and "note" in data.description
    snli = get_task("snli")
    data = snli.build_data(tokenizer, tiny_model(tokenizer, 3), max_length=32, train_examples=4, eval_examples=4)
    assert data.description["train"] == "SNLI 1.0 dev: 4 of 9,842 pairs"
    assert data.description["eval"] == "SNLI 1.0 test: 4 of 9,824 pairs"
    with pytest.raises(ValueError, match="cannot also be scored on it"):
        snli.build_data(tokenizer, model, max_length=32, split="dev")
    answers = pairs.classify_pairs(tiny_model(tokenizer, 3), tokenizer, PAIRS[:1], "snli")
    assert answers[0]["label"] in pairs.LABELS["snli"] and 1 / 3 <= answers[0]["probability"] <= 1


def test_the_command_line_knows_the_tasks_and_scores_mrpc_test(data_home, tokenizer, tmp_path, capsys):
    for parser in (finetune_parser(), evaluate_parser()):
        assert all(name in parser.format_help() for name in TASKS)
    folder = tmp_path / "model"
    tiny_model(tokenizer, 2).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    assert main(["evaluate", "mrpc", "--model", str(folder), "--split", "test", "--eval-examples", "8"]) == 0
    printed = capsys.readouterr().out
    assert "mrpc: f1 " in printed and ", accuracy " in printed and "on GLUE MRPC test: 8 of 1,725 pairs" in printed
    assert main(["evaluate", "rte", "--model", str(folder), "--split", "test"]) == 2
    assert "GLUE RTE has no 'test' split here" in capsys.readouterr().err
