"""A training step that never waits for the GPU, checked on the CPU: nothing in it reads a tensor's
values on the host (`host_syncs.DataDependentOps`), so on a GPU the host queues step after step.
tests/test_gpu.py checks the same on CUDA with ``torch.cuda.set_sync_debug_mode("error")``."""
import pytest
import torch
from host_syncs import fuse_the_optimizer, record_device_work_of_steps, sentence_pairs
from offline import one_torch_thread
from torch.utils.data import default_collate

import minibert.training.trainer
from minibert import BertConfig, BertForMaskedLM, BertForPreTraining, BertForSequenceClassification
from minibert.heads import masked_lm_positions
from minibert.modernbert import ModernBertConfig, ModernBertForPreTraining, ModernBertForSequenceClassification
from minibert.training import TrainConfig, Trainer, evaluate

VOCAB, MASK, T = 60, 4, 12


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with one_torch_thread():
        yield


def tiny(model_class, dropout=0.1):
    config = BertConfig.from_preset("bert-tiny", vocab_size=VOCAB, max_position_embeddings=32, hidden_size=32,
                                    num_attention_heads=2, intermediate_size=64, hidden_dropout_prob=dropout,
                                    attention_probs_dropout_prob=dropout)
    return model_class(config)


def tiny_modern(model_class, dropout=0.1):
    """ModernBERT, which always runs on the real tokens only (`minibert.unpadding`): 3 layers, one global."""
    config = ModernBertConfig.from_preset("bert-tiny", vocab_size=VOCAB, max_position_embeddings=32, hidden_size=32,
                                          num_attention_heads=2, intermediate_size=64, num_hidden_layers=3,
                                          local_attention=4, pad_token_id=0, embedding_dropout=dropout,
                                          attention_dropout=dropout, mlp_dropout=dropout)
    return model_class(config)


def pairs(n, seed=0):
    return sentence_pairs(n, VOCAB, T, seed, cls_id=2, sep_id=3)


def mlm_collate(examples):
    """Dynamic masking: 15% of the real tokens, drawn anew in every batch from torch's generator."""
    batch = default_collate(examples)
    ids, real = batch["input_ids"], batch["attention_mask"].bool()
    chosen = (torch.rand(ids.shape) < 0.15) & real
    chosen[:, 1] = True  # never a batch without a blank
    return {"input_ids": ids.masked_fill(chosen, MASK), "attention_mask": batch["attention_mask"],
            "token_type_ids": batch["token_type_ids"], "labels": ids.masked_fill(~chosen, -100),
            "next_sentence_label": batch["labels"]}


def four_steps(model, precision, collate_fn, **kwargs):
    """A Trainer of four updates of two micro-batches each, with the optimizer it takes on CUDA."""
    config = TrainConfig(max_steps=4, batch_size=4, grad_accum_steps=2, precision=precision, device="cpu",
                         log_every=100, progress=False)
    trainer = Trainer(model, config, pairs(32), collate_fn=collate_fn, **kwargs)
    fuse_the_optimizer(trainer)
    return trainer


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_a_pretraining_step_reads_no_value_on_the_host(precision, monkeypatch):
    """MLM + NSP with masked-only decoding, dropout, accumulation and clipping; fp16 with its gradient scaler."""
    if precision == "fp16":  # a CUDA option (pick_precision refuses it on a CPU); torch runs the scaler here too
        monkeypatch.setattr(minibert.training.trainer, "pick_precision", lambda choice, device: "fp16")
    trainer = four_steps(tiny(BertForPreTraining), precision, mlm_collate, model_kwargs={"masked_only": True})
    recorder = record_device_work_of_steps(monkeypatch)
    trainer.fit()
    assert trainer.step == 4 and trainer.scaler.is_enabled() == (precision == "fp16")
    assert recorder.watched > 500  # three steps' forward, backward and update were looked at
    assert recorder.seen == []


def test_a_fine_tuning_step_reads_no_value_on_the_host(monkeypatch):
    trainer = four_steps(tiny(BertForSequenceClassification), "fp32", default_collate)
    recorder = record_device_work_of_steps(monkeypatch)
    trainer.fit()
    assert recorder.watched > 500 and recorder.seen == []


