"""BERT unpadded (`minibert.unpadding`, ``unpadded`` / ``packed_positions``): the encoder runs on the batch's
real tokens only and gives the real tokens the vectors transformers' padded BERT gives them, and the same loss
and gradients as minibert's padded run (tests/test_no_sync.py: found on the host, the real tokens cost a training
step no wait for the GPU)."""
import tempfile

import pytest
import torch
import torch.nn.functional as F
import transformers
from host_syncs import sentence_pairs
from offline import one_torch_thread
from test_no_sync import mlm_collate, pairs, tiny
from torch.utils.data import default_collate

from minibert import (
    BertConfig,
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    TrainConfig,
    Trainer,
)
from minibert.modernbert import ModernBertConfig, ModernBertModel
from minibert.unpadding import packed_positions

VOCAB, T = 60, 16  # the vocabulary of test_no_sync's `mlm_collate`


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with one_torch_thread():
        yield


def batch_with_padding(seed=0, n=5):
    """Pairs of random lengths padded to T, one of them a lone [CLS] [SEP] [SEP] (the shortest there is)."""
    batch = default_collate(sentence_pairs(n, VOCAB, T, seed, cls_id=2, sep_id=3))
    batch["input_ids"][-1, 3:], batch["attention_mask"][-1, 3:], batch["token_type_ids"][-1, 3:] = 0, 0, 0
    del batch["labels"]
    return batch


CONFIGS = {  # BERT, and the variants the course builds from the same layer
    "post-LN (BERT)": {},
    "pre-LN": {"pre_layer_norm": True},
    "ALBERT (shared layers, E < H)": {"share_layers": True, "embedding_size": 16},
    "left to right (decoder)": {"is_decoder": True},
}


def config(**changes):
    return BertConfig.from_preset("bert-tiny", vocab_size=VOCAB, max_position_embeddings=T, hidden_size=32,
                                  num_attention_heads=4, intermediate_size=64, num_hidden_layers=3, **changes)


def test_the_real_tokens_get_the_vectors_transformers_gives_them_padded():
    """transformers' BertModel (sdpa) on the padded batch, minibert on the packed real tokens, same weights."""
    torch.manual_seed(0)
    cfg = config()
    theirs = transformers.BertModel(transformers.BertConfig(**{k: v for k, v in cfg.to_dict().items()
                                                               if k != "architectures"}, attn_implementation="sdpa"))
    with tempfile.TemporaryDirectory() as folder:
        theirs.save_pretrained(folder)
        ours = BertModel.from_pretrained(folder)
    batch = batch_with_padding()
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        expected = theirs.eval()(**batch)
        got = ours.eval()(**batch, unpadded=True)
    torch.testing.assert_close(got.last_hidden_state[real], expected.last_hidden_state[real], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got.pooler_output, expected.pooler_output, atol=1e-5, rtol=1e-4)
    assert got.last_hidden_state[~real].abs().max() == 0  # padding rows are not computed: zeros, not vectors


@pytest.mark.parametrize("changes", CONFIGS.values(), ids=CONFIGS.keys())
def test_unpadded_gives_the_padded_loss_gradients_and_states(changes):
    torch.manual_seed(0)
    model = BertForPreTraining(config(**changes)).eval()
    batch = mlm_collate(sentence_pairs(6, VOCAB, T, seed=1, cls_id=2, sep_id=3))
    real = batch["attention_mask"].bool()

    def run(**kwargs):
        model.zero_grad()
        out = model(**batch, output_hidden_states=True, **kwargs)
        out.loss.backward()
        return out, [p.grad.clone() for p in model.parameters()]

    (padded, padded_grads), (packed, packed_grads) = run(), run(unpadded=True, masked_only=True)
    torch.testing.assert_close(packed.loss, padded.loss)
    torch.testing.assert_close(packed.masked_logits, padded.prediction_logits[batch["labels"] != -100])
    torch.testing.assert_close(packed.seq_relationship_logits, padded.seq_relationship_logits)
    for got, expected in zip(packed.hidden_states, padded.hidden_states, strict=True):
        torch.testing.assert_close(got[real], expected[real])
    for got, expected in zip(packed_grads, padded_grads, strict=True):
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-4)
    # the positions found on the host are the ones the model would find itself
    host, _ = run(packed_positions=packed_positions(batch["attention_mask"]), masked_only=True)
    assert torch.equal(host.loss, packed.loss)


