"""The masking-ablation experiment (notebook 05) and the linear probes it measures with."""
import json
import math

import pytest
import torch

from minibert import BertConfig, BertForMaskedLM, BertForPreTraining, BertModel
from minibert.analysis.probing import (
    LinearProbe,
    hidden_word_features,
    majority_accuracy,
    neighbour_accuracy,
    tagging_probe,
    word_features,
)
from minibert.experiments.masking import (
    PAPER_TABLE8,
    STRATEGIES,
    AblationSetup,
    MaskingAblation,
    Run,
    difference_and_error,
    load_results,
    masking_grid,
    summarize,
    table,
)
from minibert.pretraining import pretraining_metrics


def small_model(tokenizer, **overrides):
    torch.manual_seed(0)
    config = dict(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=64, max_position_embeddings=64)
    return BertModel(BertConfig(**{**config, **overrides}))


# --- the grid -------------------------------------------------------------------------------------

def test_grid_is_table8_at_15_percent_plus_the_other_rates():
    runs = masking_grid(seeds=(0, 1))
    assert len(runs) == (6 + 2) * 2 and len({r.key for r in runs}) == len(runs)
    assert {r.strategy for r in runs if r.rate == 0.15} == set(STRATEGIES) == set(PAPER_TABLE8)
    assert {r.rate for r in runs if r.strategy == "80/10/10"} == {0.15, 0.3, 0.45}
    assert all(r.strategy == "80/10/10" for r in runs if r.rate != 0.15)
    assert all(abs(sum(split) - 1) < 1e-9 for split in STRATEGIES.values())


def test_unknown_strategy_and_preset_are_refused():
    with pytest.raises(ValueError, match="80/10/10"):
        masking_grid(strategies=("70/20/10",))
    with pytest.raises(ValueError, match="bert-tiny"):
        AblationSetup(preset="bert-huge")


def test_summary_and_table_use_the_sample_spread_over_seeds():
    runs = [{"strategy": "80/10/10", "rate": 0.15, "seed": s, "mlm_loss": v, "mlm_accuracy": 0.1,
             "probe_accuracy": 0.5} for s, v in enumerate([1.0, 2.0, 4.0])]
    mean, sd, n = summarize(runs, "mlm_loss")[("80/10/10", 0.15)]
    assert (mean, n) == (7 / 3, 3) and math.isclose(sd, math.sqrt(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / 2))
    row = table(runs).splitlines()[2]
    assert row.startswith("| 80/10/10 | 15% | 84.2 | 95.4 | 94.9 | 2.333 ± 1.528 |")


def test_difference_and_error_by_hand():
    d, se = difference_and_error([1.0, 3.0], [0.0, 0.0, 3.0])
    assert math.isclose(d, 1.0) and math.isclose(se, math.sqrt(2.0 / 2 + 3.0 / 3))


# --- probes --------------------------------------------------------------------------------------

def test_linear_probe_separates_separable_data_and_not_noise():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(600, 8, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 3] > 0).long()
    probe = LinearProbe(8, 2).fit(x[:400], y[:400])
    assert probe.accuracy(x[400:], y[400:]) > 0.95
    noise = torch.randint(0, 2, (600,), generator=g)
    assert probe.fit(x[:400], noise[:400]).accuracy(x[400:], noise[400:]) < 0.65


def test_word_features_are_the_first_piece_of_each_word(tokenizer):
    model = small_model(tokenizer).eval()
    sentences = [["the", "unbelievably", "cat"], ["playing", "tokenization", "is", "fun"]]
    features, kept = word_features(model, tokenizer, sentences, layers=(-1, 0))
    assert kept.all() and features.shape == (7, 64)
    enc = tokenizer(sentences[1], is_split_into_words=True, return_tensors="pt")
    states = model(**enc, output_hidden_states=True).hidden_states
    firsts = [enc.word_ids(0).index(w) for w in range(4)]
    expected = torch.cat([states[-1][0, firsts], states[0][0, firsts]], dim=-1)
    torch.testing.assert_close(features[3:], expected, atol=1e-5, rtol=1e-5)


def test_words_beyond_the_model_length_are_dropped_and_reported(tokenizer):
    model = small_model(tokenizer, max_position_embeddings=8)
    features, kept = word_features(model, tokenizer, [["word"] * 10])
    assert kept.tolist() == [True] * 6 + [False] * 4 and len(features) == 6  # [CLS] + 6 words + [SEP] = 8


def test_majority_baseline_by_hand():
    train = [[("the", "DET"), ("run", "NOUN")], [("run", "VERB"), ("run", "VERB"), ("dogs", "NOUN")]]
    test = [[("The", "DET"), ("run", "VERB"), ("cats", "NOUN"), ("run", "NOUN")]]
    # the -> DET, run -> VERB (2 of 3), unseen "cats" -> the most frequent tag overall (NOUN and VERB tie at 2:
    # Counter keeps first-seen order, so NOUN)
    assert majority_accuracy(train, test) == 3 / 4


