"""ModernBERT against transformers' implementation, the reference nobody here wrote: checkpoints move both
ways and compute the same numbers, on padded batches longer than the local window, with configs chosen to
catch what a BERT-shaped mind gets wrong (head counts that are not powers of two, windows much shorter than
the text, both layer types, biases on and off). Also: the Hub-id path through an offline cache, and the
configs and folders that must be refused, with a message saying why."""
import json
import shutil

import pytest
import torch
from offline import one_torch_thread
from safetensors.torch import load_file, save_file

from minibert import (
    BertConfig,
    BertForMaskedLM,
    ModernBertConfig,
    ModernBertForMaskedLM,
    ModernBertForSequenceClassification,
    ModernBertModel,
)
from minibert.modernbert.config import GLOBAL, LOCAL
from minibert.unpadding import Packing, pad, unpad

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

TOLERANCE = 1e-4  # fp32, eval mode
COMMON = dict(vocab_size=97, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2,
              global_rope_theta=500.0, local_rope_theta=50.0)  # small bases: positions 40-70 apart turn far
CONFIGS = {  # head sizes 32, 24 and 12; windows of 8, 16 and 9 tokens on texts of 31 to 70
    "H96-3heads-window8": dict(hidden_size=96, num_attention_heads=3, num_hidden_layers=4, intermediate_size=80,
                               local_attention=8, global_attn_every_n_layers=2),
    "H120-5heads-window16-biases": dict(hidden_size=120, num_attention_heads=5, num_hidden_layers=5,
                                        intermediate_size=72, local_attention=16, global_attn_every_n_layers=3,
                                        norm_bias=True, attention_bias=True, mlp_bias=True, classifier_bias=True),
    # an odd window, as transformers accepts it (4 tokens each side): 6 heads of 12, global every fourth layer
    "H72-6heads-window9": dict(hidden_size=72, num_attention_heads=6, num_hidden_layers=5, intermediate_size=40,
                               local_attention=9, global_attn_every_n_layers=4),
}
LENGTHS = [70, 41, 57, 31]  # one batch, padded on the right to 70


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with one_torch_thread():
        yield


def batch(lengths=LENGTHS, seed=0):
    """Random token ids (first token [CLS]), padded with pad_token_id 0, and the (B, T) attention_mask."""
    g = torch.Generator().manual_seed(seed)
    T = max(lengths)
    mask = (torch.arange(T) < torch.tensor(lengths)[:, None]).long()  # (B, T)
    ids = torch.randint(3, COMMON["vocab_size"], (len(lengths), T), generator=g)
    ids[:, 0] = COMMON["cls_token_id"]
    return ids * mask, mask


def scramble(model, seed=0):
    """Weights far from the initialisation's tiny ones, so every part (norm gains and biases included) moves
    the output; a parity test on near-zero weights would pass for many wrong models."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            p.copy_(1 + 0.1 * noise if "norm.weight" in name else 0.15 * noise)
    return model.eval()


def transformers_model(kind, name, **extra):
    config = transformers.ModernBertConfig(**COMMON, **CONFIGS[name], **extra)
    return scramble(getattr(transformers, kind)(config))


def differences(ours, theirs, mask):
    """Max |a - b| at the real tokens' positions (padding positions hold zeros here, leftovers there)."""
    real = mask.bool()
    return max((a - b)[real].abs().max().item() for a, b in zip(ours, theirs))


