"""The model's own promises: the paper's sizes, config validation, and clear errors on bad input."""
import json

import pytest
import torch

import minibert
from minibert import BertConfig, BertModel
from minibert.model import check_inputs


@pytest.mark.parametrize("preset, count", [("bert-base", 109_482_240), ("bert-large", 335_141_888)])
def test_paper_parameter_counts(preset, count):
    """BASE 110M and LARGE 340M (Devlin et al. §3), counted exactly as transformers counts them."""
    with torch.device("meta"):  # sizes only: no memory, no initialisation time
        model = BertModel(BertConfig.from_preset(preset))
    assert model.num_parameters() == count


@pytest.mark.parametrize("preset, sizes", [("bert-tiny", (2, 128, 2)), ("bert-mini", (4, 256, 4)),
                                           ("bert-small", (4, 512, 8)), ("bert-medium", (8, 512, 8))])
def test_small_presets_follow_turc_et_al(preset, sizes):
    c = BertConfig.from_preset(preset)
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads) == sizes
    assert c.intermediate_size == 4 * c.hidden_size and c.head_dim == c.hidden_size // c.num_attention_heads


def test_tied_decoder_counted_once():
    cfg = BertConfig.from_preset("bert-tiny", vocab_size=1000)
    mlm = minibert.BertForMaskedLM(cfg)
    assert mlm.cls.predictions.decoder.weight is mlm.bert.embeddings.word_embeddings.weight
    base = BertModel(cfg, add_pooling_layer=False).num_parameters()
    head = cfg.hidden_size * cfg.hidden_size + cfg.hidden_size + 2 * cfg.hidden_size + cfg.vocab_size
    assert mlm.num_parameters() == base + head


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown preset 'bert-huge'.*bert-tiny.*bert-large"):
        BertConfig.from_preset("bert-huge")


