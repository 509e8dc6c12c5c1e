"""The lecture diagrams: labels come from the real config, every text is readable when shown, nothing collides.

A notebook shows a figure at 100 pixels per inch in a column about 1000 pixels wide, so a diagram must
be at most 10 inches wide (or it is shrunk, text and all) and its text at least 10 pt.
"""
import io
import math
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from minibert import BertConfig  # noqa: E402
from minibert.model import BertLayer  # noqa: E402
from minibert.viz.architecture_diagrams import (  # noqa: E402
    count,
    multihead_stages,
    plot_encoder_block,
    plot_multihead_split,
    plot_pretraining_heads,
)
from minibert.viz.diagrams import (  # noqa: E402
    displayed_size_in,
    drawn_texts,
    overlapping_texts,
    plot_figure3,
    plot_figure4,
    smallest_font_pt,
)
from minibert.viz.figure1 import figure1_counts, plot_figure1  # noqa: E402
from minibert.viz.transformer_family import plot_encoder_decoder  # noqa: E402

PRESETS = ["bert-tiny", "bert-base"]
DIAGRAMS = {
    "encoder block": plot_encoder_block,
    "encoder block, pre-LN": lambda preset: plot_encoder_block(BertConfig.from_preset(preset, pre_layer_norm=True)),
    "multi-head split": plot_multihead_split,
    "pre-training heads": plot_pretraining_heads,
    "figure 4": lambda preset: plot_figure4(),
    "figure 3": lambda preset: plot_figure3(),
    "figure 1": plot_figure1,
    "encoder-decoder": lambda preset: plot_encoder_decoder(),
}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def shown(fig) -> str:
    """Every text the figure draws, in one string to search."""
    return "\n".join(t.text for t in drawn_texts(fig))


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", DIAGRAMS)
def test_every_diagram_is_readable_when_shown_in_a_notebook(name, preset):
    fig = DIAGRAMS[name](preset)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a glyph missing from the font would be drawn as a box
        fig.savefig(io.BytesIO(), format="png", dpi=100, bbox_inches="tight")
    assert fig.get_size_inches()[0] <= 10
    assert displayed_size_in(fig)[0] <= 10, "text sticks out of the figure, so the notebook shows it wider"
    assert smallest_font_pt(fig) >= 10
    assert smallest_font_pt(fig, column_width_in=10) >= 10
    assert overlapping_texts(fig) == []
    plt.close(fig)
    assert fig.number not in plt.get_fignums()


@pytest.mark.parametrize("preset", PRESETS)
def test_encoder_block_shows_the_layer_the_config_builds(preset):
    c = BertConfig.from_preset(preset)
    H, inner, A, d, L = c.hidden_size, c.intermediate_size, c.num_attention_heads, c.head_dim, c.num_hidden_layers
    text = shown(plot_encoder_block(preset))
    for label in (f"{A} heads × d_head {d}", f"Q, K, V: {H} → {H}", f"W₁ {H} → {inner}, GELU",
                  f"W₂ {inner} → {H}", f"(B, T, {inner})", f"× {L}", "post-LN"):
        assert label in text
    assert text.count(f"Add & LayerNorm({H})") == 2
    # 4 H×H projections with biases, W₁ and W₂ with biases, two LayerNorms (weight and bias)
    per_layer = 4 * (H * H + H) + 2 * H * inner + inner + H + 4 * H
    with torch.device("meta"):
        assert per_layer == sum(p.numel() for p in BertLayer(c).parameters())
    assert f"the whole layer · {count(per_layer)}" in text
    assert count(7_087_872) == "7.09M" and count(198_272) == "198.3k"  # bert-base's layer, bert-tiny's


def test_encoder_block_draws_pre_ln_when_the_config_asks_for_it():
    text = shown(plot_encoder_block(BertConfig.from_preset("bert-tiny", pre_layer_norm=True)))
    assert "pre-LN" in text and "Add & LayerNorm" not in text
    assert text.count("LayerNorm(128)") == 3  # before each sub-layer, and the one that closes the stack
    assert "encoder.final_layer_norm" in text and "residual sum, no weights" in text


