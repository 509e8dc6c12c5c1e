"""The paper's Figure 1: one architecture, pre-trained once, then fine-tuned whole for each task.

Its two claims are what a lecture draws it for: the model that answers SQuAD questions *is* the
pre-trained model (the same modules, the same sizes, its weights as the starting point), and
fine-tuning updates **all** of its parameters, not only the small new output layer. Both are read
off the library's modules here, built on the ``meta`` device like the other architecture diagrams:
the encoder's parameters are counted in `BertForPreTraining` and in `BertForQuestionAnswering`, and
so are what each adds on top (the pre-training heads, which fine-tuning drops, and the start/end
layer it adds at random).
"""
from __future__ import annotations

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..config import BertConfig
from ..heads import BertForPreTraining, BertForQuestionAnswering
from .architecture_diagrams import as_config, count, parameters
from .diagrams import ANSWER, ENCODER, FAINT, FONT, HEAD, INK, TOKEN, arrow, box, inch_canvas, slots, token_row

PANEL = 4.8  # inches: two panels side by side, 9.8 wide with the gap, within a notebook's column


def figure1_counts(config: BertConfig | str = "bert-base") -> dict[str, int]:
    """Parameters of the encoder and of what sits on it, before and after fine-tuning.

    ``encoder``: what fine-tuning starts from (the QA model's `bert`, which has no pooler);
    ``pretraining_heads``: what pre-training has on top (masked LM transform and bias, NSP, the pooler
    NSP reads), dropped for SQuAD; ``qa_head``: the start/end layer, new and random; ``fine_tuned``:
    every parameter the fine-tuning optimiser updates."""
    config, _ = as_config(config)
    with torch.device("meta"):
        pretraining, qa = BertForPreTraining(config), BertForQuestionAnswering(config)
    encoder = parameters(qa.bert)
    return {"encoder": encoder, "pretraining_heads": parameters(pretraining) - encoder,
            "qa_head": parameters(qa.qa_outputs), "fine_tuned": parameters(qa)}


def _panel(ax: Axes, x0: float, title: str, model: str, tokens: list[str], segments: list[tuple[str, int, int]],
           encoder_text: str, outputs: dict[int, str]) -> None:
    left, right = x0 + 0.1, x0 + PANEL - 0.1
    ax.text(x0 + 0.15, 5.05, title, fontsize=FONT + 1, fontweight="bold", va="center")
    ax.text(x0 + 0.15, 4.72, model, fontsize=10, color=FAINT, va="center")
    centres, w = slots(len(tokens), left, right, widest=0.8)
    token_row(ax, tokens, centres, 0.75, w, colours=[ANSWER if t == "[MASK]" else TOKEN for t in tokens])
    for name, first, last in segments:
        a, b = centres[first] - w / 2, centres[last] + w / 2
        ax.plot([a, a, b, b], [0.48, 0.43, 0.43, 0.48], color=FAINT, linewidth=1)
        ax.text((a + b) / 2, 0.25, name, ha="center", va="center", fontsize=10, color=FAINT)
    box(ax, (left + right) / 2, 1.8, right - left, 0.9, encoder_text, ENCODER, fontsize=FONT)
    for i, x in enumerate(centres):
        arrow(ax, (x, 0.95), (x, 1.35))
        arrow(ax, (x, 2.25), (x, 2.6), head=False)
        box(ax, x, 2.78, w, 0.34, "C" if i == 0 else f"T{i}", HEAD if i in outputs else TOKEN)
    for i, label in outputs.items():
        arrow(ax, (centres[i], 2.95), (centres[i], 3.45))
        width = max(w, 0.12 * len(label))
        x = min(max(centres[i], left + width / 2), right - width / 2)   # a long label stays inside the panel
        box(ax, x, 3.68, width, 0.4, label, ANSWER)


def plot_figure1(config: BertConfig | str = "bert-base") -> Figure:
    """Figure 1 of the paper for ``config``: pre-training (masked LM and NSP on a pair of sentences)
    and fine-tuning on SQuAD, the same encoder in both, every parameter updated in the second."""
    resolved, sizes = as_config(config)
    counts = figure1_counts(resolved)
    fig, ax = inch_canvas(2 * PANEL + 0.2, 5.4)
    _panel(ax, 0, "Pre-training", "BertForPreTraining: masked LM + next sentence",
           ["[CLS]", "my", "[MASK]", "[SEP]", "it", "[MASK]", "[SEP]"],
           [("masked sentence A", 1, 2), ("masked sentence B", 4, 5)],
           f"BERT ({sizes})\n{count(counts['encoder'])} parameters",
           {0: "NSP: IsNext", 2: "dog", 5: "barks"})
    _panel(ax, PANEL + 0.2, "Fine-tuning", "BertForQuestionAnswering: SQuAD",
           ["[CLS]", "who", "won", "[SEP]", "kim", "lee", "won", "[SEP]"],
           [("question", 1, 2), ("paragraph", 4, 6)],
           f"the same BERT, its weights as the start\nall {count(counts['fine_tuned'])} parameters updated",
           {4: "start", 5: "end"})
    ax.plot([PANEL + 0.1, PANEL + 0.1], [0.1, 5.3], color="#cccccc", linewidth=1)
    ax.text(PANEL + 0.1, 4.3, f"the encoder's {count(counts['encoder'])} weights carried over  →\n"
            f"pre-training heads dropped ({count(counts['pretraining_heads'])}), "
            f"start/end layer added at random ({count(counts['qa_head'])})", ha="center", va="center",
            fontsize=10, color=INK, bbox=dict(facecolor="white", edgecolor=FAINT, boxstyle="round,pad=0.3"))
    return fig
