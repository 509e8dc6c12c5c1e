"""The GPU path, proven on a CUDA GPU: the models there equal their CPU selves and transformers; bf16
and fp16 train like fp32 on real batches, and torch.compile like eager; a resumed run equals an
uninterrupted one bit for bit; no training step waits for the device; the Trainer and the command
line find the GPU and bf16 by themselves.

Skipped without CUDA. ``MINIBERT_GPU_TESTS_ON_CPU=1`` rehearses it on the CPU (what only a GPU has is
swapped for its CPU stand-in, see `rehearsing`), so that a mistake here costs no GPU time;
``bash benchmarks/gpu_check.sh`` runs it on the GPU with the rest of the GPU check.
"""
import math
import os

# The resume test needs deterministic cuBLAS, which reads this when CUDA starts: before any test runs.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import json  # noqa: E402
import time  # noqa: E402
from functools import partial  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from host_syncs import (  # noqa: E402
    cuda_sync_errors,
    fuse_the_optimizer,
    record_device_work_of_steps,
    sentence_pairs,
    watch_steps_after_the_first,
)
from torch.utils.data import default_collate  # noqa: E402

import minibert  # noqa: E402
import minibert.training.trainer  # noqa: E402
from minibert import BertConfig, BertForPreTraining, BertForSequenceClassification, cli, data  # noqa: E402
from minibert.modernbert import ModernBertConfig, ModernBertForPreTraining  # noqa: E402
from minibert.pretraining import build_pretraining_data  # noqa: E402
from minibert.tokenizer import BertTokenizer  # noqa: E402
from minibert.training import TrainConfig, Trainer, find_checkpoints  # noqa: E402

ON_GPU = torch.cuda.is_available()
REHEARSAL = not ON_GPU and os.environ.get("MINIBERT_GPU_TESTS_ON_CPU") == "1"
if not (ON_GPU or REHEARSAL):
    pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False); MINIBERT_GPU_TESTS_ON_CPU=1 rehearses "
                "these tests on the CPU", allow_module_level=True)
pytestmark = pytest.mark.gpu
DEVICE = "cuda" if ON_GPU else "cpu"      # what device="auto" picks
AUTO_PRECISION = "bf16" if ON_GPU else "fp32"
TOKENIZER = data.ensure("bert_vocab")     # bert-base-uncased's vocab.txt, from the data folder (the check's bundle)
# The precision test's updates of real NSP pairs: 50 of 32 × 128 tokens on a GPU, fewer and smaller in a rehearsal.
SEQ, BATCH, STEPS = (128, 32, 50) if ON_GPU else (64, 8, 20)
TOLERANCE = 0.02                          # bf16 / fp16 / compiled losses within 2% of their reference


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer.from_pretrained(TOKENIZER)


@pytest.fixture(scope="module")
def pretraining_data(tokenizer):
    """WikiText-2 valid as BERT's NSP pairs, masked dynamically (from the data folder: see data/README.md), padded
    to SEQ tokens: batches of one shape, so that torch.compile compiles once."""
    return build_pretraining_data(tokenizer, ["wikitext2_raw/wiki.valid.raw"], objective="nsp", max_seq_len=SEQ,
                                  seed=0, pad_to=SEQ)


@pytest.fixture
def rehearsing(monkeypatch):
    """On the CPU, the stand-ins for what only a GPU has: fp16 training (the Trainer refuses it on a CPU;
    torch runs the gradient scaler there too), and torch.compile with a backend that compiles no code
    (Inductor's C++ would take minutes of a small CPU). On a GPU it changes nothing."""
    if REHEARSAL:
        real_pick = minibert.training.trainer.pick_precision
        monkeypatch.setattr(minibert.training.trainer, "pick_precision",
                            lambda choice, device: choice if choice == "fp16" else real_pick(choice, device))
        monkeypatch.setattr(torch, "compile", partial(torch.compile, backend="aot_eager"))


@pytest.fixture
def full_fp32():
    """fp32 matrix products without TF32 (the Trainer turns TF32 on for CUDA), for a tight comparison."""
    saved = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(saved)


@pytest.fixture
def deterministic():
    """Kernels that add in a fixed order (cuBLAS's too, with the CUBLAS_WORKSPACE_CONFIG set above)."""
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)


def small_config(tokenizer, dropout=0.0) -> BertConfig:
    """bert-tiny (L=2, H=128) on the bert-base-uncased vocabulary: the V-wide decoder is most of its work."""
    return BertConfig.from_preset("bert-tiny", vocab_size=tokenizer.vocab_size, max_position_embeddings=SEQ,
                                  hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)


