"""The bidirectionality experiment's pieces: a causal encoder that transformers reads alike, the
next-token labels, the no-mask objective, the Figure 3 masks, and a small grid end to end."""
import json
import os
import statistics
import sys
from pathlib import Path

import pytest
import torch

from minibert import BertConfig, BertForMaskedLM
from minibert.experiments.bidirectionality import (
    Bidirectionality,
    BidirectionalitySetup,
    NextTokenData,
    bidirectionality_grid,
    curve_summary,
    merged,
    next_token_labels,
    summary,
    table,
)
from minibert.pretraining import MLMMasking
from minibert.viz.bidirectionality import LABELS, plot_curve
from minibert.viz.diagrams import HIDDEN, ITSELF, SEEN, figure3_masks

ROOT = Path(__file__).resolve().parents[1]


def causal_config(is_decoder=True):
    return BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                      is_decoder=is_decoder, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def test_a_left_to_right_encoder_never_reads_the_future():
    torch.manual_seed(0)
    ids = torch.randint(5, 60, (2, 9))
    changed = ids.clone()
    changed[:, 6] = 4  # a token in the future of positions 0..5
    for is_decoder, same in [(True, True), (False, False)]:
        model = BertForMaskedLM(causal_config(is_decoder=is_decoder)).eval()
        a, b = model(ids).logits[:, :6], model(changed).logits[:, :6]
        assert torch.allclose(a, b, atol=1e-6) == same


