"""BERT's parts drawn from the modules themselves, so every size in a picture is the model's own.

Each function takes a `BertConfig` or a preset name ("bert-base"), builds the part on PyTorch's
``meta`` device (shapes and no numbers: instant even for BERT-large) and reads the labels off it:
layer sizes from ``nn.Linear.in_features``, parameter counts from the weights, tensor shapes from
running the library's own reshapes on empty tensors. Change the code and the pictures follow.

- `plot_encoder_block`: one Transformer layer as BERT has it (post-LN), or pre-LN when the config asks.
- `plot_multihead_split`: how H splits into A heads of d = H / A and joins again, shape by shape.
- `plot_pretraining_heads`: masked LM (decoder tied to the word embeddings) and next sentence prediction.

Every text is at least 10 pt and every figure at most 10 inches wide, so they are shown unshrunk
in a notebook and read from the back of a lecture room (see `minibert.viz.diagrams.smallest_font_pt`).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyBboxPatch, Rectangle
from torch import nn

from ..attention import attention_probabilities
from ..config import BertConfig
from ..heads import BertForPreTraining
from ..model import BertEncoder
from .diagrams import (
    ADD_NORM,
    ANSWER,
    ATTENTION,
    EMBEDDING,
    ENCODER,
    FAINT,
    FEED_FORWARD,
    FONT,
    HEAD,
    INK,
    TOKEN,
    arrow,
    box,
    inch_canvas,
    slots,
    token_row,
)

WIDTH = 9.6  # inches: shown 9.8 wide with the notebook's padding, within its column
HEAD_COLOURS = [*colormaps["Set3"].colors, *colormaps["Pastel1"].colors, *colormaps["Pastel2"].colors]  # 29


def as_config(config: BertConfig | str) -> tuple[BertConfig, str]:
    """The config, and a name for titles: the preset's with its sizes, or the sizes alone."""
    resolved = BertConfig.from_preset(config) if isinstance(config, str) else config
    sizes = f"L={resolved.num_hidden_layers}, H={resolved.hidden_size}, A={resolved.num_attention_heads}"
    return resolved, f"{config}: {sizes}" if isinstance(config, str) else sizes


def count(n: int) -> str:
    """A parameter count as people say it: 7.09M, 1.5k."""
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


def parameters(module: nn.Module) -> int:
    """Its parameters, counted from the shapes (a meta module has no values to count)."""
    return sum(p.numel() for p in module.parameters())


def activation(config: BertConfig) -> str:
    """``hidden_act`` as papers write it; the tanh approximation of GELU is named as such."""
    return {"gelu": "GELU", "gelu_new": "GELU (tanh)", "gelu_pytorch_tanh": "GELU (tanh)", "relu": "ReLU",
            "silu": "SiLU", "swish": "SiLU"}.get(config.hidden_act, config.hidden_act)


def on_meta(build: Callable[[], nn.Module]) -> nn.Module:
    """Build modules with shapes but no storage: BERT-large's layers cost nothing to draw."""
    with torch.device("meta"):
        return build()


# --- the encoder layer --------------------------------------------------------------------------
class Step(NamedTuple):
    text: str
    module: str        # its name inside BertLayer ("" for the residual sum, which has no weights)
    colour: str
    joins: bool = False     # the residual branch comes back in here
    branches: bool = False  # the residual branch leaves just below this step
    shape_out: str = ""     # the tensor that leaves it, written beside the arrow above