@pytest.mark.parametrize("name", CONFIGS)
def test_a_transformers_checkpoint_loads_and_gives_the_same_numbers(name, tmp_path):
    reference = transformers_model("ModernBertForMaskedLM", name)
    reference.save_pretrained(tmp_path)
    model = ModernBertForMaskedLM.from_pretrained(tmp_path)
    assert model.loading_info == {"missing_keys": [], "unexpected_keys": []}
    assert model.decoder.weight is model.model.embeddings.tok_embeddings.weight  # tied, as stored: once
    ids, mask = batch()
    with torch.no_grad():
        theirs = reference(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        ours = model(ids, mask, output_hidden_states=True)
    assert len(ours.hidden_states) == len(theirs.hidden_states) == CONFIGS[name]["num_hidden_layers"] + 1
    hidden = differences(ours.hidden_states, theirs.hidden_states, mask)
    logits = differences([ours.logits], [theirs.logits], mask)
    print(f"\n{name}: transformers -> minibert, max |diff| hidden states {hidden:.2e}, logits {logits:.2e}")
    assert hidden < TOLERANCE and logits < TOLERANCE
    assert theirs.logits[mask.bool()].std() > 0.5  # numbers worth comparing
    assert (ours.hidden_states[-1][~mask.bool()] == 0).all()  # padding computed nothing: zeros
    wrong_window = ModernBertForMaskedLM.from_pretrained(tmp_path, local_attention=2 * CONFIGS[name]["local_attention"])
    with torch.no_grad():
        assert differences([wrong_window(ids, mask).logits], [theirs.logits], mask) > 100 * TOLERANCE  # it would show


@pytest.mark.parametrize("name", CONFIGS)
def test_a_minibert_checkpoint_loads_in_transformers_as_a_modernbert(name, tmp_path):
    model = scramble(ModernBertForMaskedLM(ModernBertConfig(**COMMON, **CONFIGS[name])))
    model.save_pretrained(tmp_path)
    reference = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert type(reference).__name__ == "ModernBertForMaskedLM"
    assert reference.config.layer_types == model.config.layer_types
    ids, mask = batch(seed=1)
    with torch.no_grad():
        theirs = reference(input_ids=ids, attention_mask=mask)
        ours = model(ids, mask)
    logits = differences([ours.logits], [theirs.logits], mask)
    print(f"\n{name}: minibert -> transformers, max |diff| logits {logits:.2e}")
    assert logits < TOLERANCE


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("name", CONFIGS)
def test_the_sequence_classifier_agrees_both_ways(name, pooling, tmp_path):
    reference = transformers_model("ModernBertForSequenceClassification", name, classifier_pooling=pooling,
                                   num_labels=3)
    reference.save_pretrained(tmp_path / "theirs")
    model = ModernBertForSequenceClassification.from_pretrained(tmp_path / "theirs")
    assert model.config.classifier_pooling == pooling and model.loading_info["missing_keys"] == []
    scramble(model, seed=1)  # new weights, to go back the other way
    model.save_pretrained(tmp_path / "ours")
    back = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "ours").eval()
    assert type(back).__name__ == "ModernBertForSequenceClassification" and back.config.num_labels == 3
    ids, mask = batch(seed=2)
    with torch.no_grad():
        there = (ModernBertForSequenceClassification.from_pretrained(tmp_path / "theirs")(ids, mask).logits,
                 reference(input_ids=ids, attention_mask=mask).logits)
        back_again = model(ids, mask).logits, back(input_ids=ids, attention_mask=mask).logits
    forward, backward = ((a - b).abs().max().item() for a, b in (there, back_again))
    print(f"\n{name} {pooling}: classifier logits max |diff| transformers -> minibert {forward:.2e}, "
          f"minibert -> transformers {backward:.2e}")
    assert forward < TOLERANCE and backward < TOLERANCE
    assert (there[0] - back_again[0]).abs().max() > 0.1  # the two directions compared two different models


def test_attention_probabilities_match_transformers_eager_attention(tmp_path):
    """Where each query looks: the sliding window and the padding, head by head, in every layer."""
    name = "H96-3heads-window8"
    transformers_model("ModernBertForMaskedLM", name).save_pretrained(tmp_path)
    reference = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    model = ModernBertForMaskedLM.from_pretrained(tmp_path)
    ids, mask = batch()
    with torch.no_grad():
        theirs = reference(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
        ours = model(ids, mask, output_attentions=True)
    real = mask.bool()
    pairs = real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T): real query, real key
    gap = max((a - b).abs().masked_select(pairs).max().item() for a, b in zip(ours.attentions, theirs))
    print(f"\nattention probabilities max |diff| {gap:.2e}")
    assert gap < TOLERANCE
    local = ours.attentions[1][0, :, 30]  # layer 1 is local (window 8): query 30 sees keys 26..34 only
    assert local[:, 26:35].sum(-1).allclose(torch.ones(3)) and (local[:, :26] == 0).all() and (local[:, 35:] == 0).all()
    assert (ours.attentions[0][0, :, 30, :26] > 0).all()  # layer 0 is global
    with torch.no_grad():
        assert (ours.logits - model(ids, mask).logits).abs().max() < TOLERANCE  # written out = the fused kernel


def test_padding_changes_nothing_and_costs_nothing():
    """Each text gives the same vectors alone as in a padded batch, and the layers' projections see the batch's
    real tokens only: (N, H) with N = sum of lengths, not B × T."""
    model = scramble(ModernBertModel(ModernBertConfig(**COMMON, **CONFIGS["H120-5heads-window16-biases"])))
    ids, mask = batch()
    seen = []
    model.layers[2].attn.Wqkv.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].shape))
    with torch.no_grad():
        together = model(ids, mask).last_hidden_state
        alone = [model(ids[i:i + 1, :n]).last_hidden_state[0] for i, n in enumerate(LENGTHS)]
    assert seen[0] == (sum(LENGTHS), 120)
    assert max((together[i, :n] - a).abs().max().item() for i, (n, a) in enumerate(zip(LENGTHS, alone))) < 1e-5


