"""Fine-tuning: SST-2 loading, encoding, padding and accuracy; tagging labels on first pieces and word
accuracy; the frozen-feature variants of Table 7 and the learned weighted sum of layers; and
`minibert finetune` / `minibert evaluate` end to end on tiny subsets for all three tasks."""
import json
from types import SimpleNamespace

import pytest
import torch
from offline import MINILM as MODEL
from offline import module_fixtures

from minibert import BertConfig, BertForSequenceClassification, BertForTokenClassification, BertModel
from minibert.analysis.probing import LinearProbe, WeightedLayerSum, tagging_probe, word_features
from minibert.cli import evaluate_parser, finetune_parser, main
from minibert.recipes.finetune import PRESETS, FinetuneSettings, hyperparameters
from minibert.tasks import sst2, tagging
from minibert.training import batches_by_length, pad

one_thread, data_home = module_fixtures("sst2/train.tsv")


def tiny_config(tokenizer, **overrides):
    return BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64, **overrides)


# --- SST-2 ------------------------------------------------------------------------------------------------

def test_sst2_has_glues_counts_and_labels(data_home):
    train, dev = sst2.load_sst2("train"), sst2.load_sst2("dev")
    assert (len(train), len(dev)) == (67_349, 872)
    assert sum(train["label"]) == 37_569 and sum(dev["label"]) == 444  # positives
    assert dev[0] == {"sentence": "it 's a charming and often affecting journey .", "label": 1}
    assert dev.features["label"].names == ["negative", "positive"]
    with pytest.raises(ValueError, match="no labels"):
        sst2.load_sst2("test")


def test_dataset_map_encodes_as_the_tokenizer_does(data_home, tokenizer):
    dev = sst2.load_sst2("dev").select(range(200))
    encoded = sst2.encode(dev, tokenizer, max_length=16)
    assert encoded.column_names == ["input_ids", "labels"]
    assert encoded["input_ids"][:] == tokenizer(dev["sentence"][:], truncation=True, max_length=16)["input_ids"]
    assert encoded["labels"][:] == dev["label"][:]
    assert max(map(len, encoded["input_ids"])) == 16  # long phrases are cut, short ones stay short


def test_collate_pads_each_batch_to_its_longest():
    items = [{"input_ids": [101, 7, 102], "labels": 1}, {"input_ids": [101, 7, 8, 9, 102], "labels": 0}]
    batch = sst2.collate(items, pad_token_id=0)
    assert batch["input_ids"].tolist() == [[101, 7, 102, 0, 0], [101, 7, 8, 9, 102]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert batch["labels"].tolist() == [1, 0]
    assert sst2.collate(items[:1])["input_ids"].shape == (1, 3)  # no padding to a fixed length


def test_accuracy_on_hand_made_logits():
    logits = torch.tensor([[2.0, 1.0], [0.0, 3.0], [1.0, 0.0], [0.0, 1.0]])  # predicts 0, 1, 0, 1
    labels = torch.tensor([0, 1, 1, 1])
    assert sst2.accuracy(logits, labels) == 0.75
    assert sst2.metrics(SimpleNamespace(logits=logits), {"labels": labels}) == {"accuracy": 0.75}


def test_batches_by_length_give_each_sentence_its_own_logits(tokenizer):
    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_config(tokenizer)).eval()
    sentences = ["a", "a rather long and winding sentence about nothing at all", "fine", "not good , not bad"]
    input_ids = tokenizer(sentences)["input_ids"]
    assert batches_by_length([len(ids) for ids in input_ids], 3) == [[1, 3, 0], [2]]
    logits = sst2.predict(model, input_ids, batch_size=3, progress=False)
    with torch.no_grad():
        alone = torch.cat([model(torch.tensor([ids])).logits for ids in input_ids])
    torch.testing.assert_close(logits, alone, atol=1e-5, rtol=1e-5)


def test_classify_answers_with_a_label_and_its_probability(tokenizer):
    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_config(tokenizer))
    answers = sst2.classify(model, tokenizer, ["a gem of a film", "dull"])
    assert [a["label"] in ("negative", "positive") for a in answers] == [True, True]
    assert all(0.5 <= a["probability"] <= 1 for a in answers) and model.training  # dropout was off only meanwhile