def encoder_steps(config: BertConfig, layer: nn.Module) -> list[Step]:
    """The layer's sub-layers bottom to top, labelled with the sizes read off ``layer``."""
    sa, attention_out = layer.attention.self, layer.attention.output
    w1, w2 = layer.intermediate.dense, layer.output.dense
    H, inner = w1.in_features, w1.out_features
    act, p = activation(config), layer.output.dropout.p
    stream = f"(B, T, {H})"
    heads = f"{sa.num_heads} head{'s' * (sa.num_heads != 1)}"
    attend = Step(f"Multi-head self-attention\n{heads} × d_head {sa.head_dim}; "
                  f"Q, K, V: {sa.query.in_features} → {sa.query.out_features}", "attention.self", ATTENTION,
                  shape_out=f"(B, T, {sa.num_heads * sa.head_dim}): {heads} × {sa.head_dim} joined")
    project = Step(f"Linear Wᴼ {attention_out.dense.in_features} → {attention_out.dense.out_features}, "
                   f"dropout {attention_out.dropout.p:g}", "attention.output.dense", ATTENTION, shape_out=stream)
    ffn_in = Step(f"Feed-forward W₁ {H} → {inner}, {act}", "intermediate.dense", FEED_FORWARD,
                  shape_out=f"(B, T, {inner})")
    ffn_out = Step(f"Feed-forward W₂ {w2.in_features} → {w2.out_features}, dropout {p:g}", "output.dense",
                   FEED_FORWARD, shape_out=stream)
    if not config.pre_layer_norm:  # BERT: x ← LayerNorm(x + Sublayer(x))
        return [attend._replace(branches=True), project,
                Step(f"Add & LayerNorm({H})", "attention.output.LayerNorm", ADD_NORM, joins=True, shape_out=stream),
                ffn_in._replace(branches=True), ffn_out,
                Step(f"Add & LayerNorm({H})", "output.LayerNorm", ADD_NORM, joins=True, shape_out=stream)]
    return [Step(f"LayerNorm({H})", "attention.output.LayerNorm", ADD_NORM, branches=True, shape_out=stream),
            attend, project, Step("+", "", ADD_NORM, joins=True, shape_out=stream),
            Step(f"LayerNorm({H})", "output.LayerNorm", ADD_NORM, branches=True, shape_out=stream),
            ffn_in, ffn_out, Step("+", "", ADD_NORM, joins=True, shape_out=stream)]


