"""Notebook 09's picture of which word piece carries a word's tag.

Drawn by the library rather than in the notebook, because it computes the labels with
`tagging.first_piece_labels`: the function notebook 09's exercise asks the student to write, which the
notebook should not call in plain sight just above the exercise.
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..tasks.tagging import first_piece_labels
from .diagrams import FAINT, box, inch_canvas

TYPE_COLOURS = {"PER": "#fcd9b5", "ORG": "#d3ecc8", "LOC": "#c8e2f4", "MISC": "#f7d4dc", "": "#ffffff"}
CHAR_IN = 10 / 72 * 0.62  # about the width of one character of 10 pt text, in inches
IGNORED = -100


def plot_first_piece_alignment(words: list[str], tags: list[int], tokens: list[str], word_ids: list,
                               tag_names: list[str]) -> Figure:
    """Each word over its pieces, and the label each piece is trained on: the word's tag id on its first
    piece, -100 (ignored by the loss) on its other pieces and on [CLS]/[SEP]. ``tags``: one tag id per word;
    ``tokens``/``word_ids``: the tokenizer's pieces and the word each came from (None: a special token);
    ``tag_names``: tag names by id, IOB2 (``B-PER``), whose entity type picks the colour."""
    if len(tokens) != len(word_ids):
        raise ValueError(f"{len(tokens)} tokens but {len(word_ids)} word ids: pass the same tokenizer output for both")
    labels = first_piece_labels(word_ids, tags)
    colour = {i: TYPE_COLOURS.get(name[2:], "#ffffff") for i, name in enumerate(tag_names)}
    shown_ids = ["None" if w is None else str(w) for w in word_ids]
    widths = [max(map(len, texts)) * CHAR_IN + 0.18 for texts in zip(tokens, shown_ids, map(str, labels))]
    left, gap, h = 1.3, 0.05, 0.36
    starts = np.cumsum([left] + [w + gap for w in widths[:-1]])  # left edge of each token's column
    rows = {"word": 2.85, "its tag": 2.35, "word piece": 1.75, "word_ids": 1.25, "label": 0.75}
    fig, ax = inch_canvas(starts[-1] + widths[-1] + 0.1, 3.2)
    for name, y in rows.items():
        ax.text(left - 0.12, y, name, ha="right", va="center", fontsize=11)
    for w, (word, tag) in enumerate(zip(words, tags)):
        pieces = [i for i, x in enumerate(word_ids) if x == w]
        if not pieces:  # cut off by truncation: the word has no tokens
            continue
        x0, x1 = starts[pieces[0]], starts[pieces[-1]] + widths[pieces[-1]]
        box(ax, (x0 + x1) / 2, rows["word"], x1 - x0, h, word, colour[tag], fontsize=11)
        box(ax, (x0 + x1) / 2, rows["its tag"], x1 - x0, h, tag_names[tag], colour[tag], fontsize=10)
    for i, (x, w) in enumerate(zip(starts, widths)):
        centre = x + w / 2
        box(ax, centre, rows["word piece"], w, h, tokens[i], fontsize=10)
        ax.text(centre, rows["word_ids"], shown_ids[i], ha="center", va="center", fontsize=10)
        if labels[i] == IGNORED:  # ignored by the loss: grey, dashed
            box(ax, centre, rows["label"], w, h, "", "#eeeeee", edge=FAINT, dashed=True)
            ax.text(centre, rows["label"], str(IGNORED), ha="center", va="center", fontsize=10, color=FAINT)
        else:
            box(ax, centre, rows["label"], w, h, str(labels[i]), colour[labels[i]], fontsize=10)
    used = ", ".join(f"{i} = {tag_names[i]}" for i in sorted({label for label in labels if label != IGNORED}))
    ax.text(left, 0.22, f"label: the id of the word's tag on its first piece ({used}); {IGNORED} elsewhere, ignored",
            ha="left", va="center", fontsize=10, color=FAINT)
    return fig