@pytest.mark.parametrize("preset, shapes", [
    ("bert-tiny", ["(B, 8, 128)", "(B, 8, 2, 64)", "(B, 2, 8, 64)", "(B, 2, 8, 8)", "√64"]),
    ("bert-base", ["(B, 8, 768)", "(B, 8, 12, 64)", "(B, 12, 8, 64)", "(B, 12, 8, 8)", "√64",
                   "A = 12 heads of d = 64"]),
])
def test_multihead_split_writes_the_shapes_the_code_gives(preset, shapes):
    text = shown(plot_multihead_split(preset))
    for shape in shapes:
        assert shape in text
    for symbols in ("(B, T, H)", "(B, T, A, d)", "(B, A, T, d)", "(B, A, T, T)"):
        assert symbols in text


def test_multihead_stages_follow_the_attention_code():
    c = BertConfig.from_preset("bert-base")
    stages = multihead_stages(c, seq_len=5)
    assert [tuple(s.shape) for s in stages] == [(1, 5, 768), (1, 5, 768), (1, 5, 12, 64), (1, 12, 5, 64),
                                               (1, 12, 5, 5), (1, 12, 5, 64), (1, 5, 768), (1, 5, 768)]
    for stage in stages:  # the letters say what the numbers are: B, T = 5, H = 768, A = 12, d = 64
        sizes = {"B": 1, "T": 5, "H": 768, "A": 12, "d": 64}
        assert tuple(sizes[s] for s in stage.symbols.strip("()").split(", ")) == tuple(stage.shape)
    assert "(B, 12, 5, 5)" in shown(plot_multihead_split(c, seq_len=5))


@pytest.mark.parametrize("preset", PRESETS)
def test_pretraining_heads_show_the_tied_decoder_with_the_real_vocabulary(preset):
    c = BertConfig.from_preset(preset)
    text = shown(plot_pretraining_heads(preset))
    assert f"V × H = {c.vocab_size} × {c.hidden_size}" in text
    assert "tied" in text and "decoder.weight is bert.embeddings.word_embeddings.weight: True" in text
    assert f"Linear {c.hidden_size} → 2" in text and f"dense {c.hidden_size} → {c.hidden_size}, tanh" in text
    for label in ("[MASK]", "IsNext", "NotNext", "cute", "likes", "only at the [MASK] positions"):
        assert label in text


def test_pretraining_heads_follow_a_changed_vocabulary_and_a_factorised_embedding():
    assert "V × H = 8000 × 128" in shown(plot_pretraining_heads(BertConfig.from_preset("bert-tiny", vocab_size=8000)))
    albert = shown(plot_pretraining_heads("albert-base"))  # ALBERT: a V × E table, E = 128 < H = 768
    assert "V × E = 30000 × 128" in albert and "dense 768 → 128" in albert


def test_figure4_has_the_four_task_types_of_the_paper():
    text = shown(plot_figure4())
    for label in ("Sentence pair classification", "Single sentence classification", "Question answering",
                  "Single sentence tagging", "MNLI", "SST-2", "SQuAD", "NER", "BertForSequenceClassification",
                  "BertForQuestionAnswering", "BertForTokenClassification", "start", "end", "B-PER", "B-LOC",
                  "##lin", "class: entailment", "class: positive"):
        assert label in text
    assert text.split("\n").count("[CLS]") == 4 and text.split("\n").count("BERT") == 4


