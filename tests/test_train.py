"""The training loop's promises: it learns, resumes bit-exactly, checkpoints atomically without pickle,
follows BERT's optimizer recipe, keeps DistributedDataParallel processes in sync, and evaluates with a
plain function of (model, data)."""
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn
from torch.utils.data import default_collate

import minibert.training.checkpoint
import minibert.training.trainer
from minibert import BertConfig, BertForMaskedLM, BertForSequenceClassification
from minibert.training import (
    History,
    TrainConfig,
    Trainer,
    evaluate,
    find_checkpoints,
    flops_per_token,
    group_by_length,
    isolated_rng,
    peak_flops,
    warmup_linear_decay,
)

VOCAB = 50
HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Models this small run fastest on one thread, and stay fast when other jobs share the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_model(dropout=0.1, model_class=BertForSequenceClassification):
    config = BertConfig.from_preset("bert-tiny", vocab_size=VOCAB, max_position_embeddings=32, hidden_size=32,
                                    num_attention_heads=2, intermediate_size=64, hidden_dropout_prob=dropout,
                                    attention_probs_dropout_prob=dropout)
    return model_class(config)


def classification_data(n, seed=0, length=8):
    """Sentences of words from one half of the vocabulary; the label says which half: learnt in a few steps."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 2, (n,), generator=g)
    half = (VOCAB - 5) // 2
    ids = 5 + labels[:, None] * half + torch.randint(0, half, (n, length), generator=g)
    ids[:, 0] = 2  # [CLS]
    return [{"input_ids": ids[i], "attention_mask": torch.ones(length, dtype=torch.long), "labels": labels[i]}
            for i in range(n)]


def accuracy(outputs, batch):
    return {"accuracy": (outputs.logits.argmax(-1) == batch["labels"]).float().mean()}


def noisy_collate(examples):
    """Corrupts tokens at random, like dynamic masking, drawing from torch's, numpy's and Python's generators."""
    batch = default_collate(examples)
    ids = batch["input_ids"].clone()
    noise = torch.rand(ids.shape) < 0.2
    noise[:, :2] = False
    ids[noise] = 4 if random.random() < 0.5 else int(np.random.randint(5, VOCAB))
    return {**batch, "input_ids": ids}


def quiet(**overrides):
    return TrainConfig(**{"progress": False, "device": "cpu", "lr": 1e-3, "batch_size": 4, **overrides})


