"""`minibert pretrain`: the command runs the whole recipe and leaves a checkpoint others can load."""
import json
import math
import os

import pytest
import torch
import transformers

import minibert
from minibert.cli import beyond_bert_parser, export_parser, main, masking_parser, pretrain_parser
from minibert.experiments.beyond_bert import BeyondBertSettings
from minibert.experiments.masking import MaskingSettings
from minibert.recipes import ExportSettings, FinetuneSettings, PretrainSettings
from minibert.recipes.pretrain import make_model

pytestmark = pytest.mark.skipif(not os.environ.get("MINIBERT_DATA_MIRROR") and not os.environ.get("CI"),
                                reason="needs the data mirror (MINIBERT_DATA_MIRROR)")


def tiny_base(folder, tokenizer) -> None:
    """A one-layer BERT with the course tokenizer in ``folder``: something to fine-tune in seconds."""
    config = minibert.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    minibert.BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def run(out, *extra):
    return main(["pretrain", "--out", str(out), "--vocab-size", "600", "--max-seq-len", "32",
                 "--batch-size", "8", "--corpus", "gutenberg/blake-poems.txt", "gutenberg/shakespeare-caesar.txt", *extra])


def test_pretrain_writes_a_checkpoint_that_both_libraries_load(tmp_path, eval_text, capsys):
    torch.set_num_threads(1)
    assert run(tmp_path / "run", "--steps", "6", "--eval-corpus", eval_text) == 0
    assert f"checkpoint: {tmp_path / 'run' / 'step-000006'}" in capsys.readouterr().out
    recipe = json.loads((tmp_path / "run" / "recipe.json").read_text())
    assert recipe["step"] == 6 and recipe["args"]["mask_same_rnd"] == [0.8, 0.1, 0.1]
    assert {"eval_loss", "eval_mlm_accuracy", "eval_nsp_accuracy"} <= set(recipe["final"])
    ours = minibert.BertForPreTraining.from_pretrained(tmp_path / "run" / "step-000006")
    assert ours.config.hidden_dropout_prob == ours.config.attention_probs_dropout_prob == 0.1  # the paper's
    theirs = transformers.BertForPreTraining.from_pretrained(tmp_path / "run" / "step-000006").eval()
    tok = minibert.BertTokenizer.from_pretrained(tmp_path / "run" / "tokenizer")
    assert ours.config.vocab_size == len(tok) <= 600
    batch = dict(tok(["the tyger burns"], ["in the forests of the night"], return_tensors="pt"))
    with torch.no_grad():
        torch.testing.assert_close(ours(**batch).prediction_logits, theirs(**batch).prediction_logits,
                                   atol=1e-5, rtol=0)


def test_dropout_is_a_flag(tmp_path):
    torch.set_num_threads(1)
    assert run(tmp_path / "run", "--steps", "1", "--eval-corpus", "--dropout", "0") == 0
    config = minibert.BertConfig.load(tmp_path / "run" / "step-000001" / "config.json")
    assert config.hidden_dropout_prob == config.attention_probs_dropout_prob == 0.0
    assert run(tmp_path / "bad", "--steps", "1", "--dropout", "1.5") == 2