def test_a_training_step_on_a_padded_batch_has_finite_gradients_everywhere():
    """With dropout on and padding queries that have no real key in their local window (they attend to
    themselves): a backward pass through every layer, head and pooling, and nothing but finite numbers."""
    config = ModernBertConfig(**COMMON, **CONFIGS["H96-3heads-window8"], attention_dropout=0.1, mlp_dropout=0.1,
                              embedding_dropout=0.1, classifier_pooling="mean", num_labels=3)
    model = scramble(ModernBertForSequenceClassification(config)).train()
    ids, mask = batch()
    model(ids, mask, labels=torch.tensor([0, 1, 2, 1])).loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    assert all(g is not None and g.isfinite().all() for g in grads.values())
    assert grads["model.layers.3.attn.Wqkv.weight"].abs().sum() > 0


def test_changing_the_depth_re_derives_the_every_n_layer_types():
    config = ModernBertConfig(**COMMON, **CONFIGS["H96-3heads-window8"])
    assert config.replace(num_hidden_layers=5).layer_types == [GLOBAL, LOCAL, GLOBAL, LOCAL, GLOBAL]
    custom = config.replace(layer_types=[LOCAL, GLOBAL, GLOBAL, LOCAL])
    with pytest.raises(ValueError, match="layer_types must list .* num_hidden_layers=5"):
        custom.replace(num_hidden_layers=5)  # a pattern no rule describes is not guessed


def test_packing_round_trip_and_sequence_offsets():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    packing = Packing.of(mask)
    assert packing.indices.tolist() == [0, 1, 2, 4, 8, 9, 10, 11]
    assert packing.cu_seqlens.tolist() == [0, 3, 4, 8] and packing.positions.tolist() == [0, 1, 2, 0, 0, 1, 2, 3]
    x = torch.randn(3, 4, 5)
    back = pad(unpad(x, packing), packing)
    assert torch.equal(back[mask.bool()], x[mask.bool()]) and (back[~mask.bool()] == 0).all()


def test_sparse_prediction_decodes_the_masked_positions_only(tmp_path):
    model = scramble(ModernBertForMaskedLM(ModernBertConfig(**COMMON, **CONFIGS["H96-3heads-window8"])))
    ids, mask = batch()
    labels = torch.full_like(ids, -100)
    labels[0, 5], labels[1, 40], labels[3, 2] = 7, 8, 9
    with torch.no_grad():
        dense = model(ids, mask, labels=labels)
        model.config.sparse_prediction = True
        sparse = model(ids, mask, labels=labels)
    assert sparse.logits is None and sparse.masked_logits.shape == (3, 97)
    assert torch.allclose(sparse.masked_logits, dense.logits[labels != -100], atol=1e-5)
    assert abs(sparse.loss.item() - dense.loss.item()) < 1e-5


