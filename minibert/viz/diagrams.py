"""Diagrams drawn by the library, so they stay true to the code they explain.

- `plot_figure3`: the paper's Figure 3 as attention masks: which positions each position may read
  in BERT (everything), OpenAI GPT (itself and the past) and ELMo (two separate one-way models),
  and why a bidirectional model cannot simply predict the words it reads.

Text is 11 pt at the figure's own size, which fits the width of a notebook, so nothing shrinks when
it is shown or projected.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from ..attention import causal_mask

FONT = 11
SEEN, HIDDEN, ITSELF = 0, 1, 2
COLOURS = ListedColormap(["#4c72b0", "#eeeeee", "#dd8452"])  # may read, may not, reads its own answer


def figure3_masks(T: int) -> dict[str, np.ndarray]:
    """(T, T) per model, row = the position that reads, column = the position read:
    SEEN, HIDDEN, or ITSELF (the position's own token, which it must not see if it is to predict it)."""
    past = causal_mask(T)[0, 0].numpy()                                   # (T, T) True where key <= query
    full = np.ones((T, T), dtype=bool)
    code = lambda visible: np.where(visible, SEEN, HIDDEN)
    seeing_itself = code(full)
    np.fill_diagonal(seeing_itself, ITSELF)
    return {"BERT (masked LM)\nreads all; [MASK] hides": code(full),
            "OpenAI GPT\nitself and the past": code(past),
            "ELMo: two one-way LMs\nleft→right | right→left": np.concatenate([code(past), code(past.T)], 1),
            "no masking\nreads its own answer": seeing_itself}


def plot_figure3(tokens: list[str] = ("the", "man", "went", "to", "the", "store")) -> Figure:
    """Figure 3 of the paper as four attention masks over ``tokens``."""
    T = len(tokens)
    masks = figure3_masks(T)
    fig, axes = plt.subplots(1, 4, figsize=(10, 3.8), gridspec_kw={"width_ratios": [1, 1, 2, 1]})
    for ax, (title, mask) in zip(axes, masks.items()):
        ax.imshow(mask, cmap=COLOURS, vmin=0, vmax=2)
        keys = list(tokens) * (mask.shape[1] // T)
        ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=FONT)
        ax.set_yticks(range(T), tokens, fontsize=FONT)
        ax.set_title(title, fontsize=FONT)
        ax.set_xlabel("is read", fontsize=FONT)
        if mask.shape[1] > T:
            ax.axvline(T - 0.5, color="black", linewidth=2)
    axes[0].set_ylabel("position that reads", fontsize=FONT)
    fig.tight_layout()
    return fig
