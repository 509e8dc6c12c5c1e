"""Pictures of attention: where each token looks, drawn the ways the course uses.

Row = query (the token that looks), column = key (the token looked at); each row of an attention
matrix is a probability distribution, so the colour scale is fixed to [0, 1] and maps of different
heads and layers can be compared by eye.

- `plot_attention`: one head as a heatmap with its tokens on the axes.
- `plot_attention_lines`: the same head as lines from each query token to each key token, opacity and
  width = weight: the static cousin of bertviz's head view, the way Clark et al. (2019) show heads.
- `plot_attention_grid`: every layer × head as a thumbnail, to spot at a glance the patterns Clark et
  al. describe (attend to the next or previous token, to [SEP], broadly over the sentence); too small
  for token labels, so the heads a text discusses are drawn large by `minibert.viz.head_panels`.
- `AttentionExplorer`: a sentence box and layer / head sliders that redraw one picture in place.
- `attention_for`: runs a model on a sentence and returns what the pictures need.

The interactive bertviz views, made to work offline, are in `minibert.viz.bertviz`.
"""
from __future__ import annotations

import html
import io
import operator
from typing import NamedTuple

import matplotlib.pyplot as plt
import torch
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from torch import Tensor

from ..modes import eval_mode


class SentenceAttention(NamedTuple):
    """What `attention_for` returns, in bertviz's argument order: ``head_view(*attention_for(...))``."""
    attentions: Tensor              # (L, nh, T, T): layer, head, query, key
    tokens: list[str]               # T tokens, [CLS] ... [SEP]
    sentence_b_start: int | None    # index of the first token of segment B; None for a single sentence


def check_index(kind: str, value, count: int) -> int:
    """A layer or head number, or an error that says which numbers exist."""
    try:
        index = operator.index(value)
    except TypeError:
        raise TypeError(f"{kind} must be an int, got {value!r}") from None
    if not 0 <= index < count:
        raise ValueError(f"{kind} {index} is out of range: the model has {count} {kind}s, numbered 0 to {count - 1}")
    return index


def check_text_fits(model, tokenizer, text: str, text_pair: str | None = None) -> int:
    """The number of tokens of ``text`` with [CLS] and [SEP]; too many for the position embeddings is an error."""
    if not isinstance(text, str) or not (text_pair is None or isinstance(text_pair, str)):
        raise TypeError("text (and text_pair) must be a str: one sentence is drawn at a time")
    length = len(tokenizer.tokenize(text)) + 2
    if text_pair is not None:
        length += len(tokenizer.tokenize(text_pair)) + 1
    limit = min(model.config.max_position_embeddings, tokenizer.model_max_length)
    if length > limit:
        raise ValueError(f"the text is {length} tokens long with [CLS] and [SEP], but this model reads at most "
                         f"{limit}; shorten it (one or two sentences make the clearest pictures)")
    return length


def attention_for(model, tokenizer, text: str, text_pair: str | None = None) -> SentenceAttention:
    """Run ``model`` on one sentence (or a pair) with dropout off; return its attentions and tokens."""
    check_text_fits(model, tokenizer, text, text_pair)
    enc = tokenizer(text, text_pair, return_tensors="pt")
    device = next(model.parameters()).device
    inputs = {name: enc[name].to(device) for name in ("input_ids", "token_type_ids", "attention_mask")}
    with eval_mode(model), torch.no_grad():  # dropout off: the same sentence always gives the same picture
        out = model(**inputs, output_attentions=True)
    attentions = torch.stack(out.attentions)[:, 0].float().cpu()  # L × (1, nh, T, T) -> (L, nh, T, T)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    b_start = enc["token_type_ids"][0].tolist().index(1) if text_pair is not None else None
    return SentenceAttention(attentions, tokens, b_start)


