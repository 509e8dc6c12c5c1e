"""int8 storage (minibert.hub): each weight within half a step of its row's scale, a quarter of the
file size, the model computing as with those rounded weights, a damaged file refused; and, with
transformers as the client, such a folder (or one whose config goes beyond BERT's) refused rather than
computed wrongly, and ``minibert export`` converting it into one that transformers reads."""
import pytest
import torch
from safetensors.torch import load_file, save_file

from minibert import BertConfig, BertForMaskedLM
from minibert.cli import main
from minibert.hub import INT8_SCALE_SUFFIX, INT8_WEIGHTS, dequantize_int8, quantize_int8


def small_model():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64)
    return BertForMaskedLM(config).eval()


def test_every_weight_is_within_half_a_step_of_its_row():
    torch.manual_seed(0)
    w = torch.randn(300, 64) * torch.logspace(-3, 1, 300)[:, None]  # rows of very different sizes
    stored = quantize_int8({"w.weight": w, "w.bias": torch.randn(300), "ids": torch.arange(3)})
    assert stored["w.weight"].dtype == torch.int8 and stored["w.bias"].dtype == torch.float16
    assert torch.equal(stored["ids"], torch.arange(3))
    scale = stored["w.weight" + INT8_SCALE_SUFFIX]
    back = dequantize_int8(stored)
    assert set(back) == {"w.weight", "w.bias", "ids"} and back["w.weight"].dtype == torch.float32
    error = (back["w.weight"] - w).abs()
    assert (error <= scale[:, None] / 2 * (1 + 1e-5)).all()
    # One scale per row keeps the small rows: one scale per tensor would round most of them to zero.
    assert (back["w.weight"][:50] != 0).float().mean() > 0.9


def test_a_model_saved_in_int8_is_a_quarter_of_the_size_and_computes_with_the_rounded_weights(tmp_path):
    model = small_model()
    model.save_pretrained(tmp_path / "fp32")
    model.save_pretrained(tmp_path / "int8", int8_weights=True)
    sizes = [(tmp_path / d / f).stat().st_size for d, f in (("fp32", "model.safetensors"), ("int8", INT8_WEIGHTS))]
    assert sizes[1] < 0.3 * sizes[0]
    loaded = BertForMaskedLM.from_pretrained(tmp_path / "int8")
    rounded = BertForMaskedLM(model.config).eval()
    rounded.load_state_dict(dequantize_int8(quantize_int8(model.state_dict())))
    ids = torch.randint(5, 1000, (2, 20))
    torch.testing.assert_close(loaded(ids).logits, rounded(ids).logits, atol=0, rtol=0)
    original = model(ids).logits
    assert (loaded(ids).logits - original).abs().max() < 0.05 * original.abs().max()
    assert (loaded(ids).logits.argmax(-1) == original.argmax(-1)).float().mean() > 0.9


def test_a_damaged_int8_file_is_refused_with_what_to_do(tmp_path):
    model = small_model()
    model.save_pretrained(tmp_path, int8_weights=True)
    state = load_file(tmp_path / INT8_WEIGHTS)
    name = next(k for k in state if k.endswith(INT8_SCALE_SUFFIX))
    state[name] = state[name][:-1]  # one scale short
    save_file(state, tmp_path / INT8_WEIGHTS)
    with pytest.raises(ValueError, match="damaged: download or export it again"):
        BertForMaskedLM.from_pretrained(tmp_path)


def test_saving_in_the_other_format_replaces_the_weights_file(tmp_path):
    model = small_model()
    model.save_pretrained(tmp_path, int8_weights=True)
    model.save_pretrained(tmp_path)
    assert not (tmp_path / INT8_WEIGHTS).exists() and (tmp_path / "model.safetensors").exists()
    model.save_pretrained(tmp_path, int8_weights=True)
    assert (tmp_path / INT8_WEIGHTS).exists() and not (tmp_path / "model.safetensors").exists()


@pytest.mark.parametrize("kind", ["int8", "pre-LN"])
def test_transformers_refuses_what_it_would_compute_wrongly(tmp_path, kind):
    transformers = pytest.importorskip("transformers")
    if kind == "int8":
        small_model().save_pretrained(tmp_path, int8_weights=True)
    else:
        torch.manual_seed(0)
        BertForMaskedLM(small_model().config.replace(pre_layer_norm=True)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="model type `minibert`"):
        transformers.AutoModelForMaskedLM.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="model type `minibert`"):
        transformers.AutoConfig.from_pretrained(tmp_path)
    if kind == "int8":  # and its BERT class, which skips the model type check, finds no weights
        with pytest.raises(OSError, match="no file named model.safetensors"):
            transformers.BertForMaskedLM.from_pretrained(tmp_path)
    assert BertForMaskedLM.from_pretrained(tmp_path) is not None  # minibert reads both


def test_minibert_export_converts_an_int8_folder_into_one_transformers_reads(tmp_path, tokenizer):
    transformers = pytest.importorskip("transformers")
    model = small_model()
    model.save_pretrained(tmp_path / "int8", int8_weights=True)
    (tmp_path / "int8" / "README.md").write_text("# a card\n")
    tokenizer.save_pretrained(tmp_path / "int8")
    assert main(["export", str(tmp_path / "int8"), "--out", str(tmp_path / "fp32"), "--dtype", "fp32"]) == 0
    converted = tmp_path / "fp32"
    assert transformers.AutoTokenizer.from_pretrained(converted).get_vocab() == tokenizer.get_vocab()
    card = (converted / "README.md").read_text()
    assert card.startswith("# a card") and "--dtype fp32" in card and "(minibert or transformers)" in card
    theirs = transformers.BertForMaskedLM.from_pretrained(converted).eval()
    ids = torch.randint(5, 1000, (2, 20))
    with torch.no_grad():
        torch.testing.assert_close(theirs(ids).logits, BertForMaskedLM.from_pretrained(tmp_path / "int8")(ids).logits)
    assert main(["export", str(converted), "--out", str(converted)]) == 2  # never onto itself
