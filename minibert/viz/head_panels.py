"""A few attention heads of one sentence, large enough to read from the back of a lecture room.

`plot_attention_grid`'s thumbnails (one per layer and head) show at a glance which heads are
diagonal, broad or parked on a special token, but at that size no token can be labelled: fine for
an overview, illegible when projected. `plot_heads` draws the heads a text talks about as panels of
a couple of inches, with the sentence's tokens on both axes. The panels share their tokens, so
only the first column carries the query labels and the lowest panel of each column the key labels;
one colour scale, [0, 1], for all.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure


def plot_heads(maps: Sequence, tokens: Sequence[str], titles: Sequence[str], columns: int = 4, size: float = 2.0,
               title: str | None = None, fontsize: int = 10) -> Figure:
    """One panel per (T, T) attention map in ``maps`` (row = query, column = key), titled by ``titles``,
    ``columns`` to a row; the tokens label the first column's rows and the bottom panels' columns."""
    maps = [torch.as_tensor(m).detach().float().cpu() for m in maps]
    if len(maps) != len(titles) or not maps:
        raise ValueError(f"one title per map: got {len(maps)} maps and {len(titles)} titles")
    T = len(tokens)
    for m in maps:
        if m.shape != (T, T):
            raise ValueError(f"each map must be one head's (T, T) attention for the {T} tokens given, got "
                             f"{tuple(m.shape)}; e.g. attentions[layer, head]")
    columns = min(columns, len(maps))
    rows = math.ceil(len(maps) / columns)
    fig, axes = plt.subplots(rows, columns, squeeze=False, layout="constrained",
                             figsize=(size * columns + 1.7, size * rows + 1.3))
    for index, ax in enumerate(axes.flat):
        if index >= len(maps):
            ax.axis("off")
            continue
        image = ax.imshow(maps[index].numpy(), cmap="viridis", vmin=0, vmax=1)
        ax.set_title(titles[index], fontsize=11)
        ax.set_xticks(range(T), tokens, rotation=90, fontsize=fontsize)
        ax.set_yticks(range(T), tokens, fontsize=fontsize)
        ax.tick_params(length=0, labelleft=index % columns == 0, labelbottom=index + columns >= len(maps))
    fig.colorbar(image, ax=axes, fraction=0.025, pad=0.01)
    fig.supxlabel("key (looked at)", fontsize=11)
    fig.supylabel("query (looking)", fontsize=11)
    if title:
        fig.suptitle(title, fontsize=12)
    return fig