def test_the_seed_sets_the_initial_weights(tmp_path):
    torch.set_num_threads(1)
    weights = []
    for generator_state, out in [(1, tmp_path / "a"), (2, tmp_path / "b")]:
        torch.manual_seed(generator_state)  # whatever came before must not matter
        assert run(out, "--steps", "1", "--eval-corpus") == 0
        weights.append(minibert.BertForPreTraining.from_pretrained(out / "step-000001").state_dict())
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_export_halves_the_weights_and_measures_what_it_ships(tmp_path, eval_text, capsys):
    torch.set_num_threads(1)
    assert run(tmp_path / "run", "--steps", "4", "--eval-corpus", eval_text) == 0
    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "model")]) == 0
    model_dir = tmp_path / "model"
    assert f"model: {model_dir}" in capsys.readouterr().out
    full = minibert.BertForPreTraining.from_pretrained(tmp_path / "run" / "step-000004")
    half = minibert.BertForPreTraining.from_pretrained(model_dir)
    assert (model_dir / "model.safetensors").stat().st_size < 0.55 * (tmp_path / "run" / "step-000004" /
                                                                     "model.safetensors").stat().st_size
    for (name, a), b in zip(full.state_dict().items(), half.state_dict().values()):
        torch.testing.assert_close(b, a.half().float(), atol=0, rtol=0, msg=name)  # fp16 rounding, nothing else
    held_out = json.loads((model_dir / "held_out.json").read_text())
    card = (model_dir / "README.md").read_text()
    assert (f"| {held_out['eval_mlm_accuracy']:.1%} | {held_out['eval_mlm_top5']:.1%} | "
            f"{held_out['eval_mlm_loss']:.3f} | {held_out['unigram_loss']:.3f} | ") in card
    assert "fill-in-the-blank accuracy" in card and "NSP accuracy" in card and "NSP, no blanks" in card
    assert 0 <= held_out["eval_nsp_accuracy_unmasked"] <= 1
    assert "## The lectures' blanks" in card and "| paris is the [MASK] of france . |" in card
    assert "minibert pretrain --preset bert-tiny" in card and "--mask-same-rnd 0.8 0.1 0.1" in card
    assert minibert.BertTokenizer.from_pretrained(model_dir).get_vocab() == \
        minibert.BertTokenizer.from_pretrained(tmp_path / "run" / "tokenizer").get_vocab()
    assert main(["export", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")]) == 2
    assert "no finished minibert pretrain run" in capsys.readouterr().err


def test_a_model_made_in_two_runs_gives_both_commands_on_its_card(tmp_path, eval_text):
    """BERT's two stages (short sequences, then pairs at full length) are two runs; the shipped card must say
    how the first one made the weights the second started from, not present them as someone else's model."""
    torch.set_num_threads(1)
    assert run(tmp_path / "s1", "--steps", "2", "--objective", "none", "--max-seq-len", "16", "--eval-corpus", eval_text) == 0
    assert main(["export", str(tmp_path / "s1"), "--out", str(tmp_path / "s1-model"), "--dtype", "fp32"]) == 0
    assert main(["pretrain", "--init-from", str(tmp_path / "s1-model"), "--extend-from", "16", "--max-seq-len", "32",
                 "--batch-size", "8", "--steps", "2", "--corpus", "gutenberg/blake-poems.txt",
                 "gutenberg/shakespeare-caesar.txt", "--eval-corpus", eval_text, "--out", str(tmp_path / "s2")]) == 0
    assert main(["export", str(tmp_path / "s2"), "--out", str(tmp_path / "model")]) == 0
    card = (tmp_path / "model" / "README.md").read_text()
    assert "pre-trained from scratch by the course's own recipe in two runs: 2 steps on sequences of up to 16" in card
    assert "with masked-LM and NSP heads" in card and card.count("minibert pretrain ") == 2
    assert f"minibert export {(tmp_path / 's1').as_posix()} --out {(tmp_path / 's1-model').as_posix()} --dtype fp32\n" in card
    assert f"--out {(tmp_path / 's1').as_posix()}\n" in card and "--extend-from 16" in card


def test_a_run_made_on_a_gpu_exports_on_a_machine_without_one(tmp_path, eval_text):
    """A run trained with --device cuda and bf16 (an instructor's GPU) is exported on a laptop: the card's
    figures are measured there in fp32, not refused because the recipe names a device this machine lacks."""
    torch.set_num_threads(1)
    assert run(tmp_path / "run", "--steps", "2", "--objective", "none", "--eval-corpus", eval_text) == 0
    recipe_path = tmp_path / "run" / "recipe.json"
    recipe = json.loads(recipe_path.read_text())
    recipe["args"].update(device="cuda", precision="bf16")
    recipe.update(device="cuda:0", precision="bf16")
    recipe_path.write_text(json.dumps(recipe))
    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "model")]) == 0
    held_out = json.loads((tmp_path / "model" / "held_out.json").read_text())
    assert 0 <= held_out["eval_mlm_accuracy"] <= 1 and math.isfinite(held_out["eval_mlm_loss"])
    assert "on cuda:0 in bf16" in (tmp_path / "model" / "README.md").read_text()