def pretrainer(tokenizer, data, dropout=0.0, unpadded=False, **settings) -> Trainer:
    """A fresh bert-tiny pre-training on ``data`` with masked-only decoding (and with ``unpadded``, the layers on
    the real tokens only), on the device the Trainer picks."""
    torch.manual_seed(0)
    model = BertForPreTraining(small_config(tokenizer, dropout))
    config = TrainConfig(**{"max_steps": STEPS, "batch_size": BATCH, "lr": 1e-3, "log_every": 1, "progress": False,
                            **settings})
    return Trainer(model, config, data, collate_fn=data.collate,
                   model_kwargs={"masked_only": True, **({"unpadded": True} if unpadded else {})})


def relative_gaps(losses, reference) -> list[float]:
    return [abs(a - b) / b for a, b in zip(losses, reference, strict=True)]


# --- the same numbers as the CPU and transformers ---------------------------------------------------------
@pytest.mark.parametrize("kind", ["BertModel", "BertForPreTraining", "BertForSequenceClassification"])
def test_models_on_the_gpu_equal_the_cpu_and_transformers(kind, tmp_path, full_fp32):
    """fp32, a padded batch of two-segment inputs; transformers with its sdpa attention."""
    hf_config = transformers.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=128, max_position_embeddings=64, num_labels=3,
                                        attn_implementation="sdpa")
    torch.manual_seed(0)
    theirs = getattr(transformers, kind)(hf_config).eval()
    theirs.save_pretrained(tmp_path)
    ours = getattr(minibert, kind).from_pretrained(tmp_path).eval()
    batch = default_collate(sentence_pairs(3, hf_config.vocab_size, 24, seed=1, num_labels=3))
    del batch["labels"]
    names = {"BertModel": ["last_hidden_state", "pooler_output"],
             "BertForPreTraining": ["prediction_logits", "seq_relationship_logits"]}.get(kind, ["logits"])
    with torch.no_grad():
        on_cpu = ours(**batch)
        on_device = {k: v.to(DEVICE) for k, v in batch.items()}
        ours_there, theirs_there = ours.to(DEVICE)(**on_device), theirs.to(DEVICE)(**on_device)
    for name in names:
        there = getattr(ours_there, name)
        assert there.device.type == DEVICE
        torch.testing.assert_close(there.cpu(), getattr(on_cpu, name), atol=1e-4, rtol=1e-4,
                                   msg=lambda m, name=name: f"{name}, {DEVICE} against the CPU: {m}")
        torch.testing.assert_close(there, getattr(theirs_there, name), atol=1e-4, rtol=1e-4,
                                   msg=lambda m, name=name: f"{name}, against transformers on {DEVICE}: {m}")


def test_unpadded_models_on_the_gpu_give_the_real_tokens_what_transformers_gives_them(tmp_path, full_fp32):
    """minibert on the packed real tokens (``unpadded=True``), transformers (sdpa) on the padded batch, on the
    device: the same vectors at every real position, the same pooled [CLS] and sentence logits."""
    hf_config = transformers.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=128, max_position_embeddings=64, num_labels=3,
                                        attn_implementation="sdpa")
    batch = default_collate(sentence_pairs(4, hf_config.vocab_size, 24, seed=2, num_labels=3))
    del batch["labels"]
    batch = {k: v.to(DEVICE) for k, v in batch.items()}
    real = batch["attention_mask"].bool()
    for kind, names in (("BertModel", ["last_hidden_state", "pooler_output"]),
                        ("BertForSequenceClassification", ["logits"])):
        torch.manual_seed(0)
        theirs = getattr(transformers, kind)(hf_config).eval()
        theirs.save_pretrained(tmp_path / kind)
        ours = getattr(minibert, kind).from_pretrained(tmp_path / kind).eval().to(DEVICE)
        with torch.no_grad():
            got, expected = ours(**batch, unpadded=True), theirs.to(DEVICE)(**batch)
        for name in names:
            a, b = getattr(got, name), getattr(expected, name)
            if name == "last_hidden_state":
                a, b = a[real], b[real]
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4,
                                       msg=lambda m, name=name, kind=kind: f"{kind}.{name} unpadded on {DEVICE}: {m}")