def stack_attentions(attentions, tokens=None) -> Tensor:
    """One sequence's attention as (L, nh, T, T), from a model output's tuple or an already stacked tensor."""
    if isinstance(attentions, (tuple, list)):
        if not attentions:
            raise ValueError("no attention given: call the model with output_attentions=True")
        attentions = torch.stack([torch.as_tensor(a) for a in attentions])
    attentions = torch.as_tensor(attentions).detach().float().cpu()
    if attentions.dim() == 5:  # (L, B, nh, T, T), the model's tuple stacked
        if attentions.size(1) != 1:
            raise ValueError(f"the attention holds a batch of {attentions.size(1)} sequences; pick one, "
                             "e.g. [a[i:i + 1] for a in out.attentions]")
        attentions = attentions[:, 0]
    if attentions.dim() != 4 or attentions.size(-1) != attentions.size(-2):
        raise ValueError(f"expected the model's out.attentions (one (1, heads, T, T) per layer) or a (layers, heads, "
                         f"T, T) tensor, got shape {tuple(attentions.shape)}")
    if tokens is not None and len(tokens) != attentions.size(-1):
        raise ValueError(f"the attention covers {attentions.size(-1)} positions but {len(tokens)} tokens were given; "
                         "pass the tokens of the same encoding, e.g. tokenizer.convert_ids_to_tokens(input_ids[0])")
    return attentions


def plot_attention(weights, queries, keys, ax=None, title=None, annotate=False, fontsize=10):
    """Draw one (T_q, T_k) attention matrix with its tokens on the axes; returns the image for a colorbar."""
    ax = ax or plt.gca()
    if isinstance(weights, torch.Tensor):  # matplotlib converts tensors through a deprecated numpy path
        weights = weights.detach().float().cpu().numpy()
    image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=fontsize)
    ax.set_yticks(range(len(queries)), queries, fontsize=fontsize)
    if annotate:  # the numbers themselves, for matrices small enough to read
        for i in range(len(queries)):
            for j in range(len(keys)):
                w = float(weights[i, j])
                ax.text(j, i, f"{w:.2f}", ha="center", va="center", color="black" if w > 0.5 else "white")
    if title:
        ax.set_title(title)
    return image


def plot_attention_lines(weights, queries, keys, ax=None, title=None, fontsize=11, color="C0"):
    """Draw one head as a line from each query token (left) to each key token (right); returns the lines.

    Opacity and width are the weight, so a head that reads one word stands out as a single bold line
    per token, and a broad head as a faint fan.
    """
    weights = torch.as_tensor(weights).detach().float().cpu()
    if weights.shape != (len(queries), len(keys)):
        raise ValueError(f"weights must be one head's (queries, keys) matrix, shape ({len(queries)}, {len(keys)}) "
                         f"for the tokens given, got {tuple(weights.shape)}; e.g. attentions[layer, head]")
    ax = ax or plt.gca()
    T_q, T_k = weights.shape
    i, j = torch.meshgrid(torch.arange(T_q), torch.arange(T_k), indexing="ij")
    ends = torch.stack([torch.zeros_like(i), i, torch.ones_like(j), j], dim=-1)  # (T_q, T_k, 4): x0, y0, x1, y1
    colors = torch.tensor(to_rgba(color)).repeat(T_q * T_k, 1)
    colors[:, 3] = weights.flatten().clamp(0, 1)
    lines = LineCollection(ends.view(-1, 2, 2).numpy(), colors=colors.numpy(),
                           linewidths=(0.5 + 3.5 * weights.flatten()).numpy())
    ax.add_collection(lines)
    for y, token in enumerate(queries):
        ax.text(-0.04, y, token, ha="right", va="center", fontsize=fontsize)
    for y, token in enumerate(keys):
        ax.text(1.04, y, token, ha="left", va="center", fontsize=fontsize)
    ax.text(-0.04, -1, "query", ha="right", va="center", fontsize=fontsize, style="italic", color="0.4")
    ax.text(1.04, -1, "key", ha="left", va="center", fontsize=fontsize, style="italic", color="0.4")
    ax.set_xlim(-0.5, 1.5)
    ax.set_ylim(max(T_q, T_k) - 0.5, -1.5)  # first token at the top, as in reading order
    ax.axis("off")
    if title:
        ax.set_title(title)
    return lines