def test_roberta_style_run_exports_a_masked_lm_with_an_mlm_only_card(tmp_path, eval_text):
    torch.set_num_threads(1)
    assert run(tmp_path / "run", "--steps", "2", "--objective", "none", "--eval-corpus", eval_text) == 0
    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "model")]) == 0
    card = (tmp_path / "model" / "README.md").read_text()
    assert ("| fill-in-the-blank accuracy | top-5 | loss | unigram plateau | 80/10/10 accuracy |\n|---|---|---|---|---|\n"
            in card and "nan" not in card and "NSP" not in card)
    assert "alone, on packed full sentences" in card and "sequences of up to 32 tokens" in card
    assert minibert.BertForMaskedLM.from_pretrained(tmp_path / "model").config.vocab_size <= 600


def test_albert_presets_pretrain_with_sentence_order_prediction(tmp_path):
    torch.set_num_threads(1)
    assert run(tmp_path / "run", "--steps", "1", "--preset", "albert-base", "--objective", "sop", "--eval-corpus") == 0
    config = minibert.BertConfig.load(tmp_path / "run" / "step-000001" / "config.json")
    assert config.share_layers and config.embedding_size == 128 and config.num_hidden_layers == 12


def test_time_budget_then_resume_reaches_the_step_count(tmp_path, eval_text):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    run(out, "--steps", "8", "--time-budget", "1e-9", "--eval-corpus")  # out of time after the first step
    first = sorted(p.name for p in out.glob("step-*"))
    assert first == ["step-000001"]
    run(out, "--steps", "8", "--eval-corpus", "--resume")
    assert sorted(p.name for p in out.glob("step-*"))[-1] == "step-000008"


@pytest.mark.parametrize("make_parser", [pretrain_parser, export_parser, masking_parser, beyond_bert_parser])
def test_every_flag_is_documented(make_parser):
    parser = make_parser()
    undocumented = [a.dest for a in parser._actions if not a.help]
    assert not undocumented, f"flags without help: {undocumented}"


def test_settings_are_plain_data_checked_when_made():
    settings = PretrainSettings(out="runs/x", corpus="gutenberg", time_budget=60)
    assert settings.corpus == ("gutenberg",) and settings.time_budget == 60.0 and settings.steps == 1000
    flags = vars(pretrain_parser().parse_args(["--out", "runs/x", "--steps", "5", "--eval-corpus"]))
    assert flags == {"out": "runs/x", "steps": 5, "eval_corpus": []}  # only what was given: defaults live in settings
    for bad, message in [(dict(mask_same_rnd=(0.5, 0.5, 0.5)), "sum to 1"), (dict(dropout=1.5), "dropout"),
                         (dict(steps=0), "steps must be a positive integer"), (dict(preset="bert-huge"), "bert-tiny"),
                         (dict(mask_same_rnd=(float("nan"), 0.5, 0.5)), r"mask_same_rnd=\(nan, 0.5, 0.5\) must be"),
                         (dict(lr=float("inf")), "lr must be a positive number, got inf")]:
        with pytest.raises(ValueError, match=message):
            PretrainSettings(out="runs/x", **bad)
    from minibert.training import pick_device
    with pytest.raises(ValueError, match=r"device='cpu:abc' is not a device; use auto, cpu"):
        pick_device("cpu:abc")
    with pytest.raises(ValueError, match="dtype"):
        ExportSettings(run="runs/x", out="models/x", dtype="int4")
    with pytest.raises(ValueError, match="use it with pos"):
        FinetuneSettings(task="sst2", model="m", out="o", feature_based=True)
    with pytest.raises(ValueError, match="Table 8"):
        MaskingSettings(out="a.json", strategies=["50/50/0"])
    assert BeyondBertSettings(out="b.json", sizes=["2x128x2", (4, 256, 4)]).sizes == ((2, 128, 2), (4, 256, 4))


def test_bad_settings_are_one_line_errors(tmp_path, capsys):
    assert run(tmp_path / "a", "--steps", "2", "--mask-same-rnd", "0.5", "0.5", "0.5") == 2
    assert "error:" in capsys.readouterr().err
    assert run(tmp_path / "b", "--steps", "2", "--corpus", "no_such_corpus") == 2
    assert "no_such_corpus" in capsys.readouterr().err