# --- number formats and compilation -----------------------------------------------------------------------
def test_bf16_and_fp16_train_like_fp32_on_real_batches(tokenizer, pretraining_data, rehearsing, record_property):
    """50 updates of MLM + NSP on WikiText-2: every loss finite, bf16 within 2% of fp32 at every step, fp16
    over the last ten (its gradient scaler may skip a few updates while it finds its scale)."""
    losses = {}
    for precision in ("fp32", "bf16", "fp16"):
        trainer = pretrainer(tokenizer, pretraining_data, precision=precision)
        if ON_GPU:  # the matrix products left in fp32 use TF32 tensor cores
            assert torch.get_float32_matmul_precision() == "high"
        assert trainer.precision == precision and trainer.scaler.is_enabled() == (precision == "fp16")
        losses[precision] = trainer.fit().series("loss")[1]
        assert all(map(math.isfinite, losses[precision])), f"{precision}: {losses[precision]}"
        record_property(f"{precision}_first_and_last_loss", [losses[precision][0], losses[precision][-1]])
    gaps = {"bf16": max(relative_gaps(losses["bf16"], losses["fp32"])),
            "fp16": max(relative_gaps(losses["fp16"][-10:], losses["fp32"][-10:]))}
    print(f"\nlargest relative gap to fp32: bf16 {gaps['bf16']:.4f} (every step), fp16 {gaps['fp16']:.4f} (last ten)")
    for precision, gap in gaps.items():
        record_property(f"{precision}_largest_gap_to_fp32", gap)
    assert losses["fp32"][-1] < losses["fp32"][0] - 0.5  # it learns (from ~11 nats, uniform over 30k pieces)
    assert gaps["bf16"] < TOLERANCE and gaps["fp16"] < TOLERANCE


def test_compiled_training_gives_the_eager_losses(tokenizer, pretraining_data, rehearsing, record_property):
    """TrainConfig(compile=True), bf16: the same losses within bf16's noise, padded and unpadded; prints what
    compiling cost. Unpadded, the count of real tokens changes with every batch: one graph takes them all."""
    seconds, losses = {}, {}
    for compiled in (False, True):
        trainer = pretrainer(tokenizer, pretraining_data, precision="bf16", max_steps=8, compile=compiled)
        started = time.perf_counter()
        losses[compiled] = trainer.fit().series("loss")[1]
        seconds[compiled] = time.perf_counter() - started
    compile_seconds = seconds[True] - seconds[False]
    print(f"\ntorch.compile: {compile_seconds:.1f} s of compiling (8 steps: {seconds[True]:.1f} s compiled, "
          f"{seconds[False]:.1f} s eager)")
    record_property("compile_seconds", round(compile_seconds, 1))
    assert max(relative_gaps(losses[True], losses[False])) < TOLERANCE, (losses[True], losses[False])
    unpadded = pretrainer(tokenizer, pretraining_data, precision="bf16", max_steps=8, compile=True, unpadded=True)
    unpadded_losses = unpadded.fit().series("loss")[1]
    assert max(relative_gaps(unpadded_losses, losses[False])) < TOLERANCE, (unpadded_losses, losses[False])


# --- exact resumption ---------------------------------------------------------------------------------------
def test_a_resumed_run_equals_an_uninterrupted_one_bit_for_bit(tokenizer, pretraining_data, deterministic, tmp_path):
    """Dropout on, dynamic masking, accumulation, the device's generator in the checkpoint; deterministic kernels."""
    def run(out, resume=False, **settings):
        trainer = pretrainer(tokenizer, pretraining_data, dropout=0.1, max_steps=6, grad_accum_steps=2,
                             batch_size=8, out_dir=str(out), **settings)
        return trainer, trainer.fit(resume=resume)

    straight, straight_history = run(tmp_path / "straight")
    run(tmp_path / "interrupted", time_budget_s=1e-9)  # stops (and saves) after one update
    assert [p.name for p in find_checkpoints(tmp_path / "interrupted")] == ["step-000001"]
    resumed, history = run(tmp_path / "interrupted", resume=True)
    assert history.series("loss") == straight_history.series("loss")
    for name, tensor in straight.model.state_dict().items():
        assert tensor.device.type == DEVICE
        assert torch.equal(tensor, resumed.model.state_dict()[name]), name


# --- no step waits for the GPU ----------------------------------------------------------------------------
def no_waiting(trainer: Trainer, monkeypatch):
    """Make every training step after the first fail if it waits for the GPU: CUDA's sync debug mode; in a
    rehearsal, `host_syncs.DataDependentOps`. Returns the check to make after fit()."""
    if ON_GPU:
        watch_steps_after_the_first(monkeypatch, cuda_sync_errors)
        return lambda: None
    fuse_the_optimizer(trainer)  # the CUDA optimizer
    recorder = record_device_work_of_steps(monkeypatch)

    def check():
        assert recorder.watched and recorder.seen == []
    return check


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_a_pretraining_step_never_waits_for_the_gpu(precision, tokenizer, pretraining_data, rehearsing, monkeypatch):
    """Masked-only decoding with the positions from the host, accumulation, clipping, fused AdamW; in fp16 the
    gradient scaler hands its overflow flag to fused AdamW on the device, so it does not wait either."""
    trainer = pretrainer(tokenizer, pretraining_data, dropout=0.1, precision=precision, max_steps=4,
                         grad_accum_steps=2, batch_size=8, log_every=100)
    check = no_waiting(trainer, monkeypatch)
    trainer.fit()
    check()
    assert trainer.step == 4


