"""ELECTRA's replaced token detection: the discriminator's labels (a sampled original is original; special
tokens and padding never scored), the embeddings the generator shares, no gradient through the sample, a
loss that falls under the Trainer, checkpoints that resume, a discriminator that transformers reads as a
plain BERT, the FLOPs count, and the comparison grid end to end through its command."""
import json
import math
import os

import pytest
import torch

from minibert import BertConfig, BertModel
from minibert.cli import main
from minibert.experiments.electra import (
    ElectraSetup,
    against_mlm,
    electra_grid,
    encoder_flops,
    summary,
    table,
    training_flops_per_token,
)
from minibert.heads import IGNORE_INDEX
from minibert.pretraining import electra as electra_module
from minibert.pretraining.electra import (
    ElectraData,
    ElectraForPreTraining,
    electra_metrics,
    generator_config,
    sample_tokens,
)
from minibert.training import TrainConfig, Trainer
from minibert.training.checkpoint import find_checkpoints, load_checkpoint

TEXT = ["the cat sat on the mat and looked at the dog", "a dog ran in the park after the red ball",
        "she read the book by the window in the rain", "the sun rose over the hills and the birds sang"]


def small_config(vocab_size=30522, hidden=64):
    return BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=4 * hidden, max_position_embeddings=32, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)


@pytest.fixture
def model(tokenizer):
    torch.manual_seed(0)
    return ElectraForPreTraining(small_config(tokenizer.vocab_size))


@pytest.fixture
def data(tokenizer):
    examples = [{"input_ids": ids, "token_type_ids": [0] * len(ids)} for ids in tokenizer(TEXT * 8)["input_ids"]]
    return ElectraData.from_tokenizer(examples, tokenizer)


def test_the_generator_is_a_quarter_wide_and_shares_the_embeddings(model):
    generator = model.generator
    assert generator.config.hidden_size == 16 and generator.config.num_attention_heads == 1
    assert generator.config.num_hidden_layers == 2 and generator.config.embedding_dim == 64   # the shared tables' width
    assert generator.bert.embeddings is model.bert.embeddings
    assert generator.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    ids = {id(p) for p in model.parameters()}
    assert len(ids) == len(list(model.parameters()))  # each shared table once, for the optimizer and the count
    assert model.num_parameters() < model.bert.num_parameters() + generator.num_parameters()
    assert generator_config(small_config(hidden=256)).num_attention_heads == 1  # heads of 64 dimensions
    assert generator_config(small_config(hidden=768), 1 / 3).hidden_size == 256
    with pytest.raises(ValueError, match="generator's fraction"):
        generator_config(small_config(), 0)


def test_a_sampled_original_is_original_and_special_tokens_and_padding_are_never_scored(model, data, tokenizer,
                                                                                        monkeypatch):
    batch = data.collate([data[0], data[1], {"input_ids": data[2]["input_ids"][:5], "token_type_ids": [0] * 5}])
    labels = batch["labels"]
    masked = labels != IGNORE_INDEX
    assert masked.sum() >= 3 and not (masked & ~batch["replaceable"]).any()
    original = torch.where(masked, labels, batch["input_ids"])
    specials = torch.isin(original, torch.tensor(tokenizer.all_special_ids))
    assert torch.equal(batch["replaceable"], ~specials & batch["attention_mask"].bool())
    # The generator "samples" the original at the first blank and the same other token at every other one.
    other = tokenizer.convert_tokens_to_ids("zebra")
    samples = torch.full((int(masked.sum()),), other)
    samples[0] = original[masked][0]
    monkeypatch.setattr(electra_module, "sample_tokens", lambda logits: samples)
    out = model(**batch)
    assert torch.equal(out.corrupted_ids[masked], samples)                     # the samples go into the blanks ...
    assert torch.equal(out.corrupted_ids[~masked], original[~masked])          # ... of the original text
    assert not (out.corrupted_ids == tokenizer.mask_token_id).any()            # the discriminator never sees [MASK]
    expected = ((out.corrupted_ids != original).long()).masked_fill(~batch["replaceable"], IGNORE_INDEX)
    assert torch.equal(out.rtd_labels, expected)
    first = masked.flatten().nonzero()[0].item()
    assert out.rtd_labels.flatten()[first] == 0                                # a sampled original counts as original
    assert out.rtd_labels[masked].tolist().count(1) == int(masked.sum()) - 1 - int((original[masked] == other).sum())
    assert (out.rtd_labels[specials | ~batch["attention_mask"].bool()] == IGNORE_INDEX).all()
    assert (out.rtd_labels[2, 5:] == IGNORE_INDEX).all()                      # the short row's padding
    metrics = electra_metrics(out, batch)
    assert 0 <= metrics["rtd_accuracy"] <= 1 and 0 < metrics["replaced_share"] < 1 and metrics["mlm_loss"] > 0