# --- tagging ----------------------------------------------------------------------------------------------

def test_tags_go_on_first_pieces_only(tokenizer):
    assert tagging.first_piece_labels([None, 0, 1, 1, 1, 2, None], [5, 7, 3]) == [-100, 5, 7, -100, -100, 3, -100]
    words = ["the", "unbelievably", "tokenization", "works"]
    enc = tokenizer([words], is_split_into_words=True)
    labels = tagging.first_piece_labels(enc.word_ids(0), [0, 1, 2, 3])
    pieces = enc.tokens(0)
    assert [piece for piece, label in zip(pieces, labels) if label != -100] == ["the", "un", "token", "works"]
    assert [label for label in labels if label != -100] == [0, 1, 2, 3]
    assert all(piece.startswith("##") or piece in ("[CLS]", "[SEP]")
               for piece, label in zip(pieces, labels) if label == -100)


def test_tag_gives_one_tag_per_word(tokenizer):
    torch.manual_seed(0)
    model = BertForTokenClassification(tiny_config(tokenizer, num_labels=len(tagging.UPOS)))
    tags = tagging.tag(model, tokenizer, [["unbelievably", "tokenization", "works"], ["yes"]])
    assert [len(t) for t in tags] == [3, 1] and all(t in tagging.UPOS for t in tags[0] + tags[1])


def test_word_accuracy_counts_words_not_pieces():
    logits = torch.zeros(2, 4, 3)
    logits[0, :, 0] = logits[1, :, 2] = 1  # sentence 0 predicts tag 0 everywhere, sentence 1 tag 2
    labels = torch.tensor([[-100, 0, -100, 1], [-100, 2, 2, -100]])  # 4 words: 3 right
    assert tagging.word_accuracy(logits, labels) == 0.75


def test_the_trainers_weighted_mean_of_batches_is_the_exact_word_accuracy():
    import datasets
    labels = [[-100, 0, -100], [-100, 1, 1, 1, 1, -100], [-100, 2, -100]]  # 1 + 4 + 1 words
    metrics = tagging.metrics_for(datasets.Dataset.from_dict({"labels": labels}))
    batches = [labels[:2], labels[2:]]
    total = 0.0
    for batch in batches:  # predict tag 1 everywhere: 4 of 6 words right
        padded = pad(batch, -100)
        logits = torch.nn.functional.one_hot(torch.ones_like(padded), 3).float()
        total += metrics(SimpleNamespace(logits=logits), {"labels": padded})["accuracy"] * len(batch)
    assert total / len(labels) == pytest.approx(4 / 6)


# --- feature-based: Table 7 -------------------------------------------------------------------------------

def test_weighted_layer_sum_is_a_softmax_mixture():
    mix = WeightedLayerSum(4)
    layers = torch.randn(5, 4, 8)  # (N, L, H)
    torch.testing.assert_close(mix(layers), layers.mean(1))  # w = 0: the plain average
    with torch.no_grad():
        mix.scalars.copy_(torch.randn(4))
        assert mix.weights.sum().item() == pytest.approx(1) and (mix.weights > 0).all()
        mix.scalars.copy_(torch.tensor([-float("inf"), 0.0, -float("inf"), -float("inf")]))  # one-hot on layer 1
        assert torch.equal(mix(layers), layers[:, 1])
        mix.gamma.fill_(2.0)
        assert torch.equal(mix(layers), 2 * layers[:, 1])


