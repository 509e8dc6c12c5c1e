"""Attention pictures: heatmap, lines and grid draw what the model computed; the explorer redraws in place.

A small random BERT and a vocabulary of a few words keep these fast; what the pictures show is read
back from the matplotlib artists and compared with the model's attention.
"""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from minibert import BertConfig, BertModel, BertTokenizer  # noqa: E402
from minibert.viz import (  # noqa: E402
    AttentionExplorer,
    attention_for,
    plot_attention,
    plot_attention_grid,
    plot_attention_lines,
    plot_heads,
    stack_attentions,
)

WORDS = "the cat sat on mat dog ran in park it was tired because .".split()
SENTENCE = "the cat sat on the mat"
TOKENS = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS)})


@pytest.fixture(scope="module")
def model(tokenizer):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=16, initializer_range=0.5)
    return BertModel(config)  # a wide initialisation: peaked attention, so pictures differ between heads


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_attention_for_returns_one_sentence_per_layer_and_head(model, tokenizer):
    model.train()
    sample = attention_for(model, tokenizer, SENTENCE)
    assert model.training, "the model's mode is restored after the dropout-free run"
    assert sample.tokens == TOKENS and sample.sentence_b_start is None
    assert sample.attentions.shape == (3, 4, 8, 8)
    torch.testing.assert_close(sample.attentions.sum(-1), torch.ones(3, 4, 8))
    pair = attention_for(model, tokenizer, "the cat sat", "it was tired")
    assert pair.tokens[pair.sentence_b_start - 1:] == ["[SEP]", "it", "was", "tired", "[SEP]"]


def test_attention_for_refuses_text_longer_than_the_model_reads(model, tokenizer):
    with pytest.raises(ValueError, match=r"18 tokens long .* at most 16; shorten it"):
        attention_for(model, tokenizer, " ".join(["the"] * 16))


def test_stack_attentions_accepts_model_outputs_and_says_what_is_wrong(model, tokenizer):
    enc = tokenizer([SENTENCE, SENTENCE], return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_attentions=True)
    one = [a[:1] for a in out.attentions]
    assert stack_attentions(one, TOKENS).shape == (3, 4, 8, 8)
    assert torch.equal(stack_attentions(stack_attentions(one)), stack_attentions(one))
    with pytest.raises(ValueError, match="batch of 2 sequences; pick one"):
        stack_attentions(out.attentions)
    with pytest.raises(ValueError, match="covers 8 positions but 7 tokens were given"):
        stack_attentions(one, TOKENS[:-1])
    with pytest.raises(ValueError, match="output_attentions=True"):
        stack_attentions(())


def test_plot_attention_keeps_notebook_02s_signature():
    weights = torch.softmax(torch.randn(3, 4), -1)
    image = plot_attention(weights, list("abc"), list("wxyz"), title="t", annotate=True)
    ax = image.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == list("abc")
    assert [t.get_text() for t in ax.get_xticklabels()] == list("wxyz")
    assert ax.get_title() == "t" and image.get_clim() == (0, 1)


def test_lines_view_draws_each_query_key_pair_with_its_weight(model, tokenizer):
    weights = attention_for(model, tokenizer, SENTENCE).attentions[1, 2]
    lines = plot_attention_lines(weights, TOKENS, TOKENS, title="layer 1, head 2")
    segments = lines.get_segments()
    assert len(segments) == 64
    assert segments[8 * 3 + 5].tolist() == [[0, 3], [1, 5]]  # query 3 (left) -> key 5 (right)
    torch.testing.assert_close(torch.tensor(lines.get_colors()[:, 3]).float(), weights.flatten())
    texts = [t.get_text() for t in lines.axes.texts]
    assert texts.count("mat") == 2 and "query" in texts and "key" in texts
    assert lines.axes.get_title() == "layer 1, head 2"
    with pytest.raises(ValueError, match=r"shape \(7, 8\) for the tokens given, got \(8, 8\)"):
        plot_attention_lines(weights, TOKENS[:-1], TOKENS)


def test_grid_has_one_thumbnail_per_layer_and_head(model, tokenizer):
    sample = attention_for(model, tokenizer, SENTENCE)
    fig = plot_attention_grid(sample.attentions, title="the cat sat")
    thumbnails = [ax for ax in fig.axes if ax.images]
    assert len(thumbnails) == 3 * 4 and len(fig.axes) == 3 * 4 + 1  # + the colorbar
    assert fig.get_suptitle() == "the cat sat"
    assert [ax.get_title() for ax in thumbnails[:4]] == ["head 0", "head 1", "head 2", "head 3"]
    assert [thumbnails[4 * r].get_ylabel() for r in range(3)] == ["layer 0", "layer 1", "layer 2"]
    picked = plot_attention_grid(sample.attentions, layers=[2], heads=[3, 1])
    shown = [ax.images[0].get_array() for ax in picked.axes if ax.images]
    assert torch.equal(torch.tensor(shown[0]), sample.attentions[2, 3])
    assert torch.equal(torch.tensor(shown[1]), sample.attentions[2, 1])
    with pytest.raises(ValueError, match="layer 3 is out of range: the model has 3 layers, numbered 0 to 2"):
        plot_attention_grid(sample.attentions, layers=[3])