def test_readability_helpers_measure_what_is_drawn():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1], label="a line")
    ax.tick_params(labelsize=6)
    ax.set_title("title", fontsize=14)
    ax.legend(fontsize=9)
    assert smallest_font_pt(fig) == 6
    ax.set_axis_off()  # the tick labels are no longer drawn
    assert smallest_font_pt(fig) == 9
    assert {t.text for t in drawn_texts(fig)} == {"title", "a line"}
    wide = plt.figure(figsize=(20, 2))
    wide.text(0.01, 0.5, "left", fontsize=10)
    wide.text(0.9, 0.5, "right", fontsize=10)
    assert smallest_font_pt(wide) == 10
    assert math.isclose(smallest_font_pt(wide, column_width_in=10), 10 * 10 / displayed_size_in(wide)[0])
    assert smallest_font_pt(plt.figure()) == math.inf
    assert overlapping_texts(wide) == []
    wide.text(0.9, 0.5, "over", fontsize=10)
    assert overlapping_texts(wide) == [("right", "over")]



def test_figure1_counts_the_modules_that_pre_train_and_fine_tune():
    """The two halves share the encoder, and fine-tuning updates every parameter of the QA model."""
    from minibert import BertForPreTraining, BertForQuestionAnswering, BertModel

    config = BertConfig.from_preset("bert-tiny")
    counts = figure1_counts(config)
    n = lambda module: sum(p.numel() for p in module.parameters())  # noqa: E731
    assert counts["encoder"] == n(BertModel(config, add_pooling_layer=False))
    assert counts["encoder"] + counts["pretraining_heads"] == n(BertForPreTraining(config))
    assert counts["qa_head"] == 2 * config.hidden_size + 2
    assert counts["fine_tuned"] == n(BertForQuestionAnswering(config)) == counts["encoder"] + counts["qa_head"]
    text = shown(plot_figure1(config))
    assert "L=2, H=128, A=2" in text and f"all {count(counts['fine_tuned'])} parameters updated" in text
    for label in ("[MASK]", "NSP: IsNext", "start", "end", "question", "paragraph", "Pre-training", "Fine-tuning"):
        assert label in text


def test_the_masked_batch_picture_reads_each_kind_back_from_the_labels(tokenizer):
    """Every kind is recovered from (corrupted, labels) alone: the label of a chosen position is its original."""
    from minibert.viz.masked_batch import KINDS, masking_kinds, plot_masked_batch

    m, pad = tokenizer.mask_token_id, tokenizer.pad_token_id
    a, b, c = tokenizer.convert_tokens_to_ids(["the", "dog", "barked"])
    corrupted = torch.tensor([[a, m, c, b], [a, b, pad, pad]])          # [MASK] for b; then b kept; padding
    labels = torch.tensor([[-100, b, -100, a], [-100, b, -100, -100]])  # last of row 0: a replaced by b (random)
    kinds = masking_kinds(corrupted, labels, m, pad)
    assert kinds.tolist() == [[0, 1, 0, 2], [0, 3, 4, 4]]
    fig = plot_masked_batch({"input_ids": corrupted, "labels": labels}, tokenizer)
    written = {t.get_text() for t in fig.axes[0].texts}
    assert {"the", "[MASK]", "barked", "[PAD]"} <= written
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [name for name, _ in KINDS]
    assert smallest_font_pt(fig) >= 10
    plt.close(fig)


def test_encoder_decoder_keeps_cross_attention_and_masking_on_the_transformers_side():
    """BERT's column has the encoder's sub-layers and its heads, never the decoder's: no masked
    self-attention, no cross-attention, no next-token softmax (everything right of the dotted line)."""
    fig = plot_encoder_decoder()
    texts = drawn_texts(fig)
    divider = 6.45 * fig.dpi  # the dotted line, in inches from the left, in the renderer's pixels
    bert = [t.text for t in texts if t.bbox.x0 > divider]            # every label, whole
    transformer = [t.text for t in texts if t.bbox.x1 < divider]
    for part in ("cross-attention\n(to the encoder)", "masked self-attention\n(left to right)", "next-token softmax"):
        assert part in transformer and part not in bert
    for part in ("self-attention\n(both directions)", "feed-forward", "MLM and NSP heads"):
        assert part in bert
    assert transformer.count("feed-forward") == 2 and bert.count("feed-forward") == 1
    assert any(text.startswith("[CLS]") for text in bert)