def plot_encoder_block(config: BertConfig | str = "bert-base") -> Figure:
    """One encoder layer, bottom to top as in the Transformer paper, with the residual connections
    drawn: each sub-layer's output is added to its input, which is what lets gradients reach the
    first of L layers. BERT normalises after the sum (post-LN); with ``config.pre_layer_norm`` the
    layer normalises what each sub-layer reads instead, and one LayerNorm closes the stack."""
    config, name = as_config(config)
    encoder = on_meta(lambda: BertEncoder(config))
    layer, final_norm = encoder.layer[0], encoder.final_layer_norm
    steps = encoder_steps(config, layer)
    heights = [0.62 if "\n" in s.text else 0.3 if s.text == "+" else 0.44 for s in steps]
    gap, x, w, lane, notes = 0.32, 3.5, 4.3, 1.05, 5.95
    frame_bottom, first = 0.62, 0.62 + gap + 0.08  # the frame, and the bottom of the first box
    frame_top = first + sum(heights) + gap * len(steps)
    top = frame_top + (0.45 + 0.44 if final_norm is not None else 0) + 0.55
    fig, ax = inch_canvas(WIDTH, top + 0.5)
    ax.add_patch(_frame(lane - 0.3, frame_bottom, x + w / 2 + 0.2 - (lane - 0.3), frame_top - frame_bottom))
    ax.text(0.15, top + 0.22, f"One encoder layer, {'pre-LN' if config.pre_layer_norm else 'post-LN as in BERT'}, "
            f"{name}", fontsize=13, fontweight="bold", va="center")
    ax.text(x, 0.2, f"x: (B, T, {config.hidden_size}) from the embeddings or the layer below",
            ha="center", va="center", fontsize=FONT)
    ax.text(lane - 0.42, (frame_bottom + frame_top) / 2 + 0.15, f"× {config.num_hidden_layers}", fontsize=16,
            fontweight="bold", ha="right", va="center")
    ax.text(lane - 0.42, (frame_bottom + frame_top) / 2 - 0.2, "shared" if config.share_layers else "layers",
            fontsize=10, ha="right", va="center")
    ax.text(notes, frame_top - 0.1, "module in BertLayer · parameters", fontsize=10, color=FAINT, va="center")
    ax.text(notes, frame_bottom + 0.1, f"the whole layer · {count(parameters(layer))}", fontsize=10, va="center")

    below, y, branch = 0.4, first, None  # where the arrow into the next box starts; that box's bottom
    for step, h in zip(steps, heights):
        if step.branches:
            branch = y - (gap if y > first else first - frame_bottom) / 2
        arrow(ax, (x, below), (x, y))
        if step.text == "+":  # the residual sum as the Transformer paper draws it
            ax.add_patch(Circle((x, y + h / 2), h / 2, facecolor=step.colour, edgecolor=INK, linewidth=1.2))
            ax.text(x, y + h / 2, "+", fontsize=14, ha="center", va="center")
        else:
            box(ax, x, y + h / 2, w, h, step.text, step.colour)
        if step.joins:  # the residual branch: around the sub-layer, into the sum
            edge = x - (h / 2 if step.text == "+" else w / 2)
            arrow(ax, (x, branch), (lane, branch), (lane, y + h / 2), (edge, y + h / 2))
            ax.plot([x], [branch], "o", color=INK, markersize=5)
        note = f"{step.module} · {count(parameters(layer.get_submodule(step.module)))}" if step.module else \
            "residual sum, no weights"
        ax.text(notes, y + h / 2, note, fontsize=10, color=FAINT, va="center")
        ax.text(x + 0.12, y + h + gap / 2, step.shape_out, fontsize=10, color=FAINT, va="center")
        below, y = y + h, y + h + gap
    if final_norm is not None:  # pre-LN leaves the stream unnormalised: one LayerNorm after the stack
        arrow(ax, (x, below), (x, frame_top + 0.45))
        box(ax, x, frame_top + 0.67, w, 0.44, f"final LayerNorm({final_norm.normalized_shape[0]}), after layer "
            f"{config.num_hidden_layers}", ADD_NORM)
        ax.text(notes, frame_top + 0.67, f"encoder.final_layer_norm · {count(parameters(final_norm))}",
                fontsize=10, color=FAINT, va="center")
        below = frame_top + 0.89
    arrow(ax, (x, below), (x, top - 0.25))
    ax.text(x + 0.12, top - 0.3, "to the next layer; after the last: last_hidden_state", fontsize=10,
            color=FAINT, va="center")
    return fig


def _frame(x: float, y: float, w: float, h: float) -> FancyBboxPatch:
    """The grey box around what repeats L times."""
    return FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.15", facecolor="#f5f5f5",
                          edgecolor="#999999", linewidth=1.2, zorder=0)


# --- the multi-head split -----------------------------------------------------------------------
class Stage(NamedTuple):
    what: str       # in words
    code: str       # the line of the library that does it
    picture: str    # how the tensor is drawn: "plain", "qkv", "striped", "cards", "squares"
    symbols: str    # the shape in the paper's letters
    shape: tuple    # the shape the library's code gave, batch first