def test_an_unpadded_pretraining_step_reads_no_value_on_the_host(monkeypatch):
    """Unpadded (`minibert.unpadding`): the real tokens are found on the host too, so N is a size the host knows."""
    trainer = four_steps(tiny(BertForPreTraining), "bf16", mlm_collate,
                         model_kwargs={"masked_only": True, "unpadded": True})
    recorder = record_device_work_of_steps(monkeypatch)
    trainer.fit()
    assert trainer.step == 4 and recorder.watched > 500 and recorder.seen == []


@pytest.mark.parametrize("kind", [ModernBertForPreTraining, ModernBertForSequenceClassification],
                         ids=["pre-training", "fine-tuning"])
def test_a_modernbert_step_reads_no_value_on_the_host(kind, monkeypatch):
    """ModernBERT unpads always: the Trainer hands it the real tokens found on the host, as it does BERT
    when asked for ``unpadded``, and the masked positions for masked-only decoding."""
    pretraining = kind is ModernBertForPreTraining
    trainer = four_steps(tiny_modern(kind), "bf16", mlm_collate if pretraining else default_collate,
                         model_kwargs={"masked_only": True} if pretraining else None)
    recorder = record_device_work_of_steps(monkeypatch)
    trainer.fit()
    assert trainer.step == 4 and recorder.watched > 500 and recorder.seen == []


@pytest.mark.parametrize("kind, collate, kwargs, finds", [
    (tiny(BertForPreTraining), mlm_collate, {"masked_only": True}, 1),   # the head would find the masked tokens
    (tiny(BertForSequenceClassification), default_collate, {"unpadded": True}, 1),  # the encoder the real tokens
    (tiny_modern(ModernBertForPreTraining), mlm_collate, {"masked_only": True}, 2),  # ModernBERT both
], ids=["masked positions", "real tokens", "modernbert"])
def test_positions_found_on_the_device_would_make_every_step_wait(kind, collate, kwargs, finds, monkeypatch):
    """What the Trainer's host-side positions save: without them the model finds them itself."""
    monkeypatch.setattr(minibert.training.trainer, "with_host_positions", lambda collate, model, kwargs: collate)
    trainer = four_steps(kind, "fp32", collate, model_kwargs=kwargs)
    recorder = record_device_work_of_steps(monkeypatch)
    trainer.fit()
    assert recorder.seen == ["aten.nonzero.default"] * 6 * finds  # per micro-batch: 3 steps of 2


@pytest.mark.parametrize("kind", [BertForPreTraining, BertForMaskedLM])
def test_masked_positions_from_the_host_give_the_same_logits_loss_and_gradients(kind):
    """Flat row-major indices into the B·T tokens: the order `pretraining_metrics` reads the logits in."""
    batch = mlm_collate(pairs(4))
    if kind is BertForMaskedLM:
        del batch["next_sentence_label"]
    positions = masked_lm_positions(batch["labels"])
    assert positions.tolist() == [i for i, y in enumerate(batch["labels"].flatten().tolist()) if y != -100]
    torch.manual_seed(0)
    model = tiny(kind).eval()

    def run(**kwargs):
        model.zero_grad()
        out = model(**batch, **kwargs)
        out.loss.backward()
        return out, [p.grad.clone() for p in model.parameters()]

    (here, here_grads), (host, host_grads) = run(masked_only=True), run(masked_positions=positions)
    assert torch.equal(host.masked_logits, here.masked_logits) and torch.equal(host.loss, here.loss)
    assert all(torch.equal(a, b) for a, b in zip(host_grads, here_grads))
    full = model(**batch)
    scores = full.prediction_logits if kind is BertForPreTraining else full.logits
    torch.testing.assert_close(host.masked_logits, scores[batch["labels"] != -100])


def test_the_trainer_and_evaluate_give_positions_only_to_models_that_take_them():
    seen = []

    class Recorder(torch.nn.Module):
        def __init__(self, takes_positions):
            super().__init__()
            self.model = tiny(BertForPreTraining)
            self.forward = self.with_positions if takes_positions else self.without

        def with_positions(self, masked_positions=None, **batch):
            seen.append(masked_positions)
            return self.model(**batch, masked_positions=masked_positions)

        def without(self, **batch):
            seen.append(None)
            return self.model(**batch)

    data = pairs(8)
    for takes_positions in (True, False):
        evaluate(Recorder(takes_positions), data, batch_size=4, collate_fn=mlm_collate,
                 model_kwargs={"masked_only": True})
    assert [s is not None for s in seen] == [True, True, False, False]
    assert all(s.dtype == torch.long and s.dim() == 1 for s in seen[:2])