def drawn(explorer):
    """What the explorer's figure shows: title, tokens (query side) and the matrix or the lines."""
    ax = explorer.figure.axes[0]
    if ax.images:
        return ax.get_title(), [t.get_text() for t in ax.get_yticklabels()], torch.tensor(ax.images[0].get_array())
    lines = ax.collections[0]
    T = len(explorer.sample.tokens)
    tokens = [t.get_text() for t in ax.texts][:T]
    return ax.get_title(), tokens, torch.tensor(lines.get_colors()[:, 3]).float().view(T, T)


def test_explorer_redraws_in_place_with_the_chosen_layer_head_and_sentence(model, tokenizer):
    figures = plt.get_fignums()
    explorer = AttentionExplorer(model, tokenizer, SENTENCE, layer=1, head=2)
    expected = attention_for(model, tokenizer, SENTENCE).attentions
    title, tokens, weights = drawn(explorer)
    assert (explorer.redraws, title, tokens) == (1, "layer 1, head 2", TOKENS)
    torch.testing.assert_close(weights, expected[1, 2])
    first_png = bytes(explorer.image.value)
    assert first_png.startswith(b"\x89PNG")

    explorer.layer.value = 2
    title, _, weights = drawn(explorer)
    assert (explorer.redraws, title) == (2, "layer 2, head 2")
    torch.testing.assert_close(weights, expected[2, 2])
    explorer.head.value = 0
    title, _, weights = drawn(explorer)
    assert (explorer.redraws, title) == (3, "layer 2, head 0")
    torch.testing.assert_close(weights, expected[2, 0])
    assert bytes(explorer.image.value) != first_png

    explorer.text.value = "the dog ran in the park"
    title, tokens, weights = drawn(explorer)
    assert explorer.redraws == 4 and tokens == ["[CLS]", "the", "dog", "ran", "in", "the", "park", "[SEP]"]
    torch.testing.assert_close(weights, attention_for(model, tokenizer, "the dog ran in the park").attentions[2, 0])

    explorer.view.value = "lines"
    title, tokens, weights = drawn(explorer)
    assert (explorer.redraws, title, tokens[2]) == (5, "layer 2, head 0", "dog")
    torch.testing.assert_close(weights, explorer.sample.attentions[2, 0])
    assert len(explorer.figure.axes) == 1, "the lines replace the heatmap and its colorbar"
    assert plt.get_fignums() == figures, "no pyplot figure is opened, so nothing is appended below the widget"
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_explorer_reports_a_sentence_too_long_and_keeps_the_picture(model, tokenizer):
    explorer = AttentionExplorer(model, tokenizer, SENTENCE)
    explorer.text.value = " ".join(["the"] * 20)
    assert explorer.redraws == 1 and explorer.sample.tokens == TOKENS
    assert "22 tokens long" in explorer.status.value and "shorten it" in explorer.status.value
    explorer.text.value = "the cat"
    assert explorer.status.value == "" and explorer.redraws == 2