def test_transformers_reads_our_left_to_right_model_as_a_causal_lm(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    ours = BertForMaskedLM(causal_config()).eval()
    ours.save_pretrained(tmp_path)
    theirs = transformers.BertLMHeadModel.from_pretrained(tmp_path).eval()
    ids = torch.randint(5, 60, (2, 9))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    with torch.no_grad():
        torch.testing.assert_close(ours(ids, attention_mask=mask).logits[mask.bool()],
                                   theirs(ids, attention_mask=mask).logits[mask.bool()], atol=1e-4, rtol=1e-4)


def test_next_token_labels_shift_left_and_skip_padding():
    ids = torch.tensor([[2, 7, 8, 3], [2, 9, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    assert next_token_labels(ids, mask).tolist() == [[7, 8, 3, -100], [9, 3, -100, -100]]


def test_no_mask_objective_labels_tokens_it_leaves_in_place(tokenizer):
    data = NextTokenData([{"input_ids": [101, 2023, 2003, 102]}], MLMMasking(tokenizer))
    assert data.collate(data.examples)["labels"].tolist() == [[2023, 2003, 102, -100]]
    same = MLMMasking(tokenizer, 0.5, (0.0, 1.0, 0.0))
    ids = torch.tensor([tokenizer.encode("the quick brown fox jumps over the lazy dog " * 4)])
    corrupted, labels = same(ids, torch.Generator().manual_seed(0))
    assert torch.equal(corrupted, ids) and (labels != -100).sum() > 5


def test_figure3_masks_are_the_papers():
    masks = figure3_masks(4)
    bert, gpt, elmo, copying = masks.values()
    assert (bert == SEEN).all()
    assert (gpt == SEEN).tolist() == [[j <= i for j in range(4)] for i in range(4)]
    assert elmo.shape == (4, 8) and ((elmo[:, 4:] == SEEN) == (gpt == SEEN).T).all()
    assert (copying.diagonal() == ITSELF).all() and (copying == HIDDEN).sum() == 0


@pytest.mark.skipif(not os.environ.get("MINIBERT_DATA_MIRROR") and not os.environ.get("CI"),
                    reason="needs the data mirror (MINIBERT_DATA_MIRROR)")
def test_a_small_grid_runs_and_measures_every_objective(tmp_path):
    torch.set_num_threads(1)
    setup = BidirectionalitySetup(vocab_size=800, steps=4, eval_examples=16, max_seq_len=32, batch_size=8,
                                  probe_sentences=40, sst2_train_sentences=60, curve_points=2)
    path = tmp_path / "bidirectionality.json"
    grid = Bidirectionality(setup, path, "a test")
    runs = grid.run(bidirectionality_grid(seeds=(0,)), progress=False)
    assert [r["objective"] for r in runs] == ["mlm", "ltr", "no-mask"]
    for r in runs:
        assert all(0 <= r[k] <= 1 for k in ("pos_accuracy", "hidden_pos_accuracy", "sst2_accuracy",
                                             "fill_in_the_blank_accuracy"))
        assert 0 < r["next_token_loss"] < 10 and 0 < r["fill_in_the_blank_loss"] < 10
        assert [point["step"] for point in r["curve"]] == [2, 4]  # a checkpoint halfway, and the end
        assert r["curve"][-1]["pos_accuracy"] == r["pos_accuracy"]
    stored = json.loads(path.read_text())
    assert stored["command"] == "a test" and len(stored["runs"]) == 3
    assert {"unigram_loss", "word_identity_pos_accuracy", "majority_sst2_accuracy", "left_neighbour_pos_accuracy",
            "neighbours_pos_accuracy"} <= set(stored["references"])
    assert set(summary(runs)) == {"mlm", "ltr", "no-mask"}
    again = Bidirectionality(setup, path).run(bidirectionality_grid(seeds=(0,)), progress=False)
    assert again == runs  # read back, not run again


@pytest.mark.skipif(not os.environ.get("MINIBERT_DATA_MIRROR") and not os.environ.get("CI"),
                    reason="needs the data mirror (MINIBERT_DATA_MIRROR)")
def test_curve_points_land_in_the_results_file_as_measured_and_change_nothing_in_training(tmp_path, monkeypatch):
    """A run measured along the way ends where the same run unmeasured ends, and each point is in the results
    file (``in_progress``) before the run finishes: what a run stopped by a time limit still shows."""
    torch.set_num_threads(1)
    kwargs = dict(vocab_size=800, steps=6, eval_examples=16, max_seq_len=32, batch_size=8, probe_sentences=20,
                  sst2_train_sentences=0)
    plain = Bidirectionality(BidirectionalitySetup(**kwargs), tmp_path / "plain.json").run(
        bidirectionality_grid(objectives=("mlm",), seeds=(1,)), progress=False)[0]

    path = tmp_path / "curve.json"
    grid = Bidirectionality(BidirectionalitySetup(**kwargs, curve_points=3), path)
    stored_along = []
    measure = grid.measure

    def measure_and_read_the_file(model):
        stored_along.append(json.loads(path.read_text()).get("in_progress"))
        return measure(model)

    monkeypatch.setattr(grid, "measure", measure_and_read_the_file)
    curved = grid.run(bidirectionality_grid(objectives=("mlm",), seeds=(1,)), progress=False)[0]
    assert [point["step"] for point in curved["curve"]] == [2, 4, 6]
    assert stored_along[0] is None  # before the first point
    assert stored_along[1] == {"key": "mlm#1", "curve": curved["curve"][:1]}
    assert stored_along[2] == {"key": "mlm#1", "curve": curved["curve"][:2]}
    assert "in_progress" not in json.loads(path.read_text())  # the run finished: it is in "runs" now
    for measure_name in ("train_loss", "fill_in_the_blank_loss", "next_token_loss", "pos_accuracy",
                         "hidden_pos_accuracy"):
        assert curved[measure_name] == plain[measure_name], measure_name


@pytest.mark.skipif(not os.environ.get("MINIBERT_DATA_MIRROR") and not os.environ.get("CI"),
                    reason="needs the data mirror (MINIBERT_DATA_MIRROR)")
def test_no_sentiment_probe_needs_no_sst2_and_no_datasets(tmp_path, monkeypatch):
    """--sst2-train-sentences 0: a machine without the `datasets` package (a bare GPU box) still runs the grid."""
    monkeypatch.setitem(sys.modules, "datasets", None)  # importing it now fails
    torch.set_num_threads(1)
    setup = BidirectionalitySetup(vocab_size=800, steps=2, eval_examples=16, max_seq_len=32, batch_size=8,
                                  probe_sentences=20, sst2_train_sentences=0)
    grid = Bidirectionality(setup, tmp_path / "bidirectionality.json")
    runs = grid.run(bidirectionality_grid(objectives=("mlm",), seeds=(0,)), progress=False)
    assert "sst2_accuracy" not in runs[0] and 0 <= runs[0]["pos_accuracy"] <= 1
    assert not {"untrained_sst2_accuracy", "majority_sst2_accuracy"} & set(grid.references)
    assert "SST-2" in table(runs) and "%" in table(runs).splitlines()[1]


def test_curve_summary_averages_seeds_at_the_steps_every_seed_has():
    def run(objective, seed, points):
        return {"objective": objective, "seed": seed, "curve": [{"step": s, "hidden_pos_accuracy": a} for s, a in points]}

    runs = [run("mlm", 0, [(10, 0.2), (20, 0.4)]), run("mlm", 1, [(10, 0.3), (20, 0.6), (30, 0.9)]),
            run("ltr", 0, [(10, 0.5)]), {"objective": "no-mask", "seed": 0}]   # a run without a curve is left out
    curves = curve_summary(runs, "hidden_pos_accuracy")
    assert set(curves) == {"mlm", "ltr"}
    (step, mean, sd, n), (step2, mean2, _, _) = curves["mlm"]   # step 30: only one seed has it
    assert (step, n, step2) == (10, 2, 20) and mean == pytest.approx(0.25) and mean2 == pytest.approx(0.5)
    assert sd == pytest.approx(statistics.stdev([0.2, 0.3]))
    assert curves["ltr"] == [(10, 0.5, 0.0, 1)]


def stored_curve():
    return json.loads((ROOT / "notebooks" / "results" / "bidirectionality_curve.json").read_text())


def one_objective(stored, objective):
    """The file a GPU call makes (benchmarks/gpu_both_sides.sh runs one objective per call)."""
    return {**stored, "runs": [r for r in stored["runs"] if r["objective"] == objective],
            "command": f"{stored['command']} ({objective})"}


def test_files_of_one_objective_each_merge_into_one_curve_and_others_are_refused():
    stored = stored_curve()
    mlm, ltr = one_objective(stored, "mlm"), one_objective(stored, "ltr")
    both = merged(mlm, ltr)
    assert sorted(r["key"] for r in both["runs"]) == sorted(r["key"] for r in stored["runs"])
    assert both["references"] == stored["references"] and both["setup"] == stored["setup"]
    assert both["command"].count("minibert experiment bidirectionality") == 2
    for measure in ("hidden_pos_accuracy", "pos_accuracy"):
        assert curve_summary(both["runs"], measure) == curve_summary(stored["runs"], measure)
    noisy = {**ltr, "references": {k: v + 0.001 for k, v in ltr["references"].items()}}  # another device's sums
    assert len(merged(mlm, noisy)["runs"]) == len(stored["runs"])
    for other, message in [({**ltr, "setup": {**ltr["setup"], "steps": 10}}, "another setup \\(steps\\)"),
                           ({**ltr, "references": {**ltr["references"], "neighbours_pos_accuracy": 0.5}},
                            "other reference levels \\(neighbours_pos_accuracy\\)"),
                           (mlm, "run mlm#0 is in more than one results file")]:
        with pytest.raises(ValueError, match=message):
            merged(mlm, other)


def test_the_curve_is_drawn_for_both_objectives_or_for_the_one_measured_so_far():
    import matplotlib
    matplotlib.use("Agg")
    stored = stored_curve()
    for runs, objectives in [(stored, {"masked LM (BERT)", "left to right (GPT)"}),
                             (one_objective(stored, "mlm"), {"masked LM (BERT)"})]:
        along = {measure: curve_summary(runs["runs"], measure) for measure in ("hidden_pos_accuracy", "pos_accuracy")}
        fig = plot_curve(along, runs["references"], title="a title")
        hidden, visible = fig.axes
        for ax, lookups in [(hidden, 3), (visible, 2)]:
            labels = ax.get_legend_handles_labels()[1]
            assert set(labels) & set(LABELS.values()) == objectives and len(labels) == len(objectives) + lookups
        steps = [point[0] for point in curve_summary(stored["runs"], "hidden_pos_accuracy")["mlm"]]
        assert list(hidden.containers[0].lines[0].get_xdata()) == steps
        assert fig._suptitle.get_text() == "a title"
        matplotlib.pyplot.close(fig)
