"""Parity with transformers, the reference nobody here wrote (as minGPT checks its logits against GPT-2).

Random-initialised transformers models of two sizes are saved and loaded into minibert (and the
other way round); every output of every head must agree within 1e-5 in fp32, with padding and two
segments in the batch. The real pretrained MiniLM weights from the Hub cache are checked too.
"""
import pytest
import torch
import transformers
from offline import MINILM

import minibert

CONFIGS = {
    "small": dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=128, max_position_embeddings=64),
    "odd": dict(vocab_size=503, hidden_size=96, num_hidden_layers=3, num_attention_heads=6,
                intermediate_size=200, max_position_embeddings=40, type_vocab_size=2, hidden_act="gelu_new",
                layer_norm_eps=1e-7, num_labels=3),
}
HEADS = ["BertModel", "BertForPreTraining", "BertForMaskedLM", "BertForSequenceClassification",
         "BertForQuestionAnswering", "BertForTokenClassification"]
ATOL = 1e-5


def make_batch(vocab_size, seed=0):
    """Two sequences of different length (so one is padded), each a sentence pair A [SEP] B."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab_size, (2, 17), generator=g)
    types = torch.zeros_like(ids)
    types[:, 9:] = 1
    mask = torch.ones_like(ids)
    mask[1, 12:] = 0
    ids[1, 12:] = 0
    types[1, 12:] = 0
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


def output_tensors(out, kind):
    """The tensors to compare, by the names both libraries use."""
    names = {"BertModel": ["last_hidden_state", "pooler_output"],
             "BertForPreTraining": ["prediction_logits", "seq_relationship_logits"],
             "BertForQuestionAnswering": ["start_logits", "end_logits"]}.get(kind, ["logits"])
    tensors = {n: getattr(out, n) for n in names}
    tensors.update({f"attentions[{i}]": a for i, a in enumerate(out.attentions)})
    tensors.update({f"hidden_states[{i}]": h for i, h in enumerate(out.hidden_states)})
    return tensors


def assert_close(ours, theirs, mask=None):
    assert ours.keys() == theirs.keys()
    for name in ours:
        a, b = ours[name], theirs[name]
        assert a.shape == b.shape, name
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0, msg=lambda m, name=name: f"{name}: {m}")


@pytest.fixture(params=list(CONFIGS))
def hf_config(request):
    return transformers.BertConfig(**CONFIGS[request.param], attn_implementation="eager")


@pytest.mark.parametrize("kind", HEADS)
def test_transformers_checkpoint_loads_in_minibert(kind, hf_config, tmp_path):
    torch.manual_seed(0)
    if kind == "BertForQuestionAnswering":
        hf_config.num_labels = 2  # transformers sizes qa_outputs by num_labels; a span needs start + end
    theirs = getattr(transformers, kind)(hf_config).eval()
    theirs.save_pretrained(tmp_path)
    ours = getattr(minibert, kind).from_pretrained(tmp_path)
    assert ours.loading_info["missing_keys"] == []
    batch = make_batch(hf_config.vocab_size)
    with torch.no_grad():
        a = ours(**batch, output_attentions=True, output_hidden_states=True)
        b = theirs(**batch, output_attentions=True, output_hidden_states=True)
    assert_close(output_tensors(a, kind), output_tensors(b, kind))


@pytest.mark.parametrize("kind", HEADS)
def test_minibert_checkpoint_loads_in_transformers(kind, hf_config, tmp_path):
    torch.manual_seed(1)
    config = minibert.BertConfig(**CONFIGS["small" if hf_config.hidden_size == 64 else "odd"])
    if kind == "BertForQuestionAnswering":
        config = config.replace(num_labels=2)
    ours = getattr(minibert, kind)(config).eval()
    ours.save_pretrained(tmp_path)
    theirs, info = getattr(transformers, kind).from_pretrained(
        tmp_path, attn_implementation="eager", output_loading_info=True)
    assert info["missing_keys"] == set() or not info["missing_keys"]
    assert not info["unexpected_keys"] and not info["mismatched_keys"]
    batch = make_batch(config.vocab_size, seed=1)
    with torch.no_grad():
        a = ours(**batch, output_attentions=True, output_hidden_states=True)
        b = theirs.eval()(**batch, output_attentions=True, output_hidden_states=True)
    assert_close(output_tensors(a, kind), output_tensors(b, kind))


def test_losses_match_transformers(tmp_path):
    """Loss definitions too: MLM with -100 ignored + NSP; classification; QA spans; tagging."""
    hf_config = transformers.BertConfig(**CONFIGS["small"], attn_implementation="eager")
    batch = make_batch(hf_config.vocab_size, seed=2)
    B, T = batch["input_ids"].shape
    g = torch.Generator().manual_seed(3)
    mlm_labels = torch.full((B, T), -100)
    mlm_labels[:, 3] = batch["input_ids"][:, 3]
    mlm_labels[0, 7] = 11
    labels = {
        "BertForPreTraining": dict(labels=mlm_labels, next_sentence_label=torch.tensor([0, 1])),
        "BertForMaskedLM": dict(labels=mlm_labels),
        "BertForSequenceClassification": dict(labels=torch.tensor([1, 0])),
        "BertForTokenClassification": dict(labels=torch.randint(0, 2, (B, T), generator=g).masked_fill(
            batch["attention_mask"] == 0, -100)),
        "BertForQuestionAnswering": dict(start_positions=torch.tensor([2, 40]), end_positions=torch.tensor([5, 3])),
    }
    for kind, extra in labels.items():
        torch.manual_seed(0)
        theirs = getattr(transformers, kind)(hf_config).eval()
        theirs.save_pretrained(tmp_path / kind)
        ours = getattr(minibert, kind).from_pretrained(tmp_path / kind)
        with torch.no_grad():
            torch.testing.assert_close(ours(**batch, **extra).loss, theirs(**batch, **extra).loss,
                                       atol=ATOL, rtol=0, msg=lambda m, kind=kind: f"{kind}: {m}")


@pytest.mark.parametrize("kind", ["BertModel", "BertForPreTraining", "BertForMaskedLM"])
def test_position_ids_are_read_as_transformers_reads_them(kind, tmp_path):
    """Sequences placed further along the position table (a pre-training recipe's random offsets)."""
    torch.manual_seed(0)
    theirs = getattr(transformers, kind)(transformers.BertConfig(**CONFIGS["odd"], attn_implementation="eager")).eval()
    theirs.save_pretrained(tmp_path)
    ours = getattr(minibert, kind).from_pretrained(tmp_path).eval()
    batch = make_batch(CONFIGS["odd"]["vocab_size"], seed=4)
    positions = torch.tensor([[3], [20]]) + torch.arange(17)  # (2, 1) + (17,) -> (2, 17): up to 36 of 40 positions
    with torch.no_grad():
        a, b = ours(**batch, position_ids=positions), theirs(**batch, position_ids=positions)
        default = ours(**batch)
    first = {"BertModel": "last_hidden_state", "BertForPreTraining": "prediction_logits"}.get(kind, "logits")
    torch.testing.assert_close(getattr(a, first), getattr(b, first), atol=ATOL, rtol=0)
    assert not torch.allclose(getattr(a, first), getattr(default, first), atol=1e-3)  # the offsets are read
    with pytest.raises(ValueError, match="position_ids must be in"):
        ours(**batch, position_ids=positions + 10)


def test_fast_and_explicit_attention_agree():
    """The fused scaled_dot_product_attention path equals softmax(QKᵀ/√d)V written out, padding included."""
    torch.manual_seed(0)
    model = minibert.BertModel(minibert.BertConfig(**CONFIGS["odd"])).eval()
    batch = make_batch(503)
    with torch.no_grad():
        fast = model(**batch)
        explicit = model(**batch, output_attentions=True)
    torch.testing.assert_close(fast.last_hidden_state, explicit.last_hidden_state, atol=ATOL, rtol=0)
    torch.testing.assert_close(fast.pooler_output, explicit.pooler_output, atol=ATOL, rtol=0)
    # padded keys get no attention; each row is a distribution
    probs = explicit.attentions[0]
    assert probs[1, :, :, 12:].abs().max() == 0
    torch.testing.assert_close(probs.sum(-1), torch.ones_like(probs.sum(-1)))


def test_real_pretrained_weights_match_transformers():
    """The real MiniLM weights (6 layers, 12 heads, H=384) through the ordinary Hub code path."""
    ours = minibert.BertModel.from_pretrained(MINILM)
    theirs = transformers.BertModel.from_pretrained(MINILM, attn_implementation="eager").eval()
    assert ours.config.num_hidden_layers == 6 and ours.config.hidden_size == 384
    tok = transformers.BertTokenizerFast.from_pretrained(MINILM)
    batch = dict(tok(["the cat sat on the mat", "my dog is cute"], ["it was tired", "he likes playing"],
                     padding=True, return_tensors="pt"))
    batch["attention_mask"][1, -1] = 0  # an extra padded position
    with torch.no_grad():
        a = ours(**batch, output_attentions=True, output_hidden_states=True)
        b = theirs(**batch, output_attentions=True, output_hidden_states=True)
    assert_close(output_tensors(a, "BertModel"), output_tensors(b, "BertModel"))


def test_task_model_from_bare_encoder_reports_new_head(caplog):
    """Like transformers: the classifier is freshly initialised and said so; the encoder is loaded."""
    with caplog.at_level("WARNING", logger="minibert"):
        model = minibert.BertForSequenceClassification.from_pretrained(MINILM, num_labels=3)
    assert set(model.loading_info["missing_keys"]) == {"classifier.weight", "classifier.bias"}
    assert "newly initialised" in caplog.text and "classifier.weight" in caplog.text
    encoder = minibert.BertModel.from_pretrained(MINILM)
    torch.testing.assert_close(model.bert.encoder.layer[5].output.dense.weight,
                               encoder.encoder.layer[5].output.dense.weight)
    assert model.classifier.out_features == 3


def test_unused_checkpoint_weights_are_reported(tmp_path, caplog):
    """A pre-training checkpoint loaded as a bare BertModel: the encoder loads, the heads are named."""
    minibert.BertForPreTraining(minibert.BertConfig(**CONFIGS["small"])).save_pretrained(tmp_path)
    with caplog.at_level("WARNING", logger="minibert"):
        model = minibert.BertModel.from_pretrained(tmp_path)
    assert model.loading_info["missing_keys"] == []
    assert sorted(model.loading_info["unexpected_keys"]) == [
        "cls.predictions.bias", "cls.predictions.transform.LayerNorm.bias",
        "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.dense.bias",
        "cls.predictions.transform.dense.weight", "cls.seq_relationship.bias", "cls.seq_relationship.weight"]
    assert "not used by this model" in caplog.text and "cls.seq_relationship.weight" in caplog.text


@pytest.mark.parametrize("task, names", [("sst2", ["negative", "positive"]),
                                         ("snli", ["entailment", "neutral", "contradiction"])])
def test_a_task_model_carries_its_class_names_to_transformers(task, names, tmp_path):
    """id2label/label2id in config.json: transformers' pipelines say "positive", not LABEL_1."""
    from minibert.tasks import get_task

    encoder = minibert.BertModel(minibert.BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=64))
    encoder.save_pretrained(tmp_path / "encoder")
    model = get_task(task).new_model(str(tmp_path / "encoder"))
    model.save_pretrained(tmp_path / task)
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / task)
    assert theirs.config.id2label == dict(enumerate(names))
    assert theirs.config.label2id == {name: i for i, name in enumerate(names)}
    assert type(model).from_pretrained(tmp_path / task).config.id2label == dict(enumerate(names))
    # A head of another size (config_overrides' num_labels): the old names go with the old head.
    assert minibert.BertConfig.load(tmp_path / task / "config.json").replace(num_labels=5).id2label is None


@pytest.mark.parametrize("broken", [{"0": "negative"}, {"zero": "a", "one": "b"}, ["negative", "positive"]])
def test_a_config_with_wrong_class_names_is_refused(broken, tmp_path):
    config = minibert.BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=64).to_dict()
    with pytest.raises(ValueError, match="id2label"):
        minibert.BertConfig.from_dict({**config, "num_labels": 2, "id2label": broken})