def test_the_feature_variants_have_the_expected_sizes(tokenizer):
    torch.manual_seed(0)
    model = BertModel(tiny_config(tokenizer))  # L = 3, H = 32
    states, kept = word_features(model, tokenizer, [["the", "cat", "sat"], ["unbelievably", "so"]],
                                 layers=(0, 1, 2, 3), stack=True)
    assert states.shape == (5, 4, 32) and kept.all()
    sizes = {variant: tuple(tagging.variant_features(states, variant).shape) for variant in tagging.FEATURE_VARIANTS}
    assert sizes == {"embeddings": (5, 32), "second_to_last_hidden": (5, 32), "last_hidden": (5, 32),
                     "weighted_sum_last_four_hidden": (5, 4, 32), "concat_last_four_hidden": (5, 128),
                     "weighted_sum_all_layers": (5, 3, 32)}  # all Transformer layers, not the embeddings
    torch.testing.assert_close(tagging.variant_features(states, "second_to_last_hidden"), states[:, 2])
    torch.testing.assert_close(tagging.variant_features(states, "concat_last_four_hidden"),
                               torch.cat([states[:, i] for i in range(4)], dim=-1))
    flat, _ = word_features(model, tokenizer, [["the", "cat", "sat"], ["unbelievably", "so"]], layers=(0, 1, 2, 3))
    torch.testing.assert_close(flat, states.flatten(1))  # stacking is concatenation, reshaped
    # What the classifier of each probe reads: H for a layer or a weighted sum, 4H for the concatenation.
    mixed = LinearProbe(32, len(tagging.UPOS), num_layers=3)
    assert mixed(tagging.variant_features(states, "weighted_sum_all_layers")).shape == (5, 17)
    assert not mixed.mix.gamma.requires_grad  # in front of a linear layer, a scale would dodge the L2 penalty


def test_a_weighted_sum_probe_learns_which_layer_holds_the_signal():
    g = torch.Generator().manual_seed(0)
    layers = torch.randn(400, 3, 6, generator=g)
    labels = (layers[:, 2, 0] > 0).long()  # only layer 2 knows
    probe = LinearProbe(6, 2, num_layers=3).fit(layers[:300], labels[:300], max_iter=50)
    assert probe.accuracy(layers[300:], labels[300:]) > 0.9
    assert probe.mix.weights.argmax().item() == 2 and probe.mix.weights.sum().item() == pytest.approx(1)


def test_tagging_probe_can_weigh_the_layers_it_reads(tokenizer):
    torch.manual_seed(0)
    model = BertModel(tiny_config(tokenizer))
    train = [[("the", "DET"), ("cat", "NOUN"), ("sat", "VERB")], [("a", "DET"), ("dog", "NOUN"), ("ran", "VERB")]] * 4
    result = tagging_probe(model, tokenizer, train, train[:2], layers=(1, 2, 3), combine="weighted_sum")
    assert result["accuracy"] == 1.0 and len(result["layer_weights"]) == 3
    assert sum(result["layer_weights"]) == pytest.approx(1)
    with pytest.raises(ValueError, match="weighted_sum"):
        tagging_probe(model, tokenizer, train, train, combine="mean")


# --- presets and flags ------------------------------------------------------------------------------------

def test_the_paper_preset_is_the_papers_recommendation():
    for s in PRESETS["paper"].values():
        assert 2e-5 <= s.lr <= 5e-5 and s.batch_size in (16, 32) and 2 <= s.epochs <= 4 and s.warmup_ratio == 0.1
        assert s.max_steps is None and s.time_budget_s is None
    assert PRESETS["paper"]["squad"].max_length == 384
    assert all(s.time_budget_s and s.max_length <= 256 for s in PRESETS["cpu"].values())


def test_flags_override_the_preset():
    args = finetune_parser().parse_args(["sst2", "--model", "m", "--out", "o", "--lr", "3e-5", "--epochs", "2"])
    settings = FinetuneSettings(**vars(args))
    preset, s = hyperparameters(settings, "cpu")
    assert preset == "cpu" and s.lr == 3e-5 and s.epochs == 2 and s.max_steps is None  # epochs replace cpu's steps
    assert s.batch_size == PRESETS["cpu"]["sst2"].batch_size
    assert hyperparameters(settings, "cuda")[0] == "paper"


@pytest.mark.parametrize("make_parser", [finetune_parser, evaluate_parser])
def test_every_flag_is_documented(make_parser):
    undocumented = [a.dest for a in make_parser()._actions if not a.help]
    assert not undocumented, f"flags without help: {undocumented}"


# --- minibert finetune / evaluate end to end --------------------------------------------------------------