@pytest.mark.parametrize("kwargs, message", [
    ({"layer": 3}, "layer 3 is out of range: the model has 3 layers, numbered 0 to 2"),
    ({"head": -1}, "head -1 is out of range: the model has 4 heads, numbered 0 to 3"),
    ({"view": "bars"}, r"view must be one of \('heatmap', 'lines'\)"),
])
def test_explorer_rejects_bad_choices(model, tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        AttentionExplorer(model, tokenizer, SENTENCE, **kwargs)


def test_alignment_picture_labels_each_words_first_piece_and_survives_a_cut_off_sentence():
    from minibert.viz.alignment import plot_first_piece_alignment
    from minibert.viz.diagrams import drawn_texts, smallest_font_pt

    names = ["O", "B-PER", "I-PER", "B-LOC"]
    words, tags = ["arafat", "visits", "west", "bank"], [1, 0, 3, 0]
    tokens, word_ids = ["[CLS]", "ara", "##fat", "visits", "west", "[SEP]"], [None, 0, 0, 1, 2, None]  # "bank" cut off
    fig = plot_first_piece_alignment(words, tags, tokens, word_ids, names)
    texts = [t.text for t in drawn_texts(fig)]
    assert texts.count("-100") == 3 and {"1", "0", "3"} <= set(texts) and "bank" not in texts
    assert any("1 = B-PER" in t and "3 = B-LOC" in t for t in texts) and smallest_font_pt(fig) >= 10
    plt.close(fig)
    with pytest.raises(ValueError, match="5 tokens but 6 word ids"):
        plot_first_piece_alignment(words, tags, tokens[:5], word_ids, names)


def test_history_picture_says_what_each_axis_measures_and_draws_scores_from_zero():
    from minibert.training import History

    records = [{"step": s, "loss": 1 / s, "lr": 1e-3} for s in (10, 20)]
    records += [{"step": 20, "eval_loss": 0.6, "eval_mlm_loss": 5.1, "eval_accuracy": 0.81, "eval_f1": 0.78}]
    fig = History(records).plot()
    loss_ax, lr_ax, metric_ax = fig.axes
    assert loss_ax.get_ylabel() == "cross-entropy (nats)" and lr_ax.get_ylabel() == "learning rate"
    assert {t.get_text() for t in loss_ax.get_legend().get_texts()} == {"train", "eval", "mlm loss (eval)"}
    assert {t.get_text() for t in metric_ax.get_legend().get_texts()} == {"accuracy", "f1"}
    assert metric_ax.get_ylabel() and metric_ax.get_ylim() == (0, 1.02)
    plt.close(fig)
    records[-1]["eval_matthews"] = -0.2   # a correlation below zero: the axis goes down to -1
    fig = History(records).plot()
    assert fig.axes[2].get_ylim()[0] == -1.02
    plt.close(fig)


def test_heads_are_drawn_large_with_their_tokens_on_the_outer_axes(model, tokenizer):
    sample = attention_for(model, tokenizer, SENTENCE)
    maps = [sample.attentions[layer, head] for layer, head in [(0, 1), (1, 2), (2, 3)]]
    fig = plot_heads(maps, sample.tokens, ["a", "b", "c"], columns=2, title="three heads")
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["a", "b", "c"] and fig.get_suptitle() == "three heads"
    assert torch.equal(torch.tensor(panels[2].images[0].get_array()), sample.attentions[2, 3])
    assert [t.get_text() for t in panels[0].get_yticklabels()] == TOKENS
    assert [t.get_text() for t in panels[2].get_xticklabels()] == TOKENS
    fig.canvas.draw()
    shown = {ax.get_title(): (ax.yaxis.get_major_ticks()[0].label1.get_visible(),
                              ax.xaxis.get_major_ticks()[0].label1.get_visible()) for ax in panels}
    # queries on the first column (a, c), keys under the lowest panel of each column (c, and b above an empty slot)
    assert shown == {"a": (True, False), "b": (False, True), "c": (True, True)}
    assert fig.get_size_inches()[0] <= 10
    with pytest.raises(ValueError, match="one title per map"):
        plot_heads(maps, sample.tokens, ["a"])
    with pytest.raises(ValueError, match=r"\(T, T\) attention for the 7 tokens given, got \(8, 8\)"):
        plot_heads(maps, sample.tokens[:-1], ["a", "b", "c"])


def test_grid_labels_can_count_from_one_like_the_papers_head_names(model, tokenizer):
    sample = attention_for(model, tokenizer, SENTENCE)
    thumbnails = [ax for ax in plot_attention_grid(sample.attentions, number_from=1).axes if ax.images]
    assert [ax.get_title() for ax in thumbnails[:4]] == ["head 1", "head 2", "head 3", "head 4"]
    assert thumbnails[8].get_ylabel() == "layer 3"


def test_the_grid_picture_draws_every_seed_its_mean_and_each_reference_line_once():
    from minibert.viz.diagrams import overlapping_texts, smallest_font_pt
    from minibert.viz.modern import POST, PRE, plot_grid

    rows = {"BERT (2018)": {"fill-in (%)": [5.4, 5.5, 5.6], "POS (%)": [68.0, 69.0, 70.0]},
            "ModernBERT (2024)": {"fill-in (%)": [18.0, 19.0], "POS (%)": [84.0, 86.0]}}
    lines = {"POS (%)": {"untrained encoder": 68.4, "word identity": 81.8}}
    fig = plot_grid(rows, lines)
    fill_in, pos = fig.axes
    assert [t.get_text() for t in fill_in.get_yticklabels()] == list(rows) and fill_in.get_ylim()[0] > 0  # first on top
    dots = [c for c in fill_in.collections if isinstance(c, matplotlib.collections.PathCollection)]  # the scatters
    assert [sorted(c.get_offsets()[:, 0]) for c in dots] == [[5.4, 5.5, 5.6], [18.0, 19.0]]
    assert [c.get_offsets()[0, 1] for c in dots] == [0, 1]
    assert [matplotlib.colors.to_hex(c.get_facecolor()[0]) for c in dots] == [POST.lower(), PRE.lower()]
    means = [line.get_xdata()[0] for line in fill_in.get_lines() if line.get_marker() == "o"]
    assert means == pytest.approx([5.5, 18.5])
    assert {line.get_label(): line.get_xdata()[0] for line in pos.get_lines() if line.get_label() in lines["POS (%)"]} \
        == lines["POS (%)"]
    assert sorted(t.get_text() for t in fig.legends[0].get_texts()) == ["untrained encoder", "word identity"]
    assert fig.get_size_inches()[0] <= 10 and smallest_font_pt(fig) >= 14 and not overlapping_texts(fig)
    plt.close(fig)