def test_a_hub_id_resolves_through_the_offline_cache(tmp_path, monkeypatch):
    """``from_pretrained("answerdotai/ModernBERT-base")`` takes BERT's road: minibert.hub.resolve, the HF_HOME
    cache, offline. The cache is made here, in the Hub's layout, holding a tiny transformers-made model."""
    from huggingface_hub import constants
    reference = transformers_model("ModernBertForMaskedLM", "H96-3heads-window8")
    reference.save_pretrained(tmp_path / "made")
    repo = tmp_path / "hf-home" / "hub" / "models--answerdotai--ModernBERT-base"
    commit = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(tmp_path / "made", repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-home" / "hub"))  # read at import time
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    model = ModernBertForMaskedLM.from_pretrained("answerdotai/ModernBERT-base")
    ids, mask = batch()
    with torch.no_grad():
        gap = differences([model(ids, mask).logits], [reference(input_ids=ids, attention_mask=mask).logits], mask)
    assert gap < TOLERANCE
    with pytest.raises(OSError, match="'answerdotai/ModernBERT-large' is not in the local Hugging Face cache"):
        ModernBertForMaskedLM.from_pretrained("answerdotai/ModernBERT-large")


@pytest.mark.parametrize("change, message", [
    (dict(hidden_size=100, num_attention_heads=3), r"hidden_size \(100\) is not divisible by num_attention_heads \(3\)"),
    (dict(local_attention=0), r"local_attention must be a positive number of tokens .*got 0"),
    (dict(hidden_size=60, num_attention_heads=4), r"head size .* = 15 is odd"),
    (dict(layer_types=[GLOBAL, LOCAL]), r"layer_types must list .* num_hidden_layers=4"),
    (dict(layer_types=[GLOBAL, "local", LOCAL, GLOBAL]), r"layer_types .*'local'"),
    (dict(classifier_pooling="max"), r"classifier_pooling must be 'cls' or 'mean', got 'max'"),
    (dict(attention_dropout=1.5), r"attention_dropout must be a number in \[0, 1\), got 1.5"),
    (dict(norm_bias="yes"), r"norm_bias must be true or false, got 'yes'"),
    (dict(hidden_activation="gelu_fast"), r"hidden_activation 'gelu_fast' is not supported"),
])
def test_a_bad_config_is_refused_naming_the_value(change, message):
    with pytest.raises(ValueError, match=message):
        ModernBertConfig(**{**COMMON, **CONFIGS["H96-3heads-window8"], **change})


def test_both_config_generations_read_alike_and_minibert_writes_both():
    old = dict(model_type="modernbert", **COMMON, **{**CONFIGS["H96-3heads-window8"], "num_hidden_layers": 5})
    new = {**old, "layer_types": [GLOBAL, LOCAL, GLOBAL, LOCAL, GLOBAL], "global_rope_theta": 1.0,
           "rope_parameters": {GLOBAL: {"rope_type": "default", "rope_theta": 500.0},
                               LOCAL: {"rope_type": "default", "rope_theta": 50.0}}}
    assert ModernBertConfig.from_dict(old) == ModernBertConfig.from_dict(new)  # rope_parameters over the old key
    written = ModernBertConfig.from_dict(new).to_dict()
    assert written["global_attn_every_n_layers"] == 2 and written["global_rope_theta"] == 500.0
    assert ModernBertConfig.from_dict(written) == ModernBertConfig.from_dict(new)
    odd = ModernBertConfig.from_dict({**new, "layer_types": [GLOBAL, LOCAL, LOCAL, GLOBAL, GLOBAL]}).to_dict()
    assert "global_attn_every_n_layers" not in odd  # no n says this: only layer_types speaks
    theirs = transformers.ModernBertConfig(**{k: v for k, v in odd.items() if k != "model_type"})
    assert theirs.layer_types == odd["layer_types"] and theirs.rope_parameters[LOCAL]["rope_theta"] == 50.0
    with pytest.raises(ValueError, match="rope_type 'yarn'"):
        ModernBertConfig.from_dict({**new, "rope_parameters": {GLOBAL: {"rope_type": "yarn", "rope_theta": 1.0}}})
    base = ModernBertConfig.from_preset("answerdotai/ModernBERT-base")
    assert 148e6 < base.approximate_parameters() < 150e6  # the paper's 149 M
    assert base.layer_types[:4] == [GLOBAL, LOCAL, LOCAL, GLOBAL] and base.local_attention == 128


def test_a_bert_folder_and_a_modernbert_folder_each_name_the_class_to_use(tmp_path):
    BertForMaskedLM(BertConfig(vocab_size=97, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64)).save_pretrained(tmp_path / "bert")
    ModernBertForMaskedLM(ModernBertConfig(**COMMON, **CONFIGS["H96-3heads-window8"])).save_pretrained(tmp_path / "modern")
    with pytest.raises(ValueError, match="model_type 'bert'.*a BERT: load it with minibert.BertForMaskedLM"):
        ModernBertForMaskedLM.from_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match="model_type 'modernbert'.*load it with minibert.ModernBertForMaskedLM"):
        BertForMaskedLM.from_pretrained(tmp_path / "modern")


def test_a_folder_missing_a_tensor_is_refused_naming_it(tmp_path):
    transformers_model("ModernBertForMaskedLM", "H96-3heads-window8").save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    state = load_file(weights)
    del state["model.layers.1.attn.Wqkv.weight"]
    save_file(state, weights, metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"does not fit ModernBertForMaskedLM(.|\n)*missing model\.layers\.1\.attn\.Wqkv"
                                         r"\.weight(.|\n)*Is it a ModernBERT checkpoint of this size"):
        ModernBertForMaskedLM.from_pretrained(tmp_path)


def test_int8_weights_load_back_in_minibert_and_a_bare_encoder_reads_a_task_checkpoint(tmp_path):
    """The int8 folder computes exactly what the model does with its weights rounded to int8 (minibert.hub)."""
    from minibert.hub import dequantize_int8, quantize_int8
    model = scramble(ModernBertForMaskedLM(ModernBertConfig(**COMMON, **CONFIGS["H96-3heads-window8"])))
    model.save_pretrained(tmp_path, int8_weights=True)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "minibert"  # transformers refuses it
    rounded = dequantize_int8(quantize_int8(model.state_dict()))
    model.load_state_dict(rounded)
    ids, mask = batch()
    with torch.no_grad():
        gap = differences([ModernBertForMaskedLM.from_pretrained(tmp_path)(ids, mask).logits],
                          [model(ids, mask).logits], mask)
        encoder = ModernBertModel.from_pretrained(tmp_path)
        same = differences([encoder(ids, mask).last_hidden_state], [model.model(ids, mask).last_hidden_state], mask)
    assert gap < TOLERANCE and same < TOLERANCE
    assert encoder.loading_info["missing_keys"] == []