def multihead_stages(config: BertConfig, seq_len: int) -> list[Stage]:
    """The tensors of one attention sub-layer, shapes from running the library's own code on empty
    (meta) tensors: `BertSelfAttention.split_heads`, `attention_probabilities`, `merge_heads`."""
    attention = on_meta(lambda: BertEncoder(config)).layer[0].attention
    sa = attention.self
    A, d, H = sa.num_heads, sa.head_dim, sa.query.in_features
    x = torch.empty(1, seq_len, H, device="meta")                         # (B, T, H)
    q, k, v = sa.query(x), sa.key(x), sa.value(x)                         # (B, T, H) each
    heads = sa.split_heads(q)                                             # (B, A, T, d)
    probs = attention_probabilities(heads, sa.split_heads(k))             # (B, A, T, T)
    context = probs @ sa.split_heads(v)                                   # (B, A, T, d)
    merged = sa.merge_heads(context)                                      # (B, T, H)
    out = attention.output.dense(merged)                                  # (B, T, H)
    joined = "(B, T, H)" if A * d == H else "(B, T, A·d)"                 # A·d < H once heads are pruned
    return [
        Stage("x, the layer's input", "hidden", "plain", "(B, T, H)", x.shape),
        Stage(f"queries, keys, values: Linear {H} → {q.size(-1)} each", "q = self.query(hidden)  (k, v alike)",
              "qkv", joined, q.shape),
        Stage(f"split H into A = {A} heads of d = {d}", f"split_heads: q.view(B, T, {A}, {d})", "striped",
              "(B, T, A, d)", heads.transpose(1, 2).shape),
        Stage("the heads side by side, like a batch", "split_heads: .transpose(1, 2)", "cards", "(B, A, T, d)",
              heads.shape),
        Stage("scores: every query · every key, per head", f"q @ k.transpose(-2, -1) / √{d}", "squares",
              "(B, A, T, T)", probs.shape),
        Stage("softmax over the keys, weights · values", "scores.softmax(dim=-1) @ v", "cards", "(B, A, T, d)",
              context.shape),
        Stage("Concat(head₁, …, head_A)", f"merge_heads: .transpose(1, 2).reshape(B, T, {merged.size(-1)})",
              "striped", joined, merged.shape),
        Stage(f"output projection Wᴼ: {out.size(-1)} → {out.size(-1)}", "attention.output.dense", "plain",
              "(B, T, H)", out.shape),
    ]


def _tensor(ax: Axes, kind: str, x: float, y: float, heads: int) -> float:
    """Draws one tensor centred on (x, y); returns its height. A (T, H) matrix is a wide bar, cut into
    one colour per head once it is split; the per-head matrices are a stack of cards."""
    colours = [HEAD_COLOURS[i % len(HEAD_COLOURS)] for i in range(heads)]
    edge = 0.8 if heads <= 16 else 0.3  # many heads: thin outlines, or the colours drown in ink
    if kind == "plain":
        box(ax, x, y, 2.2, 0.4, colour="#dddddd")
        return 0.4
    if kind == "qkv":
        for i, name in enumerate("qkv"):
            box(ax, x + (i - 1) * 0.76, y, 0.68, 0.4, name, "#dddddd")
        return 0.4
    if kind == "striped":
        for i, colour in enumerate(colours):
            ax.add_patch(Rectangle((x - 1.1 + 2.2 * i / heads, y - 0.2), 2.2 / heads, 0.4, facecolor=colour,
                                   edgecolor=INK, linewidth=edge))
        return 0.4
    w = 0.34 if kind == "squares" else 1.0
    dx, dy = min(0.09, 1.0 / max(heads - 1, 1)), min(0.03, 0.22 / max(heads - 1, 1))
    height = 0.34 + dy * (heads - 1)
    left, bottom = x - (w + dx * (heads - 1)) / 2, y - height / 2
    for i in reversed(range(heads)):  # the first head in front
        ax.add_patch(Rectangle((left + dx * i, bottom + dy * i), w, 0.34, facecolor=colours[i], edgecolor=INK,
                               linewidth=edge))
    return height