def test_an_unpadded_pretraining_step_never_waits_for_the_gpu(tokenizer, pretraining_data, rehearsing, monkeypatch):
    """The real tokens found on the host (`minibert.unpadding.packed_positions`), so N is a size the host knows."""
    trainer = pretrainer(tokenizer, pretraining_data, dropout=0.1, precision="bf16", max_steps=4, grad_accum_steps=2,
                         batch_size=8, log_every=100, unpadded=True)
    check = no_waiting(trainer, monkeypatch)
    trainer.fit()
    check()
    assert trainer.step == 4


def test_a_modernbert_pretraining_step_never_waits_for_the_gpu(tokenizer, pretraining_data, rehearsing, monkeypatch):
    """ModernBERT always unpads: the Trainer hands it the real tokens found on the host, and the masked positions."""
    torch.manual_seed(0)
    model = ModernBertForPreTraining(ModernBertConfig.from_preset(
        "bert-tiny", vocab_size=tokenizer.vocab_size, max_position_embeddings=SEQ, pad_token_id=tokenizer.pad_token_id,
        local_attention=16, embedding_dropout=0.1, attention_dropout=0.1, mlp_dropout=0.1))
    config = TrainConfig(max_steps=4, batch_size=8, grad_accum_steps=2, lr=1e-3, precision="bf16", log_every=100,
                         progress=False)
    trainer = Trainer(model, config, pretraining_data, collate_fn=pretraining_data.collate,
                      model_kwargs={"masked_only": True})
    check = no_waiting(trainer, monkeypatch)
    trainer.fit()
    check()
    assert trainer.step == 4


def test_a_fine_tuning_step_never_waits_for_the_gpu(tokenizer, monkeypatch):
    torch.manual_seed(0)
    model = BertForSequenceClassification(small_config(tokenizer, dropout=0.1).replace(num_labels=3))
    config = TrainConfig(max_steps=4, batch_size=8, lr=1e-4, log_every=100, progress=False)
    trainer = Trainer(model, config, sentence_pairs(64, tokenizer.vocab_size, 24, num_labels=3))
    check = no_waiting(trainer, monkeypatch)
    trainer.fit()
    check()
    assert trainer.precision == AUTO_PRECISION


# --- the GPU, found by itself -----------------------------------------------------------------------------
def test_the_trainer_picks_the_gpu_and_bf16_by_itself(tokenizer, pretraining_data):
    trainer = pretrainer(tokenizer, pretraining_data, max_steps=1)  # TrainConfig's device="auto", precision="auto"
    assert trainer.device.type == DEVICE and trainer.precision == AUTO_PRECISION
    trainer.fit()
    assert all(p.device.type == DEVICE for p in trainer.model.parameters())


def test_minibert_pretrain_and_finetune_run_with_device_auto(tokenizer, tmp_path, capsys):
    """The command line end to end at tiny sizes: pre-training on WikiText-2, fine-tuning a small random BERT
    (with the course's tokenizer) on SQuAD, each on the device it picks itself."""
    pretrain = ["pretrain", "--preset", "bert-tiny", "--tokenizer", str(TOKENIZER), "--objective", "nsp",
                "--corpus", "wikitext2_raw/wiki.valid.raw", "--eval-corpus", "wikitext2_raw/wiki.test.raw",
                "--max-seq-len", "64", "--batch-size", "16", "--steps", "5", "--device", "auto",
                "--out", str(tmp_path / "pretrained")]
    assert cli.main(pretrain) == 0, capsys.readouterr().err
    recipe = json.loads((tmp_path / "pretrained" / "recipe.json").read_text())
    assert recipe["device"].startswith(DEVICE) and recipe["precision"] == AUTO_PRECISION and recipe["step"] == 5
    assert math.isfinite(recipe["final"]["eval_mlm_loss"]) and recipe["unigram_loss"] > 0

    model = tmp_path / "random-bert"
    torch.manual_seed(0)
    minibert.BertModel(small_config(tokenizer).replace(max_position_embeddings=128)).save_pretrained(model)
    tokenizer.save_pretrained(model)
    finetune = ["finetune", "squad", "--model", str(model), "--out", str(tmp_path / "squad"), "--steps", "3",
                "--batch-size", "8", "--max-length", "128", "--train-examples", "24", "--eval-examples", "16",
                "--device", "auto"]
    assert cli.main(finetune) == 0, capsys.readouterr().err
    results = json.loads((tmp_path / "squad" / "results.json").read_text())
    assert results["device"].startswith(DEVICE) and results["precision"] == AUTO_PRECISION and results["steps"] == 3
    assert 0 <= results["metrics"]["f1"] <= 100