def plot_attention_grid(attentions, layers=None, heads=None, title=None, size=1.3, number_from=0) -> Figure:
    """Every (layer, head) of one sentence as a thumbnail heatmap, rows = layers, columns = heads.

    ``layers`` and ``heads`` pick them, counted from 0 as in code; the labels count from ``number_from``
    (1 for the paper's names, where 3-9 is layer index 2, head index 8). The thumbnails are too small
    for token labels: an overview, beside `minibert.viz.head_panels.plot_heads` for the heads discussed.
    """
    attentions = stack_attentions(attentions)
    L, nh = attentions.shape[:2]
    layers = range(L) if layers is None else [check_index("layer", layer, L) for layer in layers]
    heads = range(nh) if heads is None else [check_index("head", head, nh) for head in heads]
    fig, axes = plt.subplots(len(layers), len(heads), squeeze=False, layout="constrained",
                             figsize=(size * len(heads) + 1.2, size * len(layers) + 0.8))
    for r, layer in enumerate(layers):
        for c, head in enumerate(heads):
            ax = axes[r, c]
            image = ax.imshow(attentions[layer, head].numpy(), cmap="viridis", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(f"head {head + number_from}", fontsize=11)
            if c == 0:
                ax.set_ylabel(f"layer {layer + number_from}", fontsize=11)
    fig.colorbar(image, ax=axes, fraction=0.02, pad=0.01)
    fig.suptitle(title or "Attention of every layer and head (rows = queries, columns = keys)", fontsize=14)
    return fig


class AttentionExplorer:
    """Type a sentence, pick a layer and a head, and see where each token looks.

    The model runs once per sentence; moving a slider only redraws. The picture is a PNG of one
    matplotlib ``figure`` shown in an ``ipywidgets.Image``, so it is replaced in place under any
    matplotlib backend; ``redraws`` counts the drawings. Display the explorer as the last line of a cell.
    """

    VIEWS = ("heatmap", "lines")

    def __init__(self, model, tokenizer, text: str = "The cat sat on the mat because it was tired.",
                 layer: int = 0, head: int = 0, view: str = "heatmap"):
        import ipywidgets as widgets  # only here: notebooks that just plot do not pay for it

        cfg = model.config
        check_index("layer", layer, cfg.num_hidden_layers)
        check_index("head", head, cfg.num_attention_heads)
        if view not in self.VIEWS:
            raise ValueError(f"view must be one of {self.VIEWS}, got {view!r}")
        self.model, self.tokenizer = model, tokenizer
        self.text = widgets.Text(value=text, description="sentence", continuous_update=False,
                                 layout=widgets.Layout(width="95%"))
        self.layer = widgets.IntSlider(value=layer, min=0, max=cfg.num_hidden_layers - 1, description="layer",
                                       continuous_update=False)
        self.head = widgets.IntSlider(value=head, min=0, max=cfg.num_attention_heads - 1, description="head",
                                      continuous_update=False)
        self.view = widgets.ToggleButtons(options=self.VIEWS, value=view)
        self.status = widgets.HTML()
        self.image = widgets.Image(format="png")
        self.widget = widgets.VBox([self.text, widgets.HBox([self.layer, self.head, self.view]),
                                    self.status, self.image])
        self.figure = Figure()  # not pyplot's: it is never shown by itself or kept open
        self.sample: SentenceAttention | None = None
        self.redraws = 0
        self.text.observe(self.read_sentence, names="value")
        for control in (self.layer, self.head, self.view):
            control.observe(self.redraw, names="value")
        self.read_sentence()

    def read_sentence(self, change=None) -> None:
        """Run the model on the typed sentence; a sentence it cannot read is reported, not raised."""
        try:
            self.sample = attention_for(self.model, self.tokenizer, self.text.value)
        except ValueError as error:
            self.status.value = f"<b style='color:#b00020'>{html.escape(str(error))}</b>"
            return
        self.status.value = ""
        self.redraw()

    def redraw(self, change=None) -> None:
        if self.sample is None:
            return
        layer, head, tokens = self.layer.value, self.head.value, self.sample.tokens
        weights = self.sample.attentions[layer, head].numpy()
        title = f"layer {layer}, head {head}"
        fig, side = self.figure, min(14.0, 0.32 * len(tokens) + 1.5)
        fig.clear()
        ax = fig.add_subplot()
        if self.view.value == "heatmap":
            fig.set_size_inches(max(4.0, side) + 1.2, max(4.0, side))
            image = plot_attention(weights, tokens, tokens, ax=ax, title=title, fontsize=11)
            ax.set_xlabel("key (looked at)")
            ax.set_ylabel("query (looking)")
            fig.colorbar(image, ax=ax, fraction=0.046)
        else:
            fig.set_size_inches(6.0, max(3.0, side))
            plot_attention_lines(weights, tokens, tokens, ax=ax, title=title)
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=100, bbox_inches="tight")
        self.image.value = png.getvalue()
        self.redraws += 1

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