@pytest.mark.parametrize("kwargs, message", [
    (dict(hidden_size=100, num_attention_heads=12), r"hidden_size \(100\) is not divisible by num_attention_heads \(12\)"),
    (dict(num_hidden_layers=0), "num_hidden_layers must be a positive integer"),
    (dict(vocab_size=-5), "vocab_size must be a positive integer"),
    (dict(hidden_dropout_prob=1.5), r"hidden_dropout_prob must be a number in \[0, 1\)"),
    (dict(hidden_dropout_prob="0.1"), r"hidden_dropout_prob must be a number in \[0, 1\), got '0.1'"),
    (dict(classifier_dropout=float("nan")), r"classifier_dropout must be a number in \[0, 1\), got nan"),
    (dict(share_layers="yes"), "share_layers must be true or false, got 'yes'"),
    (dict(pre_layer_norm=1), "pre_layer_norm must be true or false, got 1"),
    (dict(initializer_range=-0.02), "initializer_range must be a small positive number"),
    (dict(num_hidden_layers=900, hidden_size=2048, intermediate_size=8192, num_attention_heads=16),
     r"about [\d,]+ billion parameters .*num_hidden_layers \(900\)"),
    (dict(num_hidden_layers=1_000_000, hidden_size=8, num_attention_heads=1, intermediate_size=8),
     r"num_hidden_layers 1,000,000 is more than 1,000 \(BERT-base has 12, BERT-large 24\)"),
    (dict(vocab_size=10**11), r"about [\d,]+ billion parameters .*check vocab_size \(100000000000\)"),
    (dict(hidden_act="tanhh"), "hidden_act 'tanhh' is not supported"),
    (dict(pad_token_id=40000), "pad_token_id 40000 is outside the vocabulary"),
])
def test_inconsistent_config_names_the_problem(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BertConfig(**kwargs)


def test_config_json_round_trip_keeps_unknown_hub_fields_out(tmp_path):
    cfg = BertConfig.from_preset("bert-mini", num_labels=5)
    cfg.save(tmp_path / "config.json")
    data = json.loads((tmp_path / "config.json").read_text())
    assert data["model_type"] == "bert" and data["hidden_size"] == 256
    data.update(torch_dtype="float32", label2id={"a": 0}, gradient_checkpointing=False)
    assert BertConfig.from_dict(data) == cfg
    with pytest.raises(ValueError, match="model_type 'roberta'"):
        BertConfig.from_dict({**data, "model_type": "roberta"})


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return BertModel(BertConfig.from_preset("bert-tiny", vocab_size=100, max_position_embeddings=16)).eval()


def test_too_long_sequence_says_to_truncate(tiny):
    with pytest.raises(ValueError, match=r"sequence length 17 is longer than max_position_embeddings=16.*truncation=True"):
        tiny(torch.ones(1, 17, dtype=torch.long))


@pytest.mark.parametrize("bad_id", [100, 5000, -1])
def test_token_ids_outside_vocabulary(tiny, bad_id):
    ids = torch.tensor([[1, 2, bad_id, 3]])
    with pytest.raises(ValueError, match=rf"token ids \[{bad_id}\] are outside the vocabulary \[0, 100\)"):
        tiny(ids)


def test_mismatched_shapes(tiny):
    ids = torch.ones(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"attention_mask has shape \(2, 4\) but input_ids has \(2, 5\)"):
        tiny(ids, attention_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match=r"token_type_ids has shape \(5,\)"):
        tiny(ids, token_type_ids=torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"token_type_ids must be in \[0, 2\)"):
        tiny(ids, token_type_ids=torch.full((2, 5), 2))


def test_wrong_rank_and_dtype(tiny):
    with pytest.raises(ValueError, match=r"shape \(batch, seq_len\), got \(5,\).*unsqueeze\(0\)"):
        tiny(torch.ones(5, dtype=torch.long))
    with pytest.raises(TypeError, match="integer token ids, got dtype torch.float32"):
        tiny(torch.ones(1, 5))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        tiny([[1, 2, 3]])


def test_padding_does_not_change_the_real_tokens(tiny):
    """A padded sequence gives the same vectors at its real positions as the unpadded one."""
    ids = torch.tensor([[5, 6, 7, 8]])
    padded = torch.tensor([[5, 6, 7, 8, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    with torch.no_grad():
        a = tiny(ids).last_hidden_state
        b = tiny(padded, attention_mask=mask).last_hidden_state[:, :4]
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a checkpoint directory: it needs config.json and one of"):
        BertModel.from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="'./no/such/dir' is not a checkpoint directory, nor a model id"):
        BertModel.from_pretrained("./no/such/dir")
    with pytest.raises(OSError, match="'nobody/no-such-bert' is not in the local Hugging Face cache"):
        BertModel.from_pretrained("nobody/no-such-bert")


def test_shape_mismatch_and_missing_encoder_weights_are_listed(tmp_path):
    small = BertModel(BertConfig.from_preset("bert-tiny", vocab_size=100))
    small.save_pretrained(tmp_path / "a")
    with pytest.raises(ValueError, match=r"shape mismatch embeddings.word_embeddings.weight: checkpoint \(100, 128\) vs model \(200, 128\)"):
        BertModel.from_pretrained(tmp_path / "a", vocab_size=200)
    with pytest.raises(ValueError, match=r"missing encoder.layer.2.attention.self.query.weight"):
        BertModel.from_pretrained(tmp_path / "a", num_hidden_layers=3)
    # fewer layers than the checkpoint holds: not a head it lacks, and not a warning
    with pytest.raises(ValueError, match=r"holds 2 encoder layers, and its config \(or your overrides\) 1: "
                                         r"loading would silently drop layers 1 to 1"):
        BertModel.from_pretrained(tmp_path / "a", num_hidden_layers=1)


def test_weights_that_are_not_finite_are_refused(tmp_path):
    from safetensors.torch import load_file, save_file
    BertModel(BertConfig.from_preset("bert-tiny", vocab_size=100)).save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    weights["encoder.layer.1.output.dense.weight"][3, 4] = float("nan")
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"model.safetensors holds values that are not finite numbers \(NaN or inf\) "
                                         r"in encoder.layer.1.output.dense.weight: the file is damaged"):
        BertModel.from_pretrained(tmp_path)


def test_pytorch_bin_is_read_without_unpickling_code(tmp_path):
    model = BertModel(BertConfig.from_preset("bert-tiny", vocab_size=100))
    model.config.save(tmp_path / "config.json")
    torch.save({f"bert.{k}": v for k, v in model.state_dict().items()}, tmp_path / "pytorch_model.bin")
    loaded = BertModel.from_pretrained(tmp_path)
    torch.testing.assert_close(loaded.state_dict(), model.state_dict())

    class Payload:  # an object whose unpickling would run code
        def __reduce__(self):
            return (print, ("pwned",))
    torch.save({"x": Payload()}, tmp_path / "pytorch_model.bin")
    with pytest.raises(Exception, match="Weights only load failed"):
        BertModel.from_pretrained(tmp_path)


def test_save_pretrained_is_atomic(tmp_path, monkeypatch):
    """A crash while writing leaves the previous checkpoint intact and no temp files behind."""
    model = BertModel(BertConfig.from_preset("bert-tiny", vocab_size=100))
    model.save_pretrained(tmp_path)
    before = (tmp_path / "model.safetensors").read_bytes()

    def crash(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr("minibert.hub.save_file", crash)
    with pytest.raises(KeyboardInterrupt):
        BertModel(BertConfig.from_preset("bert-tiny", vocab_size=100)).save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]


@pytest.mark.parametrize("kind", ["BertForPreTraining", "BertForMaskedLM"])
def test_mlm_decoder_at_masked_positions_only_gives_the_same_loss_and_gradients(kind):
    """masked_only=True scores only the masked positions; loss and gradients equal the full (B, T, V) computation."""
    torch.manual_seed(0)
    cfg = BertConfig.from_preset("bert-tiny", vocab_size=300)
    model = getattr(minibert, kind)(cfg).eval()  # no dropout: both calls compute the same function
    ids = torch.randint(5, 300, (3, 12))
    labels = torch.full_like(ids, -100)
    labels[0, [1, 4]] = ids[0, [1, 4]]
    labels[2, 7] = 17
    extra = {"next_sentence_label": torch.tensor([0, 1, 0])} if kind == "BertForPreTraining" else {}
    full_name = "prediction_logits" if kind == "BertForPreTraining" else "logits"

    def loss_and_grads(masked_only):
        model.zero_grad()
        out = model(ids, labels=labels, masked_only=masked_only, **extra)
        out.loss.backward()
        return out, {n: p.grad.clone() for n, p in model.named_parameters()}

    sparse, sparse_grads = loss_and_grads(True)
    full, full_grads = loss_and_grads(False)
    assert getattr(sparse, full_name) is None and full.masked_logits is None
    assert sparse.masked_logits.shape == (3, cfg.vocab_size)  # only the 3 masked positions were decoded
    torch.testing.assert_close(sparse.masked_logits, getattr(full, full_name)[labels != -100])
    torch.testing.assert_close(sparse.loss, full.loss)
    for name in full_grads:
        torch.testing.assert_close(sparse_grads[name], full_grads[name], msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("kind", ["BertForPreTraining", "BertForMaskedLM"])
def test_mlm_logits_have_one_shape_in_training_and_evaluation(kind):
    """By default the scores are (B, T, V) in both modes, as in transformers; masked_only needs labels."""
    model = getattr(minibert, kind)(BertConfig.from_preset("bert-tiny", vocab_size=50))
    ids, labels = torch.randint(5, 50, (2, 6)), torch.full((2, 6), -100)
    labels[0, 2] = 7
    for training in (True, False):
        out = model.train(training)(ids, labels=labels)
        assert (out.prediction_logits if kind == "BertForPreTraining" else out.logits).shape == (2, 6, 50)
    with pytest.raises(ValueError, match="masked_only=True needs labels"):
        model(ids, masked_only=True)


def test_value_checks_read_cpu_tensors_only(monkeypatch):
    """Shapes are checked always; ids against the vocabulary only where reading them costs no device sync."""
    config = BertConfig.from_preset("bert-tiny", vocab_size=100)
    check_inputs(config, torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match=r"token ids \[100\] are outside the vocabulary"):
        check_inputs(config, torch.tensor([[1, 100]]))
    with torch.device("meta"):  # a tensor off the CPU: its values are not read
        check_inputs(config, torch.full((1, 2), 100))
        with pytest.raises(ValueError, match="attention_mask has shape"):
            check_inputs(config, torch.ones(1, 2, dtype=torch.long), attention_mask=torch.ones(1, 3))


@pytest.mark.parametrize("pre_layer_norm", [False, True])
def test_a_layer_computes_what_torch_transformer_encoder_layer_computes(pre_layer_norm):
    """BERT's post-LN block and the pre-LN option, against PyTorch's own encoder layer (norm_first)."""
    from minibert.attention import padding_mask
    from minibert.model import BertLayer

    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, layer_norm_eps=1e-5,
                        pre_layer_norm=pre_layer_norm)
    torch.manual_seed(0)
    ours = BertLayer(config).eval()
    for norm in (ours.attention.output.LayerNorm, ours.output.LayerNorm):  # not the identity they start as
        torch.nn.init.normal_(norm.weight, 1.0, 0.3), torch.nn.init.normal_(norm.bias, 0.0, 0.3)
    theirs = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", layer_norm_eps=1e-5,
                                              batch_first=True, norm_first=pre_layer_norm).eval()
    attention = ours.attention.self
    with torch.no_grad():
        theirs.self_attn.in_proj_weight.copy_(torch.cat([attention.query.weight, attention.key.weight,
                                                         attention.value.weight]))
        theirs.self_attn.in_proj_bias.copy_(torch.cat([attention.query.bias, attention.key.bias, attention.value.bias]))
        for mine, torchs in [(ours.attention.output.dense, theirs.self_attn.out_proj), (ours.intermediate.dense,
                             theirs.linear1), (ours.output.dense, theirs.linear2),
                             (ours.attention.output.LayerNorm, theirs.norm1), (ours.output.LayerNorm, theirs.norm2)]:
            torchs.weight.copy_(mine.weight), torchs.bias.copy_(mine.bias)
    x = torch.randn(2, 7, 32)
    attention_mask = torch.ones(2, 7, dtype=torch.long)
    attention_mask[1, 5:] = 0
    with torch.no_grad():
        expected = theirs(x, src_key_padding_mask=attention_mask == 0)
        got, _ = ours(x, padding_mask(attention_mask))
    real = attention_mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=1e-5)