def test_the_loss_is_the_generators_plus_fifty_times_the_discriminators_and_no_gradient_crosses_the_sample(model, data):
    batch = data.collate([data[i] for i in range(6)])
    out = model(**batch)
    assert torch.isfinite(out.loss) and out.loss.item() == pytest.approx(out.mlm_loss.item() + 50 * out.rtd_loss.item())
    same = model(**batch, masked_only=True)  # the generator's decoder at the blanks only: another draw, same blanks
    assert same.logits is None and same.masked_logits.shape == (int((batch["labels"] != IGNORE_INDEX).sum()), 30522)
    out.rtd_loss.backward()
    generator_layers = [p.grad for p in model.generator.bert.encoder.parameters()]
    assert all(g is None or not g.any() for g in generator_layers)           # the sample stops the discriminator's loss
    assert model.bert.embeddings.word_embeddings.weight.grad.any()           # the shared tables learn from it


def test_gumbel_max_samples_follow_the_softmax():
    torch.manual_seed(0)
    logits = torch.tensor([[0.0, 1.0, 2.0]]).log_softmax(-1).expand(30000, 3)
    counts = torch.bincount(sample_tokens(logits), minlength=3) / 30000
    torch.testing.assert_close(counts, torch.tensor([0.0, 1.0, 2.0]).softmax(-1), atol=0.01, rtol=0)


def test_the_trainer_trains_it_the_loss_falls_and_a_checkpoint_resumes(model, data, tmp_path):
    torch.set_num_threads(1)
    config = TrainConfig(max_steps=40, batch_size=8, lr=2e-3, device="cpu", progress=False, out_dir=str(tmp_path),
                         log_every=5, seed=0)
    trainer = Trainer(model, config, data, data, collate_fn=data.collate, metrics_fn=electra_metrics,
                      model_kwargs={"masked_only": True}, eval_model_kwargs={"masked_only": True})
    history = trainer.fit()
    losses = history.series("loss")[1]
    assert all(map(lambda x: x == x, losses)) and losses[-1] < 0.7 * losses[0]
    assert {"eval_rtd_accuracy", "eval_mlm_accuracy", "eval_replaced_share"} <= set(history.records[-1])
    torch.manual_seed(1)
    again = ElectraForPreTraining(small_config())
    fresh = Trainer(again, config, data, collate_fn=data.collate)
    load_checkpoint(find_checkpoints(tmp_path)[-1], again, fresh.optimizer, fresh.scaler, fresh.device, 0, 0)
    for (name, ours), theirs in zip(model.state_dict().items(), again.state_dict().values()):
        assert torch.equal(ours, theirs), name
    assert again.generator.bert.embeddings is again.bert.embeddings          # still one set of tables


def test_the_discriminator_learns_below_its_base_rate_when_replacements_are_easy(model, data, monkeypatch):
    """A sanity check of the discriminator's path: tokens drawn at random from 30,522 pieces, in text made of 40
    words, give themselves away, and the held-out loss must fall well below the base rate's (the entropy of the
    replaced share), the plateau the course-sized comparison never leaves with a generator's samples."""
    torch.set_num_threads(1)
    monkeypatch.setattr(electra_module, "sample_tokens", lambda logits: torch.randint(1000, 30000, logits.shape[:1]))
    config = TrainConfig(max_steps=60, batch_size=8, lr=2e-3, device="cpu", progress=False, seed=0)
    trainer = Trainer(model, config, data, data, collate_fn=data.collate, metrics_fn=electra_metrics,
                      model_kwargs={"masked_only": True}, eval_model_kwargs={"masked_only": True})
    trainer.fit()
    held_out = trainer.evaluate()
    share = held_out["eval_replaced_share"]
    base_rate = -(share * math.log(share) + (1 - share) * math.log(1 - share))
    assert held_out["eval_rtd_loss"] < 0.5 * base_rate and held_out["eval_rtd_accuracy"] > 1 - share / 2


def test_the_discriminator_saves_as_a_plain_bert_that_transformers_reads(model, tmp_path):
    transformers = pytest.importorskip("transformers")
    folder = model.save_discriminator(tmp_path / "discriminator")
    assert json.loads((folder / "config.json").read_text())["model_type"] == "bert"
    ids = torch.randint(1000, 30000, (2, 12))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    ours = BertModel.from_pretrained(folder)
    theirs = transformers.BertModel.from_pretrained(folder, add_pooling_layer=False).eval()
    with torch.no_grad():
        expected = model.bert.eval()(ids, mask).last_hidden_state
        torch.testing.assert_close(ours(ids, mask).last_hidden_state, expected, atol=1e-6, rtol=0)
        torch.testing.assert_close(theirs(ids, attention_mask=mask).last_hidden_state[mask.bool()], expected[mask.bool()],
                                   atol=1e-5, rtol=0)


