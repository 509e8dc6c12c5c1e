"""Notebook 10's picture of a QA model's start and end scores around the answer it picked.

A paragraph has about a hundred word pieces; a bar per piece with its label turned on its side is
unreadable when projected. So the tokens run down the y axis, written level, one row each, and only
the stretch around the chosen span is drawn (the title says which stretch of how many tokens); start
and end scores are two panels side by side on one scale, and the span's rows are shaded and named in bold.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

ROW_IN = 0.25       # inches per token row: room for 11 pt labels
TOKEN_PT = 11
SPAN_COLOUR = "#fff2b3"


def plot_span_scores(tokens: list[str], start_scores, end_scores, span: tuple[int, int], *, around: int = 12,
                     title: str | None = None) -> Figure:
    """Start scores S·T_i (left) and end scores E·T_j (right) of the tokens ``span[0] - around`` to
    ``span[1] + around`` (clipped to the paragraph), the span ``(i, j)`` shaded. ``tokens`` and the two
    score sequences run over the same positions (a window's context tokens); returns the figure."""
    start_scores, end_scores = np.asarray(start_scores, dtype=float), np.asarray(end_scores, dtype=float)
    if not len(tokens) == len(start_scores) == len(end_scores):
        raise ValueError(f"{len(tokens)} tokens, {len(start_scores)} start and {len(end_scores)} end scores: "
                         "pass one score of each per token")
    i, j = span
    if not 0 <= i <= j < len(tokens):
        raise ValueError(f"span {span} is not a start <= end inside the {len(tokens)} tokens")
    lo, hi = max(0, i - around), min(len(tokens) - 1, j + around)
    rows = np.arange(lo, hi + 1)
    fig, axes = plt.subplots(1, 2, sharex=True, sharey=True, figsize=(9, 1.4 + ROW_IN * len(rows)))
    for ax, scores, name, colour in [(axes[0], start_scores, "start score  S·T_i", "tab:blue"),
                                     (axes[1], end_scores, "end score  E·T_j", "tab:orange")]:
        ax.axhspan(i - 0.5, j + 0.5, color=SPAN_COLOUR, zorder=0)
        ax.barh(rows, scores[rows], height=0.7, color=colour)
        ax.axvline(0, color="grey", linewidth=1)
        ax.set_xlabel(name)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(rows, [tokens[r] for r in rows], fontsize=TOKEN_PT)
    for label, r in zip(axes[0].get_yticklabels(), rows):
        if i <= r <= j:
            label.set_fontweight("bold")
    axes[0].set_ylim(hi + 0.5, lo - 0.5)  # the paragraph's order, top to bottom
    shown = f"tokens {lo}-{hi} of the paragraph's {len(tokens)}, the chosen span shaded"
    fig.suptitle(f"{title}\n{shown}" if title else shown)
    fig.tight_layout()
    return fig