def finetune(task, out, *flags):
    return main(["finetune", task, "--model", MODEL, "--out", str(out), "--batch-size", "4", "--steps", "3",
                 "--train-examples", "16", "--eval-examples", "16", *flags])


def evaluated(out, task, capsys):
    capsys.readouterr()
    assert main(["evaluate", task, "--model", str(out)]) == 0
    return capsys.readouterr().out


def test_sst2_stops_on_its_time_budget_resumes_and_reloads_with_the_same_accuracy(data_home, tokenizer, tmp_path,
                                                                                  capsys):
    out = tmp_path / "sst2"
    assert finetune("sst2", out, "--time-budget", "1e-9") == 0  # out of time after the first step
    first = json.loads((out / "results.json").read_text())
    assert first["steps"] == 1 and first["stopped_by_time_budget"]
    assert "--resume goes on" in capsys.readouterr().out
    assert finetune("sst2", out, "--resume", "--eval-every", "3") == 0
    results = json.loads((out / "results.json").read_text())
    assert results["steps"] == 3 and not results["stopped_by_time_budget"]
    assert results["data"]["eval"] == "SST-2 dev (GLUE): 16 of 872 phrases"
    assert results["settings"]["max_length"] == 64 and results["device"] == "cpu"
    accuracy = results["metrics"]["accuracy"]
    assert accuracy == pytest.approx(results["history"][-1]["eval_accuracy"])  # the Trainer saw the same number
    assert f"sst2: accuracy {accuracy:.4f} on SST-2 dev" in capsys.readouterr().out
    assert len(json.loads((out / "predictions.json").read_text())) == 16
    assert f"sst2: accuracy {accuracy:.4f}" in evaluated(out, "sst2", capsys)
    assert BertForSequenceClassification.from_pretrained(out).config.num_labels == 2


@pytest.mark.parametrize("task", ["sst2", "squad"])
def test_unpadded_fine_tuning_runs_the_encoder_on_the_real_tokens_of_every_batch(task, data_home, tokenizer, tmp_path,
                                                                                 monkeypatch):
    """``--unpadded``: every training and evaluation batch reaches the encoder with its real tokens found on the
    host (tests/test_bert_unpadded.py shows the task models give the padded results so)."""
    seen = []
    forward = BertModel.forward

    def spy(self, input_ids, attention_mask=None, *args, packed_positions=None, **kwargs):
        if self.training or packed_positions is not None:
            seen.append(None if packed_positions is None
                        else torch.equal(packed_positions, attention_mask.flatten().nonzero().flatten()))
        return forward(self, input_ids, attention_mask, *args, packed_positions=packed_positions, **kwargs)

    monkeypatch.setattr(BertModel, "forward", spy)
    out = tmp_path / task
    assert finetune(task, out, "--unpadded", "--eval-every", "3", "--max-length", "96") == 0
    results = json.loads((out / "results.json").read_text())
    assert "--unpadded" in results["command"] and results["steps"] == 3
    assert len(seen) >= 3 + 4 and all(seen)  # 3 updates, then the held-out batches of the evaluation at step 3


def test_resuming_an_interrupted_run_with_other_settings_is_refused(data_home, tokenizer, tmp_path, capsys,
                                                                   killed_after_saving):
    """Killed after its first checkpoint, the run has no results.json; its settings, written when it
    started, still hold another task, seed or data size back from its checkpoints, and a bare --resume goes on
    with them (not with the preset's defaults)."""
    out = tmp_path / "run"
    with killed_after_saving():
        assert finetune("sst2", out, "--eval-every", "1") == 130  # as after Ctrl-C
    assert not (out / "results.json").exists()
    recorded = json.loads((out / "checkpoints" / "run.json").read_text())
    assert recorded["settings"] == {"task": "sst2", "model": MODEL, "tokenizer": None, "seed": 0, "split": None,
                                    "max_length": 64, "train_examples": 16}
    capsys.readouterr()
    for flags, named in [(["--seed", "1"], "--seed 1 (the run: 0)"),
                         (["--train-examples", "32"], "--train-examples 32 (the run: 16)")]:
        assert finetune("sst2", out, "--resume", *flags) == 2
        assert named in capsys.readouterr().err
    assert main(["finetune", "sst2", "--model", MODEL, "--out", str(out), "--resume"]) == 0  # the run's own flags
    results = json.loads((out / "results.json").read_text())
    assert results["steps"] == 3 and results["settings"]["batch_size"] == 4 and results["data"]["eval"].startswith(
        "SST-2 dev (GLUE): 16 of 872")