def test_tagging_probe_reads_word_identity_from_the_embeddings(tokenizer):
    words = ["dog", "cat", "run", "eat", "red", "big"]
    tags = {"dog": "NOUN", "cat": "NOUN", "run": "VERB", "eat": "VERB", "red": "ADJ", "big": "ADJ"}
    g = torch.Generator().manual_seed(0)
    sentences = [[(w, tags[w]) for w in (words[i] for i in torch.randint(6, (5,), generator=g))] for _ in range(40)]
    result = tagging_probe(small_model(tokenizer), tokenizer, sentences[:30], sentences[30:], layers=(0,))
    assert result["accuracy"] == 1.0 and result["majority_accuracy"] == 1.0


def test_the_word_identity_baseline_scores_the_words_the_probe_scores(tokenizer):
    """Words cut off by the model's length are left out of the probe, so also out of its baseline."""
    train = [[("dog", "NOUN"), ("run", "VERB")] * 2] * 10
    test = [[("dog", "NOUN"), ("run", "VERB"), ("dog", "NOUN")] + [("run", "NOUN")] * 5]  # the tail is mistagged
    result = tagging_probe(small_model(tokenizer, max_position_embeddings=5), tokenizer, train, test, layers=(0,))
    assert result["majority_accuracy"] == 1.0  # the 3 words the model reads ([CLS] + 3 + [SEP] = 5)
    assert majority_accuracy(train, test) == 3 / 8


def test_a_hidden_word_is_read_from_its_context_and_a_causal_encoder_reads_only_the_left(tokenizer):
    sentences = [["the", "dog", "barked", "at", "night"], ["a", "cat", "slept", "all", "day"]]
    changed = [["the", "dog", "barked", "at", "noon"], ["a", "cat", "slept", "all", "year"]]  # the last word only
    for is_decoder in (False, True):
        model = small_model(tokenizer, is_decoder=is_decoder, hidden_dropout_prob=0.0).eval()
        features, kept = hidden_word_features(model, tokenizer, sentences)
        assert kept.all() and features.shape == (10, 32)
        shown = ["the", "[MASK]", "barked", "at", "night"]  # word 1 hidden, by hand
        enc = tokenizer([shown], is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            state = model(**enc).last_hidden_state[0, enc.word_ids(0).index(1)]
        torch.testing.assert_close(features[1], state, atol=1e-5, rtol=1e-5)
        again, _ = hidden_word_features(model, tokenizer, changed)
        same_left = torch.allclose(features[[0, 1, 2, 3, 5, 6, 7, 8]], again[[0, 1, 2, 3, 5, 6, 7, 8]], atol=1e-5)
        assert same_left == is_decoder  # only a left-to-right encoder ignores a change to the right


def test_neighbour_baselines_by_hand():
    train = [[("i", "PRON"), ("saw", "VERB"), ("her", "PRON"), ("duck", "VERB")],
             [("i", "PRON"), ("saw", "VERB"), ("her", "DET"), ("dog", "NOUN")],
             [("i", "PRON"), ("saw", "VERB"), ("her", "DET"), ("cat", "NOUN")]]
    test = [[("i", "PRON"), ("saw", "VERB"), ("her", "PRON"), ("duck", "VERB")]]
    # left only: <s> -> PRON, i -> VERB, saw -> DET (2 of 3: wrong here), her -> NOUN (2 of 3: wrong)
    assert neighbour_accuracy(train, test, right=False) == 2 / 4
    # both sides: (saw, duck) -> PRON is right now; (her, </s>) -> NOUN still wrong
    assert neighbour_accuracy(train, test, right=True) == 3 / 4


# --- metrics -------------------------------------------------------------------------------------

def test_pretraining_metrics_split_the_loss_into_its_objectives(tokenizer):
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64)
    torch.manual_seed(0)
    ids = torch.randint(1000, 2000, (4, 12))
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    labels[0, 7] = ids[0, 7]
    batch = {"input_ids": ids, "labels": labels, "next_sentence_label": torch.tensor([0, 1, 1, 0])}
    for model in (BertForPreTraining(config).eval(), BertForMaskedLM(config).eval()):
        inputs = batch if isinstance(model, BertForPreTraining) else {k: batch[k] for k in ("input_ids", "labels")}
        outputs = model(**inputs)
        metrics = pretraining_metrics(outputs, inputs)
        total = metrics["mlm_loss"] + metrics.get("nsp_loss", 0.0)
        assert math.isclose(total, outputs.loss.item(), rel_tol=1e-5)
        assert 0 <= metrics["mlm_accuracy"] <= 1 and ("nsp_accuracy" in metrics) == ("nsp_loss" in metrics)


# --- the experiment, end to end ------------------------------------------------------------------

TINY = AblationSetup(vocab_size=600, corpus=("gutenberg/blake-poems.txt",), eval_corpus=("gutenberg/carroll-alice.txt",),
                     eval_examples=16, max_seq_len=32, steps=3, batch_size=8, probe_sentences=30, device="cpu")