def test_continued_pretraining_keeps_the_encoder_and_starts_a_tied_mlm_head(tmp_path, eval_text):
    """--init-from: MiniLM (an encoder without an MLM head) goes on pre-training with a fresh, tied head."""
    torch.set_num_threads(1)
    minilm = "sentence-transformers/all-MiniLM-L6-v2"
    assert main(["pretrain", "--init-from", minilm, "--objective", "none", "--steps", "1", "--batch-size", "2",
                 "--max-seq-len", "32", "--lr", "1e-9", "--corpus", eval_text, "--eval-corpus", eval_text,
                 "--out", str(tmp_path / "run")]) == 0
    model = minibert.BertForMaskedLM.from_pretrained(tmp_path / "run" / "step-000001")
    encoder = minibert.BertModel.from_pretrained(minilm)
    assert model.config.hidden_size == 384 and model.config.num_hidden_layers == 6
    weights = encoder.state_dict()
    for name, value in model.bert.state_dict().items():
        if "pooler" not in name:
            torch.testing.assert_close(value, weights[name], atol=1e-6, rtol=0, msg=name)  # lr 1e-9: one tiny step
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert minibert.BertTokenizer.from_pretrained(tmp_path / "run" / "tokenizer").get_vocab() == \
        minibert.BertTokenizer.from_pretrained(minilm).get_vocab()
    recipe = json.loads((tmp_path / "run" / "recipe.json").read_text())
    assert recipe["args"]["init_from"] == minilm and 0 < recipe["unigram_loss"] < math.log(30522)
    with pytest.raises(ValueError, match="keeps that model's vocabulary"):
        PretrainSettings(out=tmp_path / "x", init_from=minilm, vocab_size=100)


def test_the_same_pretrain_command_twice_gives_the_same_weights(tmp_path):
    torch.set_num_threads(1)
    torch.manual_seed(123)  # whatever the generator held before must not matter
    assert run(tmp_path / "a", "--steps", "3", "--eval-corpus", "--preset", "bert-tiny") == 0
    torch.rand(7)
    assert run(tmp_path / "b", "--steps", "3", "--eval-corpus", "--preset", "bert-tiny") == 0
    assert run(tmp_path / "c", "--steps", "3", "--eval-corpus", "--preset", "bert-tiny", "--seed", "1") == 0
    load = lambda name: minibert.BertForPreTraining.from_pretrained(tmp_path / name / "step-000003").state_dict()
    a, b, c = load("a"), load("b"), load("c")
    assert all(torch.equal(a[k], b[k]) for k in a), "same command, same weights"
    assert not all(torch.equal(a[k], c[k]) for k in a), "another seed, other weights"


def test_unpadded_and_batches_made_by_workers_train_the_same_model(tmp_path):
    """--unpadded: BERT's layers on the real tokens, the same run to rounding (dropout 0, the same masks);
    --num-workers: the batches made in other processes, a run that trains and ends as the plain one does."""
    torch.set_num_threads(1)
    flags = ("--steps", "4", "--eval-corpus", "--preset", "bert-tiny", "--dropout", "0")
    assert run(tmp_path / "padded", *flags) == 0
    assert run(tmp_path / "unpadded", *flags, "--unpadded") == 0
    assert run(tmp_path / "workers", *flags, "--num-workers", "2") == 0
    history = lambda name: json.loads((tmp_path / name / "history.json").read_text())
    losses = {name: [r["loss"] for r in history(name) if "loss" in r] for name in ("padded", "unpadded", "workers")}
    assert len(losses["padded"]) >= 1 and all(math.isfinite(x) for x in losses["workers"])
    torch.testing.assert_close(losses["unpadded"], losses["padded"], atol=1e-5, rtol=1e-5)
    recipe = json.loads((tmp_path / "unpadded" / "recipe.json").read_text())
    assert recipe["args"]["unpadded"] is True and recipe["step"] == 4
    assert json.loads((tmp_path / "workers" / "recipe.json").read_text())["step"] == 4
    for bad, message in [(dict(num_workers=-1), "num_workers must be an integer >= 0"),
                         (dict(unpadded=True, architecture="modernbert"), "unpadded is BERT's option")]:
        with pytest.raises(ValueError, match=message):
            PretrainSettings(out="runs/x", **bad)


def test_finetune_seed_seeds_the_new_head(tmp_path, tokenizer):
    from minibert.recipes.finetune import finetune
    torch.set_num_threads(1)
    tiny_base(tmp_path / "base", tokenizer)
    heads = []
    for name, seed in [("a", 0), ("b", 0), ("c", 3)]:
        torch.rand(5)  # disturb the global generator between runs
        finetune(FinetuneSettings(task="sst2", model=str(tmp_path / "base"), out=str(tmp_path / name), steps=1,
                                  train_examples=16, eval_examples=8, batch_size=8, seed=seed, device="cpu"))
        heads.append(minibert.BertForSequenceClassification.from_pretrained(tmp_path / name).classifier.weight)
    assert torch.equal(heads[0], heads[1]) and not torch.equal(heads[0], heads[2])