def weights(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_loss_goes_down_and_eval_metrics_are_computed(tmp_path):
    torch.manual_seed(0)
    model = tiny_model(dropout=0.0)
    config = quiet(max_steps=30, batch_size=16, lr=3e-3, warmup_steps=5, log_every=5, eval_every=15)
    history = Trainer(model, config, classification_data(128), classification_data(64, seed=1),
                      metrics_fn=accuracy).fit()
    steps, losses = history.series("loss")
    assert steps == [5, 10, 15, 20, 25, 30]
    assert losses[-1] < 0.5 * losses[0]
    assert history.series("eval_loss")[0] == [15, 30]
    assert history.last("eval_accuracy") > 0.9 and history.last("eval_loss") < 0.4
    assert all(r["tokens_per_s"] > 0 and r["grad_norm"] > 0 for r in history.records if "loss" in r)
    assert "mfu" not in history.records[0]  # estimated on CUDA only
    history.to_json(tmp_path / "history.json")
    assert History.from_json(tmp_path / "history.json").records == history.records
    figure = history.plot()
    assert [ax.get_title() for ax in figure.axes] == ["loss", "learning rate", "eval metrics"]
    plt.close(figure)


def test_history_plots_without_matplotlib_in_the_library_import():
    """matplotlib loads when a picture is asked for, not with the training loop (a second to import)."""
    code = "import minibert.training, sys; assert 'matplotlib' not in sys.modules"
    result = subprocess.run([sys.executable, "-c", code], cwd=HERE.parent, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


def test_evaluate_is_a_plain_function_that_the_trainer_prefixes():
    """No Trainer or optimizer needed; the same masks every time; the caller's generators and mode kept."""
    torch.manual_seed(0)
    model, data = tiny_model(dropout=0.1), classification_data(10, seed=1)
    settings = dict(batch_size=4, collate_fn=noisy_collate, metrics_fn=accuracy, max_batches=2, seed=5)
    generators = torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()
    plain = evaluate(model, data, **settings)
    assert list(plain) == ["loss", "accuracy"] and evaluate(model, data, **settings) == plain
    assert model.training  # dropout off while evaluating, then the mode it had
    assert torch.equal(torch.get_rng_state(), generators[0]) and (np.random.get_state()[1] == generators[1]).all()
    assert random.getstate() == generators[2]
    trainer = Trainer(model, quiet(max_steps=1, eval_batches=2, seed=5), classification_data(8), data,
                      collate_fn=noisy_collate, metrics_fn=accuracy)
    assert trainer.evaluate() == {f"eval_{name}": value for name, value in plain.items()}

    model.eval()
    with torch.no_grad():  # batches of 4, 4 and 2, weighted by examples: the mean over all ten
        whole = model(**default_collate(data)).loss.item()
    assert evaluate(model, data, batch_size=4)["loss"] == pytest.approx(whole, rel=1e-5)
    assert not model.training


class KeywordRecorder(nn.Module):
    """A stand-in model that records its mode and the extra keyword arguments of every forward."""

    def __init__(self):
        super().__init__()
        self.classifier = nn.Linear(1, 2)
        self.calls = []

    def forward(self, input_ids, attention_mask, labels, **extra):
        self.calls.append((self.training, extra))
        logits = self.classifier(input_ids.float().mean(1, keepdim=True))  # (B, 2)
        return SimpleNamespace(loss=nn.functional.cross_entropy(logits, labels), logits=logits)


def test_model_kwargs_go_to_training_forwards_and_eval_model_kwargs_to_evaluation():
    model = KeywordRecorder()
    config = quiet(max_steps=2, grad_accum_steps=2, eval_every=2)
    Trainer(model, config, classification_data(16), classification_data(4), model_kwargs={"masked_only": True}).fit()
    assert model.calls == [(True, {"masked_only": True})] * 4 + [(False, {})]
    model = KeywordRecorder()
    Trainer(model, config, classification_data(16), classification_data(4), model_kwargs={"masked_only": True},
            eval_model_kwargs={"output_attentions": False}).fit()
    assert model.calls == [(True, {"masked_only": True})] * 4 + [(False, {"output_attentions": False})]


def test_masked_lm_trains_with_its_tied_decoder(tmp_path):
    """Pre-training's model: labels -100 except at masked positions; the tied decoder survives a checkpoint."""
    def masked(examples):
        batch = default_collate(examples)
        labels = torch.full_like(batch["input_ids"], -100)
        labels[:, 3] = batch["input_ids"][:, 3]
        return {"input_ids": batch["input_ids"].masked_fill(labels != -100, 1), "labels": labels}

    torch.manual_seed(0)
    model = tiny_model(model_class=BertForMaskedLM)
    data = [{"input_ids": torch.tensor([2, 7, 8, 9, 10, 11, 3])}] * 16  # position 3 is always word 9
    config = quiet(max_steps=20, lr=1e-2, warmup_steps=2, log_every=1, out_dir=str(tmp_path))
    history = Trainer(model, config, data, data, collate_fn=masked).fit()
    assert history.last("loss") < 0.2 * history.series("loss")[1][0]
    resumed_model = tiny_model(model_class=BertForMaskedLM)
    Trainer(resumed_model, config, data, collate_fn=masked).load_checkpoint(find_checkpoints(tmp_path)[-1])
    assert resumed_model.cls.predictions.decoder.weight is resumed_model.bert.embeddings.word_embeddings.weight
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), resumed_model.state_dict().values()))


def resume_config(out_dir, **overrides):
    return quiet(**{"max_steps": 6, "grad_accum_steps": 2, "warmup_steps": 2, "eval_every": 2, "log_every": 1,
                    "out_dir": str(out_dir), **overrides})


def run(config, resume=False, seed=0):
    """A fresh process's view: a newly built model (its initial weights drawn from torch's generator)."""
    torch.manual_seed(seed)
    model = tiny_model(dropout=0.1)
    trainer = Trainer(model, config, classification_data(20), classification_data(6, seed=1),
                      collate_fn=noisy_collate, metrics_fn=accuracy)
    return model, trainer.fit(resume=resume)