def test_pos_fine_tunes_and_compares_with_frozen_features(data_home, tokenizer, tmp_path, capsys):
    out = tmp_path / "pos"
    assert finetune("pos", out, "--feature-based", "--eval-every", "3") == 0
    printed = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    accuracy = results["metrics"]["accuracy"]
    assert results["data"]["eval"] == "UD English EWT test split: 16 of 2,077 sentences"
    assert "fine-tuned on dev, evaluated on test" in printed
    assert accuracy == pytest.approx(results["history"][-1]["eval_accuracy"])
    assert set(results["feature_based"]) == {*tagging.FEATURE_VARIANTS, "majority_baseline"}
    assert all(0 < v <= 1 for v in results["feature_based"].values())
    predictions = json.loads((out / "predictions.json").read_text())
    assert sum(map(len, predictions)) == results["metrics"]["words"] and predictions[0][0] in tagging.UPOS
    assert f"pos: accuracy {accuracy:.4f}" in evaluated(out, "pos", capsys)
    assert BertForTokenClassification.from_pretrained(out).config.num_labels == 17


def test_squad_splits_the_dev_set_by_article_and_says_so(data_home, tokenizer, tmp_path, capsys):
    out = tmp_path / "squad"
    assert finetune("squad", out, "--max-length", "160") == 0
    printed = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert results["data"]["split"] == "dev by article" and len(results["data"]["eval_articles"]) == 10
    assert "not the paper's dev-set numbers" in printed and "not the paper's" in results["data"]["note"]
    metrics = results["metrics"]
    assert f"squad: exact_match {metrics['exact_match']:.2f}, f1 {metrics['f1']:.2f}" in printed
    assert len(json.loads((out / "predictions.json").read_text())) == 16
    assert f"exact_match {metrics['exact_match']:.2f}, f1 {metrics['f1']:.2f}" in evaluated(out, "squad", capsys)

    # Shipping it in int8: a quarter of the size, scored again on the same held-out questions.
    assert main(["export", str(out), "--out", str(tmp_path / "int8"), "--dtype", "int8"]) == 0
    shipped = tmp_path / "int8"
    assert (shipped / "model.int8.safetensors").stat().st_size < 0.3 * (out / "model.safetensors").stat().st_size
    again = json.loads((shipped / "held_out.json").read_text())
    card = (shipped / "README.md").read_text()
    assert f"| fine-tuned (fp32) | {metrics['exact_match']:.2f} | {metrics['f1']:.2f} |" in card
    assert f"| exported (int8), loaded back | {again['exact_match']:.2f} | {again['f1']:.2f} |" in card
    assert "minibert finetune squad" in card and "not the paper's" in card
    assert f"exact_match {again['exact_match']:.2f}, f1 {again['f1']:.2f}" in evaluated(shipped, "squad", capsys)