def test_a_second_run_into_the_same_folder_is_refused_before_anything_is_written(tmp_path):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    assert run(out, "--steps", "2", "--eval-corpus") == 0
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    assert run(out, "--steps", "2", "--eval-corpus", "--vocab-size", "400") == 2  # no --resume
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before, "nothing rewritten"


def test_resume_with_other_data_flags_or_preset_is_refused_and_recipe_kept(tmp_path, capsys):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    assert run(out, "--steps", "2", "--eval-corpus") == 0
    recipe = (out / "recipe.json").read_text()
    capsys.readouterr()
    for flags, named in [(["--max-seq-len", "16"], "--max-seq-len 16 (the run: 32)"),
                         (["--mlm-probability", "0.3"], "--mlm-probability 0.3 (the run: 0.15)"),
                         (["--preset", "bert-mini"], "--preset 'bert-mini' (the run: 'bert-tiny')")]:
        assert run(out, "--steps", "4", "--eval-corpus", "--resume", *flags) == 2
        assert named in capsys.readouterr().err
    assert (out / "recipe.json").read_text() == recipe and not (out / "step-000004").exists()
    assert run(out, "--steps", "4", "--eval-corpus", "--resume") == 0  # more steps: the same run, longer
    assert (out / "step-000004").exists()


def test_resume_with_nothing_to_resume_says_so(tmp_path, caplog):
    torch.set_num_threads(1)
    with caplog.at_level("WARNING"):
        assert run(tmp_path / "new", "--steps", "1", "--eval-corpus", "--resume") == 0
    assert "holds no checkpoint to resume from, so training starts at step 0" in caplog.text


def test_an_interrupted_run_is_resumed_only_with_its_own_settings_and_exported_only_when_ended(tmp_path, capsys,
                                                                                              killed_after_saving):
    """recipe.json is written when a run starts: a run killed after its first checkpoint refuses a resume with
    another seed or masking rate (which would then describe the whole run), and export says to resume it."""
    torch.set_num_threads(1)
    out = tmp_path / "run"
    with killed_after_saving():
        assert run(out, "--steps", "4", "--save-every", "2", "--eval-corpus") == 130  # as after Ctrl-C
    recipe = json.loads((out / "recipe.json").read_text())
    assert recipe["args"]["seed"] == 0 and "step" not in recipe
    capsys.readouterr()
    assert main(["export", str(out), "--out", str(tmp_path / "model")]) == 2
    assert "has not ended" in capsys.readouterr().err and not (tmp_path / "model").exists()
    for flags, named in [(["--seed", "3"], "--seed 3 (the run: 0)"),
                         (["--mlm-probability", "0.2"], "--mlm-probability 0.2 (the run: 0.15)")]:
        assert run(out, "--steps", "4", "--save-every", "2", "--eval-corpus", "--resume", *flags) == 2
        assert named in capsys.readouterr().err
    assert main(["pretrain", "--out", str(out), "--resume"]) == 0  # the flags not given: the run's own
    recipe = json.loads((out / "recipe.json").read_text())
    assert recipe["step"] == 4 and recipe["args"]["corpus"] == ["gutenberg/blake-poems.txt", "gutenberg/shakespeare-caesar.txt"]