def plot_multihead_split(config: BertConfig | str = "bert-base", seq_len: int = 8) -> Figure:
    """Multi-head attention as reshapes: H is cut into A slices of d = H / A, each slice attends on its
    own (the heads become a batch dimension, so one matmul serves them all), and the slices are glued
    back. Only the two Linear steps have weights; splitting and joining cost nothing."""
    config, name = as_config(config)
    stages = multihead_stages(config, seq_len)
    A = config.num_attention_heads
    pitch, picture, shapes = 0.86, 5.65, 7.05
    top = 0.75 + pitch * len(stages)
    fig, ax = inch_canvas(WIDTH, top + 0.9)
    ax.text(0.15, top + 0.6, f"Multi-head self-attention, {name}, T = {seq_len}", fontsize=13, fontweight="bold",
            va="center")
    for x, header in ((0.15, "step, and the library's code"), (picture - 1.1, "tensor"), (shapes, "shape")):
        ax.text(x, top + 0.2, header, fontsize=10, color=FAINT, va="center")
    previous = None
    for i, stage in enumerate(stages):
        y = top - pitch * (i + 0.5)
        height = _tensor(ax, stage.picture, picture, y, A)
        if previous is not None:
            arrow(ax, (picture, previous), (picture, y + height / 2 + 0.04))
        previous = y - height / 2 - 0.04
        ax.text(0.15, y + 0.14, stage.what, fontsize=FONT, va="center")
        ax.text(0.15, y - 0.16, stage.code, fontsize=10, va="center", color=FAINT, family="monospace")
        ax.text(shapes, y + 0.14, stage.symbols, fontsize=FONT, va="center")
        ax.text(shapes, y - 0.16, "= (B, " + ", ".join(map(str, stage.shape[1:])) + ")", fontsize=FONT, va="center")
    colours = (f"One colour per head ({A} heads)" if A <= len(HEAD_COLOURS)
               else f"Colours repeat every {len(HEAD_COLOURS)} heads")
    ax.text(0.15, 0.3, f"{colours}. Only the two Linear steps have weights: the split and the join are reshapes.",
            fontsize=10, color=FAINT, va="center")
    return fig


# --- the pre-training heads ---------------------------------------------------------------------
# The paper's own example (Figure 2 / Appendix A.1), with two pieces masked: "my dog is cute",
# "he likes playing"; B follows A, so the NSP label is IsNext.
PRETRAINING_EXAMPLE = ["[CLS]", "my", "dog", "is", "[MASK]", "[SEP]", "he", "[MASK]", "play", "##ing", "[SEP]"]
MASKED = {4: "cute", 7: "likes"}  # position -> the original piece, the MLM label there
TIE = "#b03060"


