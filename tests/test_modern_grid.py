"""The 2018 → 2024 grid (`minibert.experiments.modern`): each of ModernBERT's changes taken back does what its
row says, and nothing else, and the command runs a small grid at equal CPU time and goes on from its file."""
import dataclasses
import json
import os

import pytest
import torch

from minibert.cli import main
from minibert.experiments import modern
from minibert.experiments.modern import ROWS, LearnedPositions, ModernGridSetup, Padded, PlainMLP
from minibert.modernbert import ModernBertModel
from minibert.modernbert.layers import ModernBertMLP

SETUP = ModernGridSetup(preset="bert-tiny", max_seq_len=24, local_attention=6, corpus=("wikitext2_raw/wiki.valid.raw",))
VOCAB, PAD = 50, 0


def batch(seed=0, B=3, T=20):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (B, T), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 13:], mask[2, 7:] = 0, 0
    return ids.masked_fill(mask == 0, PAD), mask


def test_a_plain_gelu_layer_has_the_geglus_parameters_and_no_gate():
    config = modern.modern_config(SETUP, VOCAB, PAD, "gelu")
    count = lambda module: sum(p.numel() for p in module.parameters())
    assert count(PlainMLP(config)) == pytest.approx(count(ModernBertMLP(config)), rel=0.01)
    model = modern.modern_model(SETUP, VOCAB, PAD, "gelu", seed=0)
    assert all(isinstance(layer.mlp, PlainMLP) for layer in model.model.layers)
    assert model.decoder.weight is model.model.embeddings.tok_embeddings.weight  # still tied after the swap


def test_padded_rows_change_the_cost_and_not_the_numbers():
    torch.manual_seed(0)
    config = modern.modern_config(SETUP, VOCAB, PAD, None)
    unpadded = ModernBertModel(config).eval()
    padded = Padded(config).eval()
    padded.load_state_dict(unpadded.state_dict())
    ids, mask = batch()
    assert padded.pack(mask).indices.numel() == mask.numel() > unpadded.pack(mask).indices.numel() == mask.sum()
    real = mask.bool()
    torch.testing.assert_close(padded(ids, mask).last_hidden_state[real], unpadded(ids, mask).last_hidden_state[real],
                               atol=1e-5, rtol=1e-5)


def test_learned_positions_replace_rope():
    torch.manual_seed(0)
    wide = dataclasses.replace(SETUP, local_attention=32)  # a window wider than the text: attention sees every word
    model = LearnedPositions(modern.modern_config(wide, VOCAB, PAD, "learned-positions")).eval()
    ids, mask = torch.randint(1, VOCAB, (1, 12)), torch.ones(1, 12, dtype=torch.long)
    swapped = ids.clone()
    swapped[0, [3, 8]] = ids[0, [8, 3]]
    out = lambda x: model(x, mask).last_hidden_state[0]
    assert not torch.allclose(out(ids)[3], out(swapped)[8], atol=1e-4)  # a word's vector depends on where it stands
    with torch.no_grad():
        model.position_embeddings.weight.zero_()  # no position vectors, and no rotation: a bag of words
    torch.testing.assert_close(out(ids)[3], out(swapped)[8], atol=1e-5, rtol=1e-5)


def test_each_row_changes_what_it_names():
    layer_types = modern.modern_config(SETUP, VOCAB, PAD, "global").layer_types
    assert set(layer_types) == {"full_attention"}
    assert "sliding_attention" in modern.modern_config(SETUP, VOCAB, PAD, None).layer_types
    with_biases = modern.modern_model(SETUP, VOCAB, PAD, "biases", seed=0)
    assert with_biases.model.layers[1].attn.Wqkv.bias is not None and with_biases.model.final_norm.bias is not None
    assert modern.modern_model(SETUP, VOCAB, PAD, None, seed=0).model.layers[1].attn.Wqkv.bias is None
    assert ROWS["modern"].mlm_probability == 0.30 and ROWS["modern/mask-15"].mlm_probability == 0.15
    assert ROWS["bert"].objective == "nsp" and ROWS["bert/no-nsp"].objective == "none"
    with pytest.raises(ValueError, match="unknown row"):
        modern.modern_grid(("bert", "modern/rope"))
    with pytest.raises(ValueError, match="budget_minutes"):
        ModernGridSetup(budget_minutes=0)


@pytest.mark.skipif(not os.environ.get("MINIBERT_DATA_MIRROR") and not os.environ.get("CI"),
                    reason="needs the data mirror (MINIBERT_DATA_MIRROR)")
def test_the_budget_sets_the_steps_so_the_command_has_no_steps_flag(tmp_path, capsys):
    """A --steps the grid would ignore (each row's steps come from its CPU budget) is refused, not shown."""
    with pytest.raises(SystemExit):
        main(["experiment", "modern", "--out", str(tmp_path / "m.json"), "--steps", "5"])
    assert "unrecognized arguments: --steps 5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["experiment", "modern", "--help"])
    shown = capsys.readouterr().out
    assert "--budget-minutes" in shown and "--steps" not in shown


def test_the_command_runs_a_small_grid_at_equal_cpu_time_and_goes_on_from_its_file(tmp_path, capsys):
    torch.set_num_threads(1)
    out = tmp_path / "modern.json"
    flags = ["experiment", "modern", "--out", str(out), "--rows", "bert", "modern", "modern/padded",
             "--seeds", "0", "--preset", "bert-tiny", "--budget-minutes", "0.05", "--vocab-size", "800",
             "--max-seq-len", "32", "--local-attention", "8", "--eval-examples", "16", "--probe-sentences", "40",
             "--corpus", "wikitext2_raw/wiki.valid.raw"]
    assert main(flags) == 0
    stored = json.loads(out.read_text())
    runs, timed = stored["runs"], stored["references"]["cpu_s_per_step"]
    assert [r["key"] for r in runs] == ["bert#0", "modern#0", "modern/padded#0"]
    for r in runs:  # the same CPU budget: each row's steps from its own timed step
        assert r["steps"] == max(10, round(0.05 * 60 / timed[r["row"]]))
        assert 0 <= r["fill_in_the_blank_accuracy"] <= 1 and 0 <= r["pos_accuracy"] <= 1
        assert r["train_flops"] > 0
    assert "| ModernBERT (2024) | 1 |" in capsys.readouterr().out
    assert main(flags) == 0 and json.loads(out.read_text())["runs"] == runs  # read back, not run again