def test_the_flops_count_every_weight_matrix_twice_and_electra_adds_its_generator():
    config = small_config(vocab_size=1000, hidden=128)
    encoder = BertModel(config, add_pooling_layer=False).encoder
    matrices = sum(m.weight.numel() for m in encoder.modules() if isinstance(m, torch.nn.Linear))
    assert encoder_flops(config, 16) == 2 * matrices + 2 * 4 * 16 * 128   # QKᵀ and AV: 2·T·H each, per layer
    mlm, electra = (training_flops_per_token(o, config, 16, 0.15) for o in ("mlm", "electra"))
    generator = generator_config(config)
    extra = 3 * (encoder_flops(generator, 16) + 2 * 128 * 128 + 2 * 128 + 0.15 * 2 * 32 * 128 - 0.15 * 2 * 128 * 128)
    assert electra - mlm == pytest.approx(extra)
    assert 1 < electra / mlm < 1.5


def test_summaries_and_the_difference_from_the_masked_lm():
    runs = [{"arm": arm, "seed": seed, "pos_accuracy": value, "steps": steps, "train_flops": 1e12, "cpu_seconds": 1.0,
             "fill_in_the_blank_accuracy": 0.1, "train_seconds": 1.0}
            for arm, steps, values in (("mlm", 10, (0.70, 0.72)), ("electra", 9, (0.75, 0.77)))
            for seed, value in enumerate(values)]
    assert summary(runs)["electra"]["pos_accuracy"][0] == pytest.approx(0.76)
    difference, error = against_mlm(runs)["electra"]
    assert difference == pytest.approx(0.05) and error == pytest.approx(0.01414, abs=1e-4)
    assert "more than two standard errors" in table(runs) and "| electra | 9 |" in table(runs)
    with pytest.raises(ValueError, match="unknown arm"):
        electra_grid(("mlm", "gan"))
    with pytest.raises(ValueError, match="curve_points"):
        ElectraSetup(curve_points=2)


@pytest.mark.skipif(not os.environ.get("MINIBERT_DATA_MIRROR") and not os.environ.get("CI"),
                    reason="needs the data mirror (MINIBERT_DATA_MIRROR)")
def test_the_command_runs_a_small_grid_and_goes_on_from_its_file(tmp_path, capsys):
    torch.set_num_threads(1)
    out = tmp_path / "electra.json"
    flags = ["experiment", "electra", "--out", str(out), "--vocab-size", "800", "--steps", "30", "--eval-examples", "16",
             "--max-seq-len", "32", "--batch-size", "8", "--probe-sentences", "40", "--sst2-train-sentences", "60",
             "--timing-steps", "20", "--seeds", "0", "1"]
    assert main(flags) == 0
    stored = json.loads(out.read_text())
    assert stored["command"].startswith("minibert experiment electra --out")
    references, runs = stored["references"], stored["runs"]
    assert [r["key"] for r in runs] == ["mlm#0", "mlm#1", "electra#0", "electra#1", "electra-time#0", "electra-time#1"]
    assert references["electra_flops_per_token"] > references["mlm_flops_per_token"]
    steps = {r["arm"]: r["steps"] for r in runs}
    assert steps["mlm"] == 30 and steps["electra"] == round(30 * references["mlm_flops_per_token"]
                                                             / references["electra_flops_per_token"])
    assert steps["electra-time"] == round(30 * references["mlm_cpu_s_per_step"] / references["electra_cpu_s_per_step"])
    for r in runs:
        assert all(0 <= r[k] <= 1 for k in ("pos_accuracy", "sst2_accuracy", "fill_in_the_blank_accuracy"))
        assert ("rtd_accuracy" in r) == ("rtd_base_rate_loss" in r) == (r["objective"] == "electra")
        if r["objective"] == "electra":  # the base rate's loss is the entropy of the replaced share
            p = r["replaced_share"]
            assert r["rtd_base_rate_loss"] == pytest.approx(-(p * math.log(p) + (1 - p) * math.log(1 - p)))
    assert "electra − mlm, pos_accuracy" in capsys.readouterr().out
    assert main(flags) == 0 and json.loads(out.read_text())["runs"] == runs  # read back, not run again