def test_a_damaged_latest_checkpoint_falls_back_to_the_one_before(tmp_path, caplog):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    assert run(out, "--steps", "4", "--save-every", "2", "--eval-corpus") == 0
    (out / "step-000004" / "model.safetensors").write_bytes(b"cut off")
    with caplog.at_level("WARNING"):
        assert run(out, "--steps", "6", "--eval-corpus", "--resume") == 0
    assert "step-000004 cannot be resumed from" in caplog.text and "resuming from" in caplog.text
    assert "step-000002" in caplog.text and (out / "step-000006").exists()


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_ctrl_c_or_a_kill_saves_a_checkpoint_that_resume_goes_on_from(tmp_path, stop):
    """Ctrl-C, and what `docker stop`, SLURM, systemd or a closed terminal send, all save before stopping."""
    import signal
    import subprocess
    import sys
    import time
    out = tmp_path / "run"
    args = [sys.executable, "-m", "minibert.cli", "pretrain", "--out", str(out), "--vocab-size", "600",
            "--max-seq-len", "32", "--batch-size", "8", "--corpus", "gutenberg/blake-poems.txt",
            "gutenberg/shakespeare-caesar.txt", "--eval-corpus", "--steps", "100000", "--save-every", "100000"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while not (out / "tokenizer").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)  # some updates
    process.send_signal(getattr(signal, stop))
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130 and "interrupted: stopped at step" in err and "--resume" in err
    saved = sorted(out.glob("step-*"))
    assert len(saved) == 1 and 0 < int(saved[0].name[5:]) < 100000
    step = int(saved[0].name[5:])
    assert run(out, "--steps", str(step + 2), "--eval-corpus", "--resume") == 0
    assert (out / f"step-{step + 2:06d}").exists()


def test_export_of_a_run_it_cannot_score_says_why_and_writes_nothing(tmp_path, capsys):
    torch.set_num_threads(1)
    assert run(tmp_path / "run", "--steps", "1", "--eval-corpus") == 0  # NSP, no held-out text
    capsys.readouterr()
    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "model")]) == 2
    assert "without held-out text (--eval-corpus)" in capsys.readouterr().err
    assert not (tmp_path / "model").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    (tmp_path / "mine" / "config.json").write_text("{}")
    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "mine")]) == 2
    assert "a folder that minibert did not write, and it holds config.json, notes.txt" in capsys.readouterr().err
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    (tmp_path / "mine" / ".minibert-output").write_text("written by `minibert export`\n")  # ours, with a model
    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "mine")]) == 2
    assert "already holds a model" in capsys.readouterr().err


def test_extend_from_starts_longer_inputs_from_the_trained_positions_and_segment(tmp_path):
    torch.manual_seed(0)
    short = minibert.BertForMaskedLM(minibert.BertConfig.from_preset("bert-tiny", vocab_size=30522))
    short.save_pretrained(tmp_path / "short")
    minibert.BertTokenizer.from_pretrained("sentence-transformers/all-MiniLM-L6-v2").save_pretrained(tmp_path / "short")
    settings = PretrainSettings(init_from=str(tmp_path / "short"), extend_from=16, objective="nsp", max_seq_len=128)
    model = make_model(settings, None)
    positions = model.bert.embeddings.position_embeddings.weight
    trained = short.bert.embeddings.position_embeddings.weight[:16]
    assert torch.equal(positions[:16], trained) and torch.equal(positions[16:32], trained)
    assert torch.equal(positions[496:512], trained)
    types = model.bert.embeddings.token_type_embeddings.weight
    assert torch.equal(types[1], types[0]) and torch.equal(types[0], short.bert.embeddings.token_type_embeddings.weight[0])
    assert torch.equal(model.bert.encoder.layer[1].output.dense.weight, short.bert.encoder.layer[1].output.dense.weight)
    for bad in (dict(init_from=None), dict(extend_from=128)):
        with pytest.raises(ValueError, match="extend_from"):
            PretrainSettings(**{**dict(init_from="x", extend_from=16), **bad})


@pytest.mark.parametrize("length", [100_000, 4])
def test_an_example_length_nobody_can_train_is_refused(length):
    with pytest.raises(ValueError, match=f"max_seq_len must be from 8 to 8,192 tokens, got {length:,}"):
        PretrainSettings(out="unused", max_seq_len=length)


# --- a full disk: one line, the file named, the last checkpoint intact, nothing half-written ---------------------
def no_space_on(module, name, monkeypatch, after: int = 0, rust: bool = False, code: str = "ENOSPC"):
    """``module.name`` (a writer) fails as on a full disk from its call number ``after + 1`` on: OSError ENOSPC (or
    ``code``) from Python, or, ``rust``, the SafetensorError that safetensors raises for it."""
    import errno

    from safetensors import SafetensorError
    real, calls = getattr(module, name), []

    def full(*args, **kwargs):
        calls.append(args)
        if len(calls) <= after:
            return real(*args, **kwargs)
        if rust:
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)))
    monkeypatch.setattr(module, name, full)


