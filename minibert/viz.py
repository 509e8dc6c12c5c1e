"""Pictures the course draws more than once: attention matrices as heatmaps.

Row = query (the token that looks), column = key (the token looked at); each row of an attention
matrix is a probability distribution, so the colour scale is fixed to [0, 1] and maps of different
heads and layers can be compared by eye.
"""
from __future__ import annotations

import matplotlib.pyplot as plt


def plot_attention(weights, queries, keys, ax=None, title=None, annotate=False, fontsize=9):
    """Draw one (T_q, T_k) attention matrix with its tokens on the axes; returns the image for a colorbar."""
    ax = ax or plt.gca()
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
