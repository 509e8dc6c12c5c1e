"""Where BERT comes from: the encoder–decoder Transformer (Vaswani et al. 2017) beside BERT.

The Transformer was built for translation: an encoder reads the source sentence with attention in
both directions, and a decoder writes the target one token at a time, attending to the tokens it has
written (masked, left to right) and, through cross-attention, to the encoder's output. BERT keeps the
encoder alone, reads one text (or a pair) in both directions, and puts small heads on top: nothing
is generated, so nothing needs to be hidden from the right. GPT kept the decoder alone instead (without
the cross-attention), which is why it reads left to right. One picture, so the student sees which
half of the original BERT is.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from .diagrams import ADD_NORM, ATTENTION, EMBEDDING, FAINT, FEED_FORWARD, FONT, HEAD, INK, arrow, box, inch_canvas

WIDTH, HEIGHT = 9.6, 6.2
BOX = 2.3  # a sub-layer's width, in inches
CROSS = "#e7d3f3"  # cross-attention: the one sub-layer BERT has no counterpart of


def _stack(ax, x: float, bottom: float, parts: list[tuple[str, str]], width: float = BOX, height: float = 0.42,
           gap: float = 0.16) -> tuple[float, list[float]]:
    """Boxes bottom to top, joined by arrows; returns the top edge and each box's centre height."""
    centres, y = [], bottom
    for k, (text, colour) in enumerate(parts):
        if k:
            arrow(ax, (x, y - gap), (x, y))
        box(ax, x, y + height / 2, width, height, text, colour)
        centres.append(y + height / 2)
        y += height + gap
    return y - gap, centres


def _frame(ax, x: float, bottom: float, top: float, width: float, label: str) -> None:
    box(ax, x, (bottom + top) / 2, width, top - bottom, colour="#f5f5f5", edge="#999999")
    ax.text(x + width / 2 + 0.06, bottom + 0.3, label, fontsize=14, fontweight="bold", ha="left", va="center")


def _column(ax, x: float, parts: list[tuple[str, str]], repeat: str, inputs: str,
            outputs: str | None = None) -> tuple[float, list[float]]:
    """One stack, bottom to top: the input tokens, the embeddings, the repeated layer in its frame and the
    head on top; returns the frame's top and each sub-layer's centre height."""
    base = 0.95
    box(ax, x, 0.3, BOX, 0.5, inputs, "#ffffff", fontsize=10)
    arrow(ax, (x, 0.55), (x, base))
    box(ax, x, base + 0.2, BOX, 0.4, "embeddings + positions", EMBEDDING, fontsize=10)
    top, centres = _stack(ax, x, base + 0.62, parts, height=0.44 if len(parts) == 4 else 0.4)
    _frame(ax, x, base + 0.52, top + 0.1, BOX + 0.2, repeat)
    if outputs:
        arrow(ax, (x, top + 0.1), (x, top + 0.45))
        box(ax, x, top + 0.66, BOX, 0.42, outputs, HEAD, fontsize=10)
    return top, centres


def plot_encoder_decoder() -> Figure:
    """Left: the Transformer of "Attention is all you need" (N = 6 layers each side), encoder and
    decoder joined by cross-attention. Right: BERT, the encoder alone, L layers, with its pre-training
    heads. The colours are the course's: one per kind of part, as in every other diagram."""
    fig, ax = inch_canvas(WIDTH, HEIGHT)
    ax.text(0.1, HEIGHT - 0.25, "The Transformer (Vaswani et al. 2017): encoder + decoder", fontsize=13,
            fontweight="bold", va="center")
    ax.text(6.6, HEIGHT - 0.25, "BERT: the encoder alone", fontsize=13, fontweight="bold", va="center")

    # the encoder, the decoder and BERT: inputs at the bottom, outputs at the top
    encoder = [("self-attention\n(both directions)", ATTENTION), ("Add & Norm", ADD_NORM),
               ("feed-forward", FEED_FORWARD), ("Add & Norm", ADD_NORM)]
    decoder = [("masked self-attention\n(left to right)", ATTENTION), ("Add & Norm", ADD_NORM),
               ("cross-attention\n(to the encoder)", CROSS), ("Add & Norm", ADD_NORM),
               ("feed-forward", FEED_FORWARD), ("Add & Norm", ADD_NORM)]
    ex, dx, bx, lane = 1.45, 4.75, 7.9, 3.15   # the three columns' centres; the cross-attention arrow's lane
    encoder_top, _ = _column(ax, ex, encoder, "× N", "source tokens\n(German)")
    _, decoder_centres = _column(ax, dx, decoder, "× N", "target tokens so far\n(English, shifted right)",
                                 "next-token softmax")
    _column(ax, bx, encoder, "× L", "[CLS] text A [SEP] text B [SEP]", "MLM and NSP heads")
    cross_y = decoder_centres[2]
    # cross-attention reads the encoder's last layer: the link BERT does not have
    arrow(ax, (ex, encoder_top + 0.1), (ex, encoder_top + 0.4), (lane, encoder_top + 0.4), (lane, cross_y),
          (dx - BOX / 2, cross_y), colour="#7b3fa0")
    ax.text(ex, encoder_top + 0.58, "encoder output: keys and values\nfor every decoder layer", fontsize=10,
            ha="center", va="bottom", color="#7b3fa0")
    ax.plot([6.45, 6.45], [0.1, HEIGHT - 0.5], color=FAINT, linewidth=1, linestyle=":")
    ax.text(bx, HEIGHT - 0.75, "no decoder, no cross-attention:\nevery token reads both sides", fontsize=FONT,
            ha="center", va="center", color=INK)
    return fig