@pytest.mark.parametrize("interruption", ["time budget", "crash"])
def test_resumed_run_ends_with_the_same_weights(tmp_path, monkeypatch, interruption):
    """Dropout, accumulation, random masking in collate_fn, epochs crossed mid-run: all bit-exact."""
    straight, straight_history = run(resume_config(tmp_path / "a"))

    if interruption == "time budget":
        _, first = run(resume_config(tmp_path / "b", time_budget_s=1e-9))  # stops after one step
        assert [p.name for p in find_checkpoints(tmp_path / "b")] == ["step-000001"]
    else:
        original = Trainer._accumulate_gradients

        def crash_in_step_4(self, batches):
            if self.step == 3:
                raise RuntimeError("the kernel died")
            return original(self, batches)

        monkeypatch.setattr(Trainer, "_accumulate_gradients", crash_in_step_4)
        with pytest.raises(RuntimeError, match="kernel died"):
            run(resume_config(tmp_path / "b", save_every=3))
        monkeypatch.undo()
        assert [p.name for p in find_checkpoints(tmp_path / "b")] == ["step-000003"]

    resumed, history = run(resume_config(tmp_path / "b"), resume=True, seed=2)  # other initial weights: overwritten
    for name, tensor in straight.state_dict().items():
        assert torch.equal(tensor, resumed.state_dict()[name]), name
    assert history.series("loss") == straight_history.series("loss")
    assert history.series("eval_loss")[1][-1] == straight_history.last("eval_loss")


def test_a_run_paused_and_measured_along_the_way_trains_as_one_uninterrupted_run(tmp_path):
    """fit(until=...) pauses; measuring the model then (under isolated_rng) and fit() again changes nothing:
    the same weights, losses and evaluations as one fit(), with dropout, accumulation, random masking in
    collate_fn and epochs crossed mid-run."""
    straight, straight_history = run(resume_config(tmp_path / "straight"))

    torch.manual_seed(0)
    model = tiny_model(dropout=0.1)
    trainer = Trainer(model, resume_config(tmp_path / "paused"), classification_data(20), classification_data(6, seed=1),
                      collate_fn=noisy_collate, metrics_fn=accuracy)
    seen = []
    for step in (1, 4):
        trainer.fit(until=step)
        assert trainer.step == step and model.training
        with isolated_rng(0, trainer.device):  # a measurement that draws from every generator and trains nothing
            seen.append(evaluate(model, classification_data(6, seed=1), batch_size=3, collate_fn=noisy_collate)["loss"])
            torch.rand(3), random.random(), np.random.rand()
    history = trainer.fit()
    assert trainer.step == 6 and [p.name for p in find_checkpoints(tmp_path / "paused")][-2:] == [
        "step-000004", "step-000006"]  # a checkpoint at each pause, as at the end
    for name, tensor in straight.state_dict().items():
        assert torch.equal(tensor, model.state_dict()[name]), name
    assert history.series("loss") == straight_history.series("loss")
    assert history.series("eval_loss") == straight_history.series("eval_loss")  # evaluated where one run evaluates
    assert len(seen) == 2 and seen[0] != seen[1]
    assert trainer.fit(until=2).series("loss") == straight_history.series("loss")  # behind it: nothing to do
    with pytest.raises(ValueError, match="until must be a step number"):
        trainer.fit(until=-1)


def test_resume_skips_used_examples_without_loading_them(tmp_path):
    class CountingList(list):
        loads = 0

        def __getitem__(self, index):
            CountingList.loads += 1
            return super().__getitem__(index)

    data = CountingList(classification_data(20))
    config = quiet(max_steps=4, out_dir=str(tmp_path), time_budget_s=1e-9)
    Trainer(tiny_model(), config, data).fit()
    assert CountingList.loads == 4
    Trainer(tiny_model(), quiet(max_steps=4, out_dir=str(tmp_path)), data).fit(resume=True)
    assert CountingList.loads == 16  # 3 more steps of 4 examples, none loaded twice