def test_results_are_saved_per_run_and_a_rerun_goes_on_where_it_stopped(tmp_path, monkeypatch):
    path = tmp_path / "ablation.json"
    ablation = MaskingAblation(TINY, path, command="minibert experiment masking --out ablation.json")
    refs = ablation.references
    assert refs["unigram_loss"] < refs["untrained_mlm_loss"]  # frequencies beat a random model
    assert abs(refs["untrained_mlm_loss"] - math.log(600)) < 1.0  # an untrained model is close to uniform
    first = ablation.run([Run("80/10/10", 0.15, 0), Run("0/0/100", 0.15, 0)], progress=False)
    stored = load_results(path)
    assert [r["key"] for r in stored["runs"]] == ["80/10/10@0.15#0", "0/0/100@0.15#0"]
    assert stored["command"].startswith("minibert experiment masking") and stored["references"] == refs
    assert all(math.isfinite(r["mlm_loss"]) and 0 <= r["probe_accuracy"] <= 1 for r in first)

    def must_not_run(self, run):
        raise AssertionError(f"{run.key} was run again")
    monkeypatch.setattr(MaskingAblation, "run_one", must_not_run)
    again = MaskingAblation(TINY, path)
    assert again.run([Run("0/0/100", 0.15, 0)], progress=False) == [first[1]]
    assert json.loads(path.read_text())["runs"] == stored["runs"]


def test_the_same_seed_gives_the_same_run():
    ablation = MaskingAblation(TINY)
    a, b = (ablation.run_one(Run("80/20/0", 0.3, 1)) for _ in range(2))
    assert {k: v for k, v in a.items() if k != "train_seconds"} == {k: v for k, v in b.items() if k != "train_seconds"}


def test_a_results_file_from_another_setup_is_not_mixed_in(tmp_path):
    path = tmp_path / "ablation.json"
    MaskingAblation(TINY, path).run([Run("80/10/10", 0.15, 0)], progress=False)
    other = AblationSetup(**{**TINY.__dict__, "steps": 4})
    with pytest.raises(ValueError, match="another setup"):
        MaskingAblation(other, path)
    with pytest.raises(FileNotFoundError, match="minibert experiment masking"):
        load_results(tmp_path / "missing.json")


@pytest.mark.parametrize("content, why", [('{"a": 1}', "it has no setup, runs, references"),
                                          ("# My notes\n", "it is not JSON text"),
                                          ("[1, 2]", "it holds a JSON list")])
def test_a_grid_refuses_an_out_file_that_is_not_its_own(tmp_path, content, why):
    from minibert.experiments.grid import read_results

    path = tmp_path / "notes.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=f"not the results file of a `minibert experiment` grid \\({why}\\)"):
        read_results(path)
    assert path.read_text() == content
    path.write_text('{"setup": {}, "runs": [], "references": {}}')
    assert read_results(path)["runs"] == []


# --- the masking unit: word pieces, whole words, SpanBERT's spans ------------------------------------

def test_the_unit_runs_are_80_10_10_at_15_percent_and_keep_table8s_keys():
    runs = masking_grid(strategies=("80/10/10",), rates=(0.15,), seeds=(0, 1), units=("token", "whole-word", "span"))
    assert [r.key for r in runs] == ["80/10/10@0.15#0", "80/10/10@0.15#1", "80/10/10@0.15#0+whole-word",
                                     "80/10/10@0.15#1+whole-word", "80/10/10@0.15#0+span", "80/10/10@0.15#1+span"]
    assert masking_grid(seeds=(0,)) == masking_grid(seeds=(0,), units=("token",)), "Table 8's grid is unchanged"
    with pytest.raises(ValueError, match="unknown masking unit 'sentence'"):
        masking_grid(units=("sentence",))


def test_table8_summaries_leave_the_other_units_out_and_by_unit_compares_them():
    from minibert.experiments.masking import by_unit

    runs = [{"strategy": "80/10/10", "rate": 0.15, "seed": s, "mlm_loss": v, "unit": unit}
            for unit, values in [("token", [1.0, 2.0]), ("span", [5.0, 7.0])] for s, v in enumerate(values)]
    runs.append({"strategy": "80/10/10", "rate": 0.15, "seed": 2, "mlm_loss": 3.0})   # a file from before units
    assert summarize(runs, "mlm_loss")[("80/10/10", 0.15)][:2] == (2.0, 1.0)
    assert by_unit(runs, "mlm_loss") == {"token": (2.0, 1.0, 3), "span": (6.0, math.sqrt(2), 2)}


def test_a_unit_run_masks_whole_words_and_is_recorded(monkeypatch):
    seen = []
    real = MaskingAblation.run_one.__globals__["MLMMasking"]

    def spy(*args, **kwargs):
        seen.append(kwargs)
        return real(*args, **kwargs)
    monkeypatch.setitem(MaskingAblation.run_one.__globals__, "MLMMasking", spy)
    result = MaskingAblation(TINY).run_one(Run("80/10/10", 0.15, 0, "span"))
    assert seen == [{"spans": True}] and result["unit"] == "span" and result["key"] == "80/10/10@0.15#0+span"