def one_line_disk_full(err: str, why: str = "No space left on device") -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: the disk is full ({why}): "), lines[0]
    return lines[0]


@pytest.mark.parametrize("code, why", [("ENOSPC", "No space left on device"), ("EDQUOT", "Disk quota exceeded")])
def test_a_full_disk_while_saving_a_checkpoint_keeps_the_previous_one_and_says_so(tmp_path, capsys, monkeypatch,
                                                                                   code, why):
    import minibert.training.checkpoint as checkpoint
    torch.set_num_threads(1)
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        no_space_on(checkpoint, "save_file", patch, after=1, code=code)  # step 2's checkpoint is written, not step 4's
        assert run(out, "--steps", "4", "--save-every", "2", "--eval-corpus") == 2
    line = one_line_disk_full(capsys.readouterr().err, why)
    assert (f"{out / 'step-000004'} could not be written, and nothing of it was left behind; the previous checkpoint "
            f"{out / 'step-000002'} is intact. Free some space on that disk, then run the same command with --resume"
            in line)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".minibert")) == [
        "history.json", "recipe.json", "step-000002", "tokenizer"]  # no .step-000004.tmp, no step-000004
    minibert.BertForPreTraining.from_pretrained(out / "step-000002")
    assert run(out, "--steps", "4", "--save-every", "2", "--eval-corpus", "--resume") == 0  # space freed: it goes on
    assert (out / "step-000004").is_dir()


def test_a_full_disk_while_writing_a_fine_tuned_model_leaves_no_partial_file(tmp_path, tokenizer, capsys, monkeypatch):
    import minibert.hub as hub
    torch.set_num_threads(1)
    tiny_base(tmp_path / "base", tokenizer)
    out = tmp_path / "sst2"
    argv = ["finetune", "sst2", "--model", str(tmp_path / "base"), "--out", str(out), "--steps", "1",
            "--train-examples", "16", "--eval-examples", "8", "--batch-size", "8", "--device", "cpu"]
    with monkeypatch.context() as patch:
        no_space_on(hub, "save_file", patch, after=1, rust=True)  # the checkpoint is written, not the model
        assert main(argv) == 2
    line = one_line_disk_full(capsys.readouterr().err)
    assert (f"{out / 'model.safetensors'} could not be written, and nothing of it was left behind; the run's last "
            f"checkpoint {out / 'checkpoints' / 'step-000001'} is intact" in line and "--resume" in line)
    assert not (out / "model.safetensors").exists() and not list(out.glob(".*.part"))
    assert main([*argv, "--resume"]) == 0 and (out / "results.json").is_file()