def test_pre_ln_model_closes_with_a_layer_norm_and_round_trips(tmp_path):
    config = BertConfig.from_preset("bert-tiny", vocab_size=100, pre_layer_norm=True)
    torch.manual_seed(0)
    model = minibert.BertForMaskedLM(config).eval()
    assert "bert.encoder.final_layer_norm.weight" in model.state_dict()
    assert "bert.encoder.final_layer_norm.weight" not in minibert.BertForMaskedLM(config.replace(pre_layer_norm=False)).state_dict()
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["pre_layer_norm"] is True
    loaded = minibert.BertForMaskedLM.from_pretrained(tmp_path)
    ids = torch.randint(5, 100, (2, 9))
    assert loaded.config.pre_layer_norm and torch.equal(loaded(ids).logits, model(ids).logits)
    hidden = loaded.bert(ids, output_hidden_states=True)
    torch.testing.assert_close(hidden.hidden_states[-1], hidden.last_hidden_state)


def test_a_row_of_padding_only_gives_the_same_vectors_on_both_attention_paths():
    """output_attentions switches from torch's fused attention to the explicit softmax; a sequence that is
    all padding (a batch's filler row) must not depend on which one ran."""
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64)).eval()
    ids, mask = torch.tensor([[5, 6, 7], [8, 9, 10]]), torch.tensor([[1, 1, 0], [0, 0, 0]])
    with torch.no_grad():
        fused = model(input_ids=ids, attention_mask=mask).last_hidden_state
        explicit = model(input_ids=ids, attention_mask=mask, output_attentions=True).last_hidden_state
    torch.testing.assert_close(fused, explicit)
    assert torch.isfinite(fused).all()


def test_ids_on_the_meta_device_are_refused():
    model = BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=64))
    with pytest.raises(ValueError, match="meta device"):
        model(input_ids=torch.tensor([[5, 6]], device="meta"))