def test_bad_input_is_a_one_line_error(data_home, tmp_path, capsys, monkeypatch):
    assert main(["finetune", "mnli", "--model", MODEL, "--out", str(tmp_path / "a")]) == 2
    assert capsys.readouterr().err.strip() == ("error: unknown task 'mnli'; choose one of sst2, squad, pos, mrpc, "
                                               "stsb, rte, qnli, snli, ner, wnut17")
    assert main(["finetune", "sst2", "--model", "no-such-user/no-such-bert", "--out", str(tmp_path / "b")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and "no-such-user/no-such-bert" in error and error.count("\n") == 1
    assert main(["finetune", "sst2", "--model", MODEL, "--out", str(tmp_path / "c"), "--feature-based"]) == 2
    assert "use it with pos" in capsys.readouterr().err
    assert main(["evaluate", "sst2", "--model", str(tmp_path / "nothing")]) == 2
    assert "not a checkpoint directory" in capsys.readouterr().err
    assert main(["evaluate", "sst2", "--model", MODEL]) == 2  # pre-trained only: no classifier to score
    assert "has no sst2 head (classifier." in capsys.readouterr().err
    monkeypatch.setenv("MINIBERT_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("MINIBERT_DATA_MIRROR", str(tmp_path / "no-mirror"))
    assert main(["finetune", "sst2", "--model", MODEL, "--out", str(tmp_path / "d")]) == 2
    assert "has no sst2/train.tsv" in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--epochs", "inf"], "epochs must be a positive, finite number, got inf"),
    (["--epochs", "nan"], "epochs must be a positive, finite number, got nan"),
    (["--lr", "inf"], "lr must be a positive, finite number, got inf"),
    (["--time-budget", "-5"], "time-budget must be a positive, finite number, got -5.0"),
    (["--batch-size", "0"], "batch-size must be a positive integer, got 0"),
])
def test_numbers_that_cannot_train_are_refused_before_anything_is_written(flags, message, tmp_path, capsys):
    """`--epochs inf` ended in a traceback and `--epochs nan` was trained and recorded as NaN in results.json."""
    assert main(["finetune", "sst2", "--model", MODEL, "--out", str(tmp_path / "run"), *flags]) == 2
    assert capsys.readouterr().err.strip() == f"error: {message}" and not (tmp_path / "run").exists()


def test_settings_from_python_say_which_value_is_wrong_and_a_length_beyond_the_positions_is_refused(
        data_home, tokenizer, tmp_path, capsys):
    from minibert.recipes import FinetuneSettings
    with pytest.raises(ValueError, match="lr must be a positive, finite number, got 'fast'"):
        FinetuneSettings(task="sst2", model=MODEL, out=str(tmp_path / "a"), lr="fast")
    with pytest.raises(ValueError, match="max-length must be a positive integer, got '64'"):
        FinetuneSettings(task="sst2", model=MODEL, out=str(tmp_path / "a"), max_length="64")
    with pytest.raises(ValueError, match="seed must be a whole number of 0 or more, got True"):
        FinetuneSettings(task="sst2", model=MODEL, out=str(tmp_path / "a"), seed=True)
    folder = tmp_path / "tiny"   # 64 position embeddings
    BertForSequenceClassification(tiny_config(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    assert main(["finetune", "sst2", "--model", str(folder), "--out", str(tmp_path / "b"), "--max-length", "100000"]) == 2
    assert "--max-length 100,000 is longer than" in capsys.readouterr().err and not (tmp_path / "b").exists()
    assert main(["evaluate", "sst2", "--model", str(folder), "--max-length", "65"]) == 2
    assert "it has 64 position embeddings. Give --max-length 64 or less" in capsys.readouterr().err


def test_a_kill_saves_the_fine_tuning_run_and_resume_goes_on(data_home, tokenizer, tmp_path):
    """SIGTERM (docker stop, SLURM, systemd) saves a fine-tuning run as Ctrl-C does, and --resume goes on."""
    import os
    import signal
    import subprocess
    import sys
    import time
    folder = tmp_path / "tiny"
    BertForSequenceClassification(tiny_config(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    out = tmp_path / "run"
    args = [sys.executable, "-m", "minibert.cli", "finetune", "sst2", "--model", str(folder), "--out", str(out),
            "--steps", "100000", "--batch-size", "4", "--max-length", "32", "--train-examples", "64",
            "--eval-examples", "8", "--preset", "cpu", "--time-budget", "600"]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while not (out / "checkpoints" / "run.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)  # some updates
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130 and "--resume" in err, err[-500:]
    saved = sorted((out / "checkpoints").glob("step-*"))
    assert len(saved) == 1 and 0 < int(saved[0].name[5:]) < 100000
    step = int(saved[0].name[5:])
    assert main(["finetune", "sst2", "--model", str(folder), "--out", str(out), "--steps", str(step + 2),
                 "--batch-size", "4", "--max-length", "32", "--train-examples", "64", "--eval-examples", "8",
                 "--preset", "cpu", "--time-budget", "600", "--resume"]) == 0
    assert json.loads((out / "results.json").read_text())["steps"] == step + 2