def test_a_full_disk_while_exporting_leaves_no_folder(tmp_path, eval_text, capsys, monkeypatch):
    import minibert.hub as hub
    torch.set_num_threads(1)
    assert run(tmp_path / "run", "--steps", "1", "--objective", "none", "--eval-corpus", eval_text) == 0
    capsys.readouterr()
    with monkeypatch.context() as patch:
        no_space_on(hub, "save_file", patch, rust=True)
        assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "model")]) == 2
    line = one_line_disk_full(capsys.readouterr().err)
    assert f"{tmp_path / 'model' / 'model.safetensors'} could not be written" in line
    assert f"{tmp_path / 'run'} is untouched" in line and line.endswith("then run the same command again "
                                                                          "(nothing was left in its --out)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


# --- --eval-corpus none -----------------------------------------------------------------------------------------
def test_eval_corpus_none_means_no_held_out_text_as_documented(tmp_path, capsys):
    torch.set_num_threads(1)
    assert "none, or the flag alone, to skip held-out evaluation" in " ".join(pretrain_parser().format_help().split())
    assert PretrainSettings(eval_corpus="none").eval_corpus == () == PretrainSettings(eval_corpus=["none"]).eval_corpus
    assert run(tmp_path / "run", "--steps", "2", "--eval-every", "1", "--eval-corpus", "none") == 0
    recipe = json.loads((tmp_path / "run" / "recipe.json").read_text())
    assert recipe["args"]["eval_corpus"] == [] and recipe["eval_examples"] == 0
    assert not any(k.startswith("eval_") for record in json.loads((tmp_path / "run" / "history.json").read_text())
                   for k in record)
    assert run(tmp_path / "run", "--steps", "3", "--resume") == 0  # the run's own: still none
    capsys.readouterr()
    assert run(tmp_path / "b", "--steps", "1", "--eval-corpus", "none", "wikitext2_raw/wiki.test.raw") == 2
    assert "none means no held-out text, so it stands alone" in capsys.readouterr().err
    # a grid scores every run on held-out text: its help does not offer none, and none is refused in one line
    assert "cannot be skipped" in " ".join(masking_parser().format_help().split())
    assert main(["experiment", "masking", "--out", str(tmp_path / "grid.json"), "--eval-corpus", "none"]) == 2
    assert "a grid scores every run on held-out text" in capsys.readouterr().err


# --- export: a card scored in seconds, and a folder that appears only complete ----------------------------------
def to_be_scored_on(out, held_out: str, *flags):
    """A one-step run whose card is to be scored on ``held_out`` (not scored at its end: that is pretrain's own
    evaluation, on all of it)."""
    assert run(out, "--steps", "1", "--objective", "none", "--eval-corpus", "none", *flags) == 0
    recipe = json.loads((out / "recipe.json").read_text())
    recipe["args"]["eval_corpus"] = [held_out]
    (out / "recipe.json").write_text(json.dumps(recipe))


def test_export_scores_its_card_on_a_bounded_sample_of_a_large_held_out_text(tmp_path, capsys):
    import time

    from minibert.recipes.model_card import CARD_EXAMPLES
    torch.set_num_threads(1)
    to_be_scored_on(tmp_path / "run", "wikitext2_raw/wiki.test.raw", "--max-seq-len", "16")  # 20,000 sequences
    started = time.monotonic()
    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "model")]) == 0
    assert time.monotonic() - started < 60
    card = (tmp_path / "model" / "README.md").read_text()
    assert f"loaded back; {CARD_EXAMPLES} of the " in card and " held-out sequences, evenly spread over the text)" in card


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_an_interrupted_export_leaves_nothing_that_looks_complete_and_a_new_export_works(tmp_path, stop):
    import signal
    import subprocess
    import sys
    import time
    torch.set_num_threads(1)
    to_be_scored_on(tmp_path / "run", "wikitext2_raw/wiki.test.raw")
    model, stage = tmp_path / "model", tmp_path / ".model.partial"
    export = subprocess.Popen([sys.executable, "-m", "minibert.cli", "export", str(tmp_path / "run"), "--out",
                               str(model)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while not any((folder / "model.safetensors").exists() for folder in (model, stage)):  # weights written: scoring
        assert time.monotonic() < deadline and export.poll() is None, export.communicate()
        time.sleep(0.02)
    export.send_signal(getattr(signal, stop))
    _, err = export.communicate(timeout=60)
    assert not model.exists()  # no folder without its card
    if stop == "SIGTERM":  # stopped as by Ctrl-C: it cleans up and says so
        assert export.returncode == 130 and "interrupted: stopped by SIGTERM; run the same command again" in err
        assert not stage.exists()
    assert main(["export", str(tmp_path / "run"), "--out", str(model)]) == 0  # what a kill left is cleared
    assert (model / "README.md").is_file() and not stage.exists()


def test_a_fine_tuned_model_s_card_is_scored_on_a_bounded_sample_and_its_run_on_the_same(tmp_path, tokenizer):
    """SST-2 dev has 872 phrases: the card scores both the exported and the fine-tuned weights on the first 512."""
    from minibert.recipes.finetune import finetune
    from minibert.recipes.model_card import CARD_EXAMPLES
    torch.set_num_threads(1)
    tiny_base(tmp_path / "base", tokenizer)
    results = finetune(FinetuneSettings(task="sst2", model=str(tmp_path / "base"), out=str(tmp_path / "run"), steps=2,
                                        train_examples=32, batch_size=16, device="cpu"))
    assert "872" in results["data"]["eval"]  # the run: all of dev
    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "model"), "--dtype", "fp32"]) == 0
    card = (tmp_path / "model" / "README.md").read_text()
    held_out = json.loads((tmp_path / "model" / "held_out.json").read_text())
    assert f"Both rows on the first {CARD_EXAMPLES} held-out examples" in card
    assert f"| fine-tuned (fp32) | {held_out['accuracy']:.4f} |" in card  # fp32 exported = fp32 fine-tuned, same 512
    assert f"| exported (fp32), loaded back | {held_out['accuracy']:.4f} |" in card