def with_labels(kind, batch):
    """``batch`` with the labels ``kind`` trains on; multiple choice reads it as two questions of choices."""
    real, g = batch["attention_mask"].bool(), torch.Generator().manual_seed(3)
    B = real.size(0)
    if kind is BertForMaskedLM:
        batch["labels"] = batch["input_ids"].masked_fill(~real, -100)
    elif kind is BertForTokenClassification:
        batch["labels"] = torch.randint(0, 2, real.shape, generator=g).masked_fill(~real, -100)
    elif kind is BertForQuestionAnswering:  # spans among each text's real tokens
        lengths = real.sum(1)
        batch["start_positions"] = (torch.rand(B, generator=g) * lengths).long()
        batch["end_positions"] = torch.minimum(batch["start_positions"] + 2, lengths - 1)
    elif kind is BertForMultipleChoice:  # (B, T) -> (2, B / 2, T): two questions, B / 2 choices each
        batch = {k: v.view(2, B // 2, -1) for k, v in batch.items()}
        batch["labels"] = torch.tensor([0, 1])
    else:
        batch["labels"] = torch.randint(0, 2, (B,), generator=g)
    return batch


PER_TOKEN = (BertForMaskedLM, BertForTokenClassification)


@pytest.mark.parametrize("kind", [BertForMaskedLM, BertForSequenceClassification, BertForTokenClassification,
                                  BertForQuestionAnswering, BertForMultipleChoice], ids=lambda kind: kind.__name__)
def test_the_other_models_that_take_it_give_the_padded_results(kind):
    """Every BERT task model: the padded run's loss, and its scores wherever a score is read (each real token's,
    each text's, each choice's; a span is only looked for among real tokens)."""
    torch.manual_seed(0)
    model = kind(config(num_labels=2)).eval()
    batch = with_labels(kind, batch_with_padding(seed=2, n=6))
    real = batch["attention_mask"].bool()
    padded, packed = model(**batch), model(**batch, unpadded=True)
    host = model(**batch, packed_positions=packed_positions(batch["attention_mask"]))
    assert torch.equal(host.loss, packed.loss)
    if kind is BertForQuestionAnswering:  # unpadded, the padding is no candidate: the softmax is over real tokens
        expected = sum(F.cross_entropy(getattr(padded, name).masked_fill(~real, -torch.inf), batch[f"{side}_positions"])
                       for name, side in (("start_logits", "start"), ("end_logits", "end"))) / 2
        torch.testing.assert_close(packed.loss, expected)
        assert padded.loss > expected  # padded, as in transformers, the padding's positions compete too
        for name in ("start_logits", "end_logits"):
            torch.testing.assert_close(getattr(packed, name)[real], getattr(padded, name)[real])
            assert getattr(packed, name)[~real].max() == torch.finfo(torch.float32).min
        return
    torch.testing.assert_close(packed.loss, padded.loss)
    if kind in PER_TOKEN:
        torch.testing.assert_close(packed.logits[real], padded.logits[real])
    else:
        torch.testing.assert_close(packed.logits, padded.logits)


def test_unpadded_needs_the_attention_mask():
    model = BertModel(config()).eval()
    with pytest.raises(ValueError, match="attention_mask"):
        model(batch_with_padding()["input_ids"], unpadded=True)


@pytest.mark.parametrize("model_class", [BertModel, ModernBertModel])
def test_positions_that_are_not_the_real_tokens_are_refused_with_what_to_do(model_class):
    """Packed positions are the mask's real tokens or garbage (padding mixed into the layers, a token left out):
    on the CPU, where reading them is free, anything else is refused."""
    batch = batch_with_padding()
    mask = batch["attention_mask"]
    model = model_class(config() if model_class is BertModel else ModernBertConfig.from_preset(
        "bert-tiny", vocab_size=VOCAB, max_position_embeddings=T, pad_token_id=0)).eval()
    real = packed_positions(mask)
    shifted = real.clone()
    shifted[-1] = int((mask.flatten() == 0).nonzero()[0])  # a padding position in place of a real token
    for positions, error, message in [(real.int(), TypeError, "1-D tensor of longs, got a 1-D tensor of torch.int32"),
                                      (real[None], TypeError, "got a 2-D tensor"),
                                      ([0, 1], TypeError, "got list"),
                                      (real[:-1], ValueError, r"packed_positions \(\d+ of them\) are not the real"),
                                      (shifted, ValueError, "minibert.unpadding.packed_positions"),
                                      (real + 10_000, ValueError, "not the real tokens")]:
        with pytest.raises(error, match=message):
            model(batch["input_ids"], attention_mask=mask, packed_positions=positions)
    model(batch["input_ids"], attention_mask=mask, packed_positions=real)  # the right ones pass


def test_training_unpadded_follows_the_padded_run():
    """Eight updates without dropout: the same losses, step by step, as the padded run."""
    def losses(**model_kwargs):
        torch.manual_seed(0)
        model = tiny(BertForPreTraining, dropout=0.0)
        cfg = TrainConfig(max_steps=8, batch_size=8, lr=1e-3, warmup_steps=0, device="cpu", log_every=1,
                          progress=False, seed=0)
        trainer = Trainer(model, cfg, pairs(64), collate_fn=mlm_collate, model_kwargs=model_kwargs)
        trainer.fit()
        return trainer.history.series("loss")[1]

    padded, packed = losses(masked_only=True), losses(masked_only=True, unpadded=True)
    assert len(padded) == 8
    torch.testing.assert_close(torch.tensor(packed), torch.tensor(padded), atol=1e-5, rtol=1e-5)
    assert padded[-1] < padded[0]  # it learned something, so the comparison covers updates, not one forward


def test_compiled_training_compiles_once_for_every_batch_length_and_token_count(monkeypatch):
    """Batches of other lengths (T), real tokens (N) and masked tokens: torch.compile's graphs take them all
    after one recompile with dynamic sizes, not one recompile per batch shape (each costs seconds on a GPU).
    The backend here is "eager": what recompiles is decided before any backend runs."""
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kwargs: compile_(model, backend="eager", **kwargs))
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    examples = [{k: v[:length] for k, v in example.items() if k != "labels"} | {"labels": example["labels"]}
                for length, example in zip([12, 10, 7, 11, 8, 9] * 4, pairs(24))]

    def collate(batch):  # padded to the batch's longest pair: T changes from batch to batch
        longest = max(len(e["input_ids"]) for e in batch)
        padded = [{k: torch.nn.functional.pad(v, (0, longest - len(v))) if k != "labels" else v
                   for k, v in e.items()} for e in batch]
        return mlm_collate(padded)

    model = tiny(BertForPreTraining, dropout=0.0)
    config = TrainConfig(max_steps=6, batch_size=4, lr=1e-3, device="cpu", compile=True, progress=False, log_every=100)
    Trainer(model, config, examples, collate_fn=collate, model_kwargs={"masked_only": True, "unpadded": True}).fit()
    lengths = {len(e["input_ids"]) for e in examples}
    assert len(lengths) == 6
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert 1 <= frames <= 4, f"{frames} graphs for 6 batches"  # forward graphs, before and after dynamic sizes
    torch._dynamo.reset()