def test_grouping_by_length_keeps_every_example_and_cuts_the_padding():
    rng = random.Random(0)
    lengths = [rng.randint(3, 60) for _ in range(2000)]
    shuffled = rng.sample(range(2000), 2000)
    grouped = group_by_length(shuffled, lengths, batch_size=32, seed=1)
    assert sorted(grouped) == list(range(2000))
    assert grouped == group_by_length(shuffled, lengths, batch_size=32, seed=1)  # resumable: a pure function
    assert grouped != group_by_length(shuffled, lengths, batch_size=32, seed=2)  # the batch order is drawn

    def padded_tokens(order):
        return sum(32 * max(lengths[i] for i in order[k:k + 32]) for k in range(0, 2000 - 31, 32))
    real = sum(lengths[i] for i in shuffled[:2000 // 32 * 32])
    assert padded_tokens(shuffled) > 1.7 * real and padded_tokens(grouped) < 1.1 * real
    for k in range(0, 2000 // 32 * 32, 32):  # every full batch comes from one group of 50 batches
        assert len({shuffled.index(i) // (32 * 50) for i in grouped[k:k + 32]}) == 1


def test_a_run_grouped_by_length_resumes_exactly(tmp_path):
    def varied(n, seed):
        examples = classification_data(n, seed=seed, length=12)
        for i, example in enumerate(examples):
            keep = 3 + (i * 7) % 10
            example["input_ids"], example["attention_mask"] = example["input_ids"][:keep], example["attention_mask"][:keep]
        return examples

    widths = []

    def pad(examples):
        longest = max(len(e["input_ids"]) for e in examples)
        widths.append(longest)
        grow = lambda t: torch.cat([t, t.new_zeros(longest - len(t))])
        return {"input_ids": torch.stack([grow(e["input_ids"]) for e in examples]),
                "attention_mask": torch.stack([grow(e["attention_mask"]) for e in examples]),
                "labels": torch.stack([e["labels"] for e in examples])}

    def fit(out, resume=False, **overrides):
        torch.manual_seed(0)
        model = tiny_model()
        config = resume_config(out, group_by_length=True, **overrides)
        Trainer(model, config, varied(24, 0), varied(6, 1), collate_fn=pad).fit(resume=resume)
        return model

    straight = fit(tmp_path / "a")
    fit(tmp_path / "b", time_budget_s=1e-9)
    resumed = fit(tmp_path / "b", resume=True)
    assert all(torch.equal(a, b) for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()))
    assert min(widths) < max(widths)  # batches really were padded to different lengths


def test_checkpoints_are_safetensors_and_json_and_keep_last(tmp_path):
    torch.manual_seed(0)
    model = tiny_model()
    config = quiet(max_steps=5, save_every=1, keep_last=2, out_dir=tmp_path)  # a Path is fine too
    Trainer(model, config, classification_data(20)).fit()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.json", "step-000004", "step-000005"]
    checkpoint = tmp_path / "step-000005"
    files = sorted(p.name for p in checkpoint.iterdir())
    assert files == ["config.json", "model.safetensors", "trainer_state.json", "trainer_state.safetensors"]
    for name in files:  # nothing here is a pickle: JSON and safetensors only, readable without running code
        if name.endswith(".json"):
            json.loads((checkpoint / name).read_text())
        else:
            with safe_open(checkpoint / name, framework="pt") as f:
                assert list(f.keys())
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert (state["step"], state["epoch"], state["batch_in_epoch"]) == (5, 0, 5)  # all 5 batches of epoch 0 used
    tensors = load_file(checkpoint / "trainer_state.safetensors")
    assert {"optimizer.0.exp_avg", "optimizer.0.exp_avg_sq", "optimizer.0.step", "rng.0.torch"} <= set(tensors)
    reloaded = BertForSequenceClassification.from_pretrained(checkpoint)  # the Hugging Face layout
    assert all(torch.equal(v, reloaded.state_dict()[k]) for k, v in model.state_dict().items())


def test_a_crash_while_saving_leaves_the_previous_checkpoints_usable(tmp_path, monkeypatch):
    straight, _ = run(resume_config(tmp_path / "a", eval_every=None))
    real_save_file = minibert.training.checkpoint.save_file

    def disk_full(tensors, path):
        if "000004" in str(path):
            raise OSError("No space left on device")
        real_save_file(tensors, path)

    monkeypatch.setattr(minibert.training.checkpoint, "save_file", disk_full)
    with pytest.raises(OSError, match="No space"):
        run(resume_config(tmp_path / "b", eval_every=None, save_every=2))
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["history.json", "step-000002"]
    killed = tmp_path / "b" / ".step-000004.tmp"  # what a process killed mid-save would leave
    killed.mkdir()
    (killed / "model.safetensors").write_bytes(b"half a file")

    resumed, _ = run(resume_config(tmp_path / "b", eval_every=None), resume=True)
    assert all(torch.equal(v, resumed.state_dict()[k]) for k, v in straight.state_dict().items())
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["history.json", "step-000002", "step-000006"]


def test_after_falling_back_the_damaged_checkpoint_is_set_aside_and_the_good_one_kept(tmp_path, caplog):
    """Resuming past a damaged checkpoint: the one it fell back to must survive pruning, and the damaged one
    must neither be pruned in its place, nor deleted, nor tried again."""
    out = tmp_path / "run"
    run(resume_config(out, eval_every=None, max_steps=4, save_every=2, keep_last=2))
    (out / "step-000004" / "model.safetensors").write_bytes(b"cut off")
    with caplog.at_level("WARNING"):  # keep one: by step number alone, the damaged step 4 would outrank step 3
        run(resume_config(out, eval_every=None, max_steps=3, save_every=1, keep_last=1), resume=True)
    assert "step-000004 cannot be resumed from" in caplog.text and "set aside as step-000004.damaged" in caplog.text
    assert sorted(p.name for p in out.iterdir()) == ["history.json", "step-000003", "step-000004.damaged"]
    assert (out / "step-000004.damaged" / "model.safetensors").read_bytes() == b"cut off"
    caplog.clear()
    with caplog.at_level("WARNING"):
        run(resume_config(out, eval_every=None, max_steps=5, save_every=1, keep_last=1), resume=True)
    assert "cannot be resumed" not in caplog.text
    assert sorted(p.name for p in out.iterdir()) == ["history.json", "step-000004.damaged", "step-000005"]


def test_a_diverged_checkpoint_is_never_written_and_never_resumed(tmp_path, caplog):
    out = tmp_path / "run"
    model, _ = run(resume_config(out, eval_every=None, max_steps=4, save_every=2))
    # a checkpoint with NaN weights (written by an older version, or by hand): resume falls back past it
    weights = load_file(out / "step-000004" / "model.safetensors")
    name = next(k for k in weights if k.endswith("dense.weight"))
    weights[name][0, 0] = float("nan")
    save_file(weights, out / "step-000004" / "model.safetensors", metadata={"format": "pt"})
    with caplog.at_level("WARNING"):
        run(resume_config(out, eval_every=None, max_steps=5, save_every=1), resume=True)
    assert "not finite numbers (NaN or inf) in " + name in caplog.text and "resuming from" in caplog.text
    assert (out / "step-000005").is_dir() and (out / "step-000004.damaged").is_dir()
    # and the trainer refuses to save weights that have diverged, keeping the last good checkpoint
    trainer = Trainer(model, resume_config(out, eval_every=None, max_steps=9), classification_data(20),
                      collate_fn=noisy_collate)
    trainer.step = 9
    with torch.no_grad():
        next(model.parameters())[0, 0] = float("inf")
    with pytest.raises(FloatingPointError, match="not finite numbers .* at step 9.*keeps its last good checkpoint"):
        trainer.save_checkpoint()
    assert not (out / "step-000009").exists() and (out / "step-000005").is_dir()


def test_a_fresh_run_does_not_mix_with_old_checkpoints(tmp_path):
    config = quiet(max_steps=2, out_dir=str(tmp_path))
    Trainer(tiny_model(), config, classification_data(20)).fit(resume=True)  # nothing to resume: from scratch
    with pytest.raises(ValueError, match="already holds checkpoints.*resume=True"):
        Trainer(tiny_model(), config, classification_data(20)).fit()
    with pytest.raises(FileNotFoundError, match="not a checkpoint folder"):
        Trainer(tiny_model(), config, classification_data(20)).fit(resume=tmp_path / "step-000099")


def test_no_weight_decay_on_biases_and_layer_norm():
    model = tiny_model()
    trainer = Trainer(model, quiet(max_steps=1, weight_decay=0.05), classification_data(8))
    names = {id(p): n for n, p in model.named_parameters()}
    groups = {g["name"]: g for g in trainer.optimizer.param_groups}
    no_decay = {names[id(p)] for p in groups["no_decay"]["params"]}
    assert groups["no_decay"]["weight_decay"] == 0.0 and groups["decay"]["weight_decay"] == 0.05
    assert no_decay == {n for n in names.values() if n.endswith("bias") or ".LayerNorm." in n}
    decay = {names[id(p)] for p in groups["decay"]["params"]}
    assert "bert.embeddings.word_embeddings.weight" in decay and "classifier.weight" in decay
    assert len(decay) + len(no_decay) == len(list(model.parameters()))


def test_warmup_then_linear_decay():
    assert [warmup_linear_decay(s, 1.0, 4, 10) for s in (0, 1, 3, 4, 7, 9)] == [0.25, 0.5, 1.0, 1.0, 0.5, 1 / 6]
    assert warmup_linear_decay(10, 1.0, 4, 10) == 0.0 and warmup_linear_decay(0, 1.0, 0, 10) == 1.0
    config = quiet(max_steps=10, warmup_steps=4, log_every=1)
    history = Trainer(tiny_model(), config, classification_data(40)).fit()  # the rates the updates really used
    expected = [1e-3 * f for f in (.25, .5, .75, 1, 1, 5 / 6, 4 / 6, .5, 2 / 6, 1 / 6)]
    assert history.series("lr")[1] == pytest.approx(expected)
    assert quiet(max_steps=200).num_warmup_steps == 20  # warmup_ratio 0.1 by default


def gradients_of_the_first_update(trainer):
    seen = {}
    update = trainer.optimizer.step

    def step(*args, **kwargs):
        seen.update({n: p.grad.clone() for n, p in trainer.model.named_parameters()})
        return update(*args, **kwargs)

    trainer.optimizer.step = step
    trainer.fit()
    return seen


def test_gradient_accumulation_equals_a_bigger_batch():
    grads = {}
    for batch_size, accum in [(8, 1), (4, 2)]:
        torch.manual_seed(0)
        config = quiet(max_steps=1, batch_size=batch_size, grad_accum_steps=accum, grad_clip=None)
        grads[accum] = gradients_of_the_first_update(Trainer(tiny_model(dropout=0.0), config, classification_data(16)))
    for name, grad in grads[1].items():
        torch.testing.assert_close(grads[2][name], grad, rtol=1e-5, atol=1e-7)


def test_gradients_are_clipped_to_grad_clip():
    torch.manual_seed(0)
    trainer = Trainer(tiny_model(), quiet(max_steps=1, grad_clip=0.01, log_every=1), classification_data(8))
    grads = gradients_of_the_first_update(trainer)
    assert torch.linalg.vector_norm(torch.stack([g.norm() for g in grads.values()])) <= 0.01 * (1 + 1e-5)
    assert trainer.history.last("grad_norm") > 0.01  # it did have something to clip


def test_two_ddp_processes_stay_in_sync_and_match_one_process_with_both_batches(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parent)}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               str(HERE / "ddp_train_script.py"), str(tmp_path)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    rank0, rank1 = (load_file(tmp_path / f"rank{r}.safetensors") for r in (0, 1))
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)

    torch.manual_seed(1)  # the same start, the same 8 examples per update, in one process
    model = tiny_model(dropout=0.0)
    config = TrainConfig(max_steps=3, batch_size=8, lr=1e-3, warmup_steps=1, progress=False, seed=3, device="cpu")
    history = Trainer(model, config, classification_data(32), eval_data=classification_data(10, seed=9)).fit()
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(rank0[name], tensor, rtol=1e-4, atol=1e-6)
    for rank in (0, 1):  # evaluation is shared between the processes and summed
        eval_loss = float((tmp_path / f"eval{rank}.txt").read_text())
        assert eval_loss == pytest.approx(history.last("eval_loss"), rel=1e-5)
    tensors = load_file(tmp_path / "run" / "step-000003" / "trainer_state.safetensors")
    assert not torch.equal(tensors["rng.0.torch"], tensors["rng.1.torch"])  # each process's own generators


@pytest.mark.parametrize("changes, message", [
    (dict(batch_size=0), "batch_size must be a positive integer"),
    (dict(lr=-1e-4), "lr must be a positive number"), (dict(lr=float("inf")), "lr must be a positive number, got inf"),
    (dict(precision="fp8"), "precision must be one of"),
    (dict(max_steps=10, warmup_steps=20), r"warmup_steps must be between 0 and max_steps \(10\)"),
    (dict(grad_clip=0), "grad_clip must be positive, or None"),
    (dict(betas=(0.9, 1.5)), r"betas must be two numbers in \[0, 1\)"),
    (dict(device="gpu"), "device must be 'auto', 'cpu', 'cuda'"),
    (dict(save_every=0), "save_every must be a positive integer or None"),
])
def test_bad_config_values_say_what_to_do(changes, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**changes)


def test_fp16_on_cpu_and_too_little_data_are_clear_errors():
    with pytest.raises(ValueError, match="precision='fp16' needs a CUDA GPU.*'fp32', or 'bf16'"):
        Trainer(tiny_model(), quiet(precision="fp16"), classification_data(8))
    with pytest.raises(ValueError, match="3 examples, fewer than one batch of 4"):
        Trainer(tiny_model(), quiet(), classification_data(3))
    unlabelled = [{k: v for k, v in ex.items() if k != "labels"} for ex in classification_data(8)]
    with pytest.raises(ValueError, match="returned no loss: a batch needs its labels"):
        Trainer(tiny_model(), quiet(max_steps=1), unlabelled).fit()


def test_the_fp16_gradient_scaler_is_used_and_checkpointed(tmp_path, monkeypatch):
    """fp16 is a CUDA option; torch can run it on CPU too, which lets this test reach the scaler's code."""
    monkeypatch.setattr(minibert.training.trainer, "pick_precision", lambda choice, device: "fp16")
    torch.manual_seed(0)
    trainer = Trainer(tiny_model(), quiet(max_steps=2, out_dir=tmp_path), classification_data(8))
    trainer.fit()
    assert trainer.scaler.is_enabled() and trainer.scaler.state_dict()["_growth_tracker"] == 2
    resumed = Trainer(tiny_model(), quiet(max_steps=2, out_dir=tmp_path), classification_data(8))
    resumed.load_checkpoint(tmp_path / "step-000002")
    assert resumed.scaler.state_dict() == trainer.scaler.state_dict()


def test_bf16_autocast_trains_on_cpu_when_asked():
    history = Trainer(tiny_model(), quiet(max_steps=2, precision="bf16", log_every=1), classification_data(8)).fit()
    assert len(history.series("loss")[1]) == 2


def test_model_flops_utilisation_inputs():
    assert peak_flops("NVIDIA H100 80GB HBM3") == 989e12 and peak_flops("NVIDIA H100 PCIe") == 756e12
    assert peak_flops("NVIDIA L40S") == 362e12 and peak_flops("NVIDIA A100-SXM4-40GB") == 312e12
    assert peak_flops("Apple M3") is None
    model = tiny_model()
    n = sum(p.numel() for p in model.parameters())
    assert flops_per_token(model, 8) == 6 * n + 12 * 2 * 32 * 8


def test_batches_are_checked_on_the_cpu_before_they_move():
    """The model skips value checks on a GPU (they would wait for the device): the Trainer's to_device does them."""
    from minibert import BertConfig
    from minibert.training import to_device
    config = BertConfig.from_preset("bert-tiny", vocab_size=100)
    good = {"input_ids": torch.tensor([[1, 2, 99]]), "labels": torch.tensor([0])}
    assert to_device(good, torch.device("meta"), config)["input_ids"].shape == (1, 3)  # meta: a device that is not the CPU
    with pytest.raises(ValueError, match=r"token ids \[100\] are outside the vocabulary"):
        to_device({"input_ids": torch.tensor([[1, 100]])}, torch.device("meta"), config)