def plot_pretraining_heads(config: BertConfig | str = "bert-base") -> Figure:
    """Both pre-training heads on one input. The MLM head turns a hidden vector back into a score per
    word piece with the input embedding matrix itself (tied: one V × H table reads tokens in and
    scores them out), and runs only where a piece was masked; NSP reads the pooled [CLS] vector and
    answers IsNext or NotNext. Sizes and the tie are read off a BertForPreTraining built from ``config``."""
    config, name = as_config(config)
    # The heads do not depend on the layers: one unpruned layer builds them as well as L.
    model = on_meta(lambda: BertForPreTraining(config.replace(num_hidden_layers=1, pruned_heads={})))
    words = model.bert.embeddings.word_embeddings.weight
    predictions, pooler = model.cls.predictions, model.bert.pooler.dense
    decoder, transform = predictions.decoder, predictions.transform
    V, E = decoder.weight.shape
    H = transform.dense.in_features
    tied = decoder.weight is words
    act = activation(config)
    fig, ax = inch_canvas(WIDTH, 7.6)
    ax.text(0.15, 7.3, f"Pre-training heads, {name}", fontsize=13, fontweight="bold", va="center")

    centres, w = slots(len(PRETRAINING_EXAMPLE), 0.2, 8.9)
    token_row(ax, PRETRAINING_EXAMPLE, centres, 1.2, w,
              colours=[ANSWER if i in MASKED else TOKEN for i in range(len(PRETRAINING_EXAMPLE))])
    for label, first, last in (("sentence A", 1, 4), ("sentence B", 6, 9)):
        a, b = centres[first] - w / 2, centres[last] + w / 2
        ax.plot([a, a, b, b], [0.93, 0.88, 0.88, 0.93], color=FAINT, linewidth=1)
        ax.text((a + b) / 2, 0.73, label, ha="center", va="center", fontsize=10, color=FAINT)
    symbol = "H" if E == H else "E"
    box(ax, 4.85, 1.95, 9.3, 0.5, f"Embeddings: word (V × {symbol} = {V} × {E}) + segment + position",
        EMBEDDING)
    box(ax, 4.55, 2.85, 8.7, 0.55, f"BERT encoder: {config.num_hidden_layers} layers, H = {H}, "
        f"A = {config.num_attention_heads}", ENCODER, fontweight="bold")
    for i, x in enumerate(centres):
        arrow(ax, (x, 1.41), (x, 1.7))
        arrow(ax, (x, 2.2), (x, 2.575))
        arrow(ax, (x, 3.125), (x, 3.52), head=False)
        used = i == 0 or i in MASKED
        box(ax, x, 3.7, w, 0.36, "C" if i == 0 else f"T{i}", HEAD if used else TOKEN,
            edge=INK if used else FAINT)

    # Next sentence prediction: pooler on C, then a two-way classifier.
    nsp_x, nsp_w = 1.5, 2.7
    arrow(ax, (centres[0], 3.88), (centres[0], 4.19))
    box(ax, nsp_x, 4.55, nsp_w, 0.72, f"Pooler on C\ndense {pooler.in_features} → {pooler.out_features}, "
        f"{type(model.bert.pooler.activation).__name__.lower()}", HEAD)
    arrow(ax, (nsp_x, 4.91), (nsp_x, 5.24))
    classes = model.cls.seq_relationship.out_features
    box(ax, nsp_x, 5.6, nsp_w, 0.72, f"NSP classifier\nLinear {model.cls.seq_relationship.in_features} → {classes}",
        HEAD)
    for x, label in ((nsp_x - 0.68, "IsNext"), (nsp_x + 0.68, "NotNext")):
        arrow(ax, (x, 5.96), (x, 6.33))
        box(ax, x, 6.55, 1.2, 0.42, label, ANSWER if label == "IsNext" else TOKEN)

    # Masked LM: transform, then the tied decoder, at the masked positions only.
    mlm_x, mlm_w = 5.975, 5.85
    for i in MASKED:
        arrow(ax, (centres[i], 3.88), (centres[i], 4.19))
        arrow(ax, (centres[i], 4.91), (centres[i], 5.24))
        arrow(ax, (centres[i], 5.96), (centres[i], 6.33))
        box(ax, centres[i], 6.55, 1.0, 0.42, MASKED[i], ANSWER)
    box(ax, mlm_x, 4.55, mlm_w, 0.72, f"MLM transform: dense {H} → {transform.dense.out_features}, {act}, "
        f"LayerNorm({transform.LayerNorm.normalized_shape[0]})\nonly at the [MASK] positions (label −100 elsewhere)",
        HEAD)
    box(ax, mlm_x, 5.6, mlm_w, 0.72, f"Decoder{', tied to the word embeddings' if tied else ''}: "
        f"V × {symbol} = {V} × {E}\nscores = h · {'E' if tied else 'W'}ᵀ + bias ({predictions.bias.numel()}), "
        "one per word piece", EMBEDDING if tied else HEAD)
    ax.text(centres[7] + 0.65, 6.55, f"softmax over {V} pieces", fontsize=10, color=FAINT, va="center")
    if tied:  # the same matrix at both ends of the model
        arrow(ax, (mlm_x + mlm_w / 2, 5.6), (9.3, 5.6), (9.3, 2.2), dashed=True, colour=TIE)
        ax.text(9.1, 5.75, "tied", fontsize=10, color=TIE, ha="center", va="center")

    ax.text(0.15, 0.4, "NSP label: IsNext when B followed A in the text, NotNext for a random B (50% each).",
            fontsize=10, color=FAINT, va="center")
    ax.text(0.15, 0.15, f"cls.predictions.decoder.weight is bert.embeddings.word_embeddings.weight: {tied}",
            fontsize=10, color=FAINT, va="center", family="monospace")
    return fig
