"""Pictures for notebook 11b (ModernBERT, built from BERT): one change to BERT's layer, one picture.

Each function only draws numbers the notebook computed in view with the library (`minibert.model`,
`minibert.modernbert`), so a picture cannot disagree with the code it explains, and the notebook's cells
stay short enough to read. The figures are meant to be projected: at most 10 inches wide, every label,
tick and title at 14 pt, set on each text itself (an ``rc_context`` around the drawing would be forgotten by
the ticks matplotlib makes again when the notebook renders the figure).
"""
from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

FONT = 14
POST, PRE = "#c44e52", "#4c72b0"       # post-LN (BERT), pre-LN (ModernBERT): the same two colours in every panel
BAND = ListedColormap(["#eeeeee", "#4c72b0"])  # a mask: may not attend, may attend
PADDING = "#d9d9d9"


def _readable(ax, title: str, xlabel: str = "", ylabel: str = "", whole_x: bool = False) -> None:
    ax.set_title(title, fontsize=FONT)
    ax.set_xlabel(xlabel, fontsize=FONT)
    ax.set_ylabel(ylabel, fontsize=FONT)
    ax.tick_params(labelsize=FONT)
    if whole_x:  # layers and positions: no tick at 2.5
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def plot_norm_placement(stream: dict[str, list[float]], gradient: dict[str, list[float]]) -> Figure:
    """Post-LN against pre-LN in one stack at initialisation. Left: the residual stream's size (RMS per token)
    after the embeddings (layer 0) and after each layer; right: the gradient norm of each layer's
    feed-forward output matrix W₂. Both keyed by the same two names, post-LN first; layers count from 1."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    for (name, sizes), colour in zip(stream.items(), (POST, PRE)):
        left.plot(range(len(sizes)), sizes, "o-", color=colour, label=name)
    for (name, norms), colour in zip(gradient.items(), (POST, PRE)):
        right.plot(range(1, len(norms) + 1), norms, "o-", color=colour, label=name)
    _readable(left, "the residual stream", "layer (0: embeddings)", "RMS of a token's vector", whole_x=True)
    _readable(right, "the gradient each layer gets", "layer", "‖∂loss/∂W₂‖", whole_x=True)
    left.set_ylim(bottom=0)
    right.set_ylim(bottom=0)
    fig.legend(*left.get_legend_handles_labels(), fontsize=FONT, loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.09, 1, 1))  # room below the panels for the one legend of both
    return fig


def plot_feed_forward_parameters(counts: dict[str, int]) -> Figure:
    """One horizontal bar per feed-forward network (name -> parameters), its count written at its end: the
    sizes side by side, which a table of seven-digit numbers hides."""
    fig, ax = plt.subplots(figsize=(10, 0.9 + 0.75 * len(counts)))
    names = list(counts)[::-1]  # the first at the top
    values = [counts[n] / 1e6 for n in names]
    colours = ["#8c8c8c", PRE, "#a6c0e0", PRE][:len(names)][::-1]  # BERT's grey, ModernBERT's blue, a what-if paler
    bars = ax.barh(names, values, color=colours)
    ax.bar_label(bars, [f"{v:.2f}M" for v in values], padding=6, fontsize=FONT)
    ax.set_xlim(0, 1.25 * max(values))
    _readable(ax, "feed-forward parameters per layer, H = 768", "millions of parameters")
    fig.tight_layout()
    return fig


def plot_rotations(turned: dict[str, np.ndarray], scores: np.ndarray) -> Figure:
    """RoPE in three panels. First two: one pair of a query's dimensions each (title -> (P, 2) points), at
    positions 0, 1, 2..., every arrow labelled with its position: the same vector, turned further the later the
    token, one pair fast and one slow. Last: the scores q_m·k_n of one query and one key placed at every pair of
    positions, (T, T): constant along each diagonal, because only n − m matters."""
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.9), gridspec_kw={"width_ratios": [1, 1, 1.3]})
    reach = 1.4 * max(np.linalg.norm(p, axis=1).max() for p in turned.values())
    for ax, (title, points), colour in zip(axes, turned.items(), (PRE, POST)):
        for position, (x, y) in enumerate(points):
            ax.annotate("", (x, y), (0, 0), arrowprops=dict(arrowstyle="-|>", color=colour, lw=2))
            ax.text(1.2 * x, 1.2 * y, str(position), color=colour, fontsize=FONT, ha="center", va="center")
        ax.axhline(0, color="#bbbbbb", lw=1, zorder=0)
        ax.axvline(0, color="#bbbbbb", lw=1, zorder=0)
        ax.set(xlim=(-reach, reach), ylim=(-reach, reach), aspect="equal", xticks=[], yticks=[])
        _readable(ax, title, "dimension i", "dimension i + d/2" if ax is axes[0] else "")
    image = axes[2].imshow(scores, cmap="RdBu_r", vmin=-np.abs(scores).max(), vmax=np.abs(scores).max())
    _readable(axes[2], "the score q·k", "n (key's position)", "m (query's position)")
    bar = fig.colorbar(image, ax=axes[2], shrink=0.8)
    bar.ax.tick_params(labelsize=FONT)
    fig.tight_layout()
    return fig


def plot_windows(local, global_, reach: dict[str, list[int]]) -> Figure:
    """Alternating attention. The (T, T) boolean masks of a local layer (a band: |i − j| <= window // 2) and of
    a global one (everything), then how many tokens on each side one token has heard from after each
    layer (name -> one count per layer, layers from 1), for a stack of local layers only and for ModernBERT's
    pattern."""
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.9), gridspec_kw={"width_ratios": [1, 1, 1.25]})
    for ax, mask, title in [(axes[0], local, "local layer"), (axes[1], global_, "global layer")]:
        ax.imshow(np.asarray(mask, dtype=float), cmap=BAND, vmin=0, vmax=1)
        _readable(ax, title, "key j", "query i" if ax is axes[0] else "")
    for (name, counts), colour, marker in zip(reach.items(), (PRE, POST), ("o-", "s--")):
        axes[2].plot(range(1, len(counts) + 1), counts, marker, color=colour, label=name)
    _readable(axes[2], "how far one token hears", "layers", "tokens on each side", whole_x=True)
    axes[2].set_ylim(0, 1.5 * max(max(c) for c in reach.values()))  # room above the lines for the legend
    axes[2].legend(fontsize=FONT, loc="upper left")
    fig.tight_layout()
    return fig


def plot_unpadding(attention_mask) -> Figure:
    """The same tokens two ways, on one scale. Left: the padded batch, B rows of T positions, each real token
    coloured by its sequence and padding grey. Right: the packed tokens, N rows of the model's (N, H) matrix,
    laid out T to a line so that the two areas compare: what unpadding leaves out is the grey."""
    mask = np.asarray(attention_mask, dtype=bool)                  # (B, T)
    B, T = mask.shape
    sequence = np.where(mask, np.arange(B)[:, None], -1)           # (B, T): each real token's sequence, -1 for padding
    packed = sequence[mask]                                        # (N,): in packing order, row after row
    lines = -(-packed.size // T)                                   # ceil(N / T)
    grid = np.full(lines * T, -2)
    grid[:packed.size] = packed
    colours = ListedColormap(["#ffffff", PADDING] + [plt.get_cmap("tab10")(b % 10) for b in range(B)])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, image, title in [(left, sequence, f"padded: B × T = {B} × {T} = {B * T} rows"),
                             (right, grid.reshape(lines, T), f"packed: N = {packed.size} rows")]:
        ax.imshow(image + 2, cmap=colours, vmin=-0.5, vmax=B + 1.5, aspect="auto", interpolation="nearest")
        ax.set_ylim(B - 0.5, -0.5)  # the same height on both sides: areas compare
        _readable(ax, title, "position" if ax is left else "packed row, T to a line", "sequence" if ax is left else "")
        if ax is left:
            ax.set_yticks(range(B), [str(b + 1) for b in range(B)])  # sequences count from 1, as layers do
        else:
            ax.set_yticks([])
    left.legend(handles=[Patch(color=PADDING, label="[PAD]")], fontsize=FONT, loc="lower right")
    fig.tight_layout()
    return fig


def plot_grid(rows: dict[str, dict[str, list[float]]], lines: dict[str, dict[str, float]]) -> Figure:
    """The 2018 → 2024 grid, one line per row and one panel per measure: every seed a small dot, their mean a
    large one with its standard deviation, BERT's rows red and ModernBERT's blue (by the label's first word).
    ``rows``: label -> measure -> one value per seed, the first row at the top; ``lines``: measure -> reference
    name -> value, drawn across its panel (the plateau, the untrained encoder, the word alone) and named once
    in a legend below."""
    measures, height = list(next(iter(rows.values()))), 1.4 + 0.42 * len(rows)
    fig, axes = plt.subplots(1, len(measures), figsize=(10, height), sharey=True)
    axes = np.atleast_1d(axes)
    styles = itertools.cycle([("--", "#555555"), (":", "#555555"), ("-.", "#999999"), (":", "#999999")])
    named = {}
    family = [label.split()[0] for label in rows]
    for ax, measure in zip(axes, measures):
        for y in range(1, len(rows)):
            if family[y] != family[y - 1]:  # a rule between BERT's rows and ModernBERT's
                ax.axhline(y - 0.5, color="#bbbbbb", lw=1)
        for y, values in enumerate(rows.values()):
            colour = PRE if family[y] == "ModernBERT" else POST
            seeds = np.asarray(values[measure], dtype=float)
            ax.scatter(seeds, [y] * len(seeds), s=18, color=colour, alpha=0.45, zorder=2)
            spread = seeds.std(ddof=1) if len(seeds) > 1 else 0.0
            ax.errorbar(seeds.mean(), y, xerr=spread, fmt="o", ms=8, capsize=4, color=colour, zorder=3)
        for name, value in lines.get(measure, {}).items():
            if name not in named:
                named[name] = next(styles)
            style, colour = named[name]
            ax.axvline(value, ls=style, color=colour, lw=1.5, zorder=1, label=name)
        _readable(ax, measure)
        ax.margins(x=0.1)  # no dot cut in half by the frame
        ax.grid(axis="x", color="#eeeeee", zorder=0)
    axes[0].set_yticks(range(len(rows)), list(rows))
    axes[0].set_ylim(len(rows) - 0.5, -0.5)  # the first row at the top
    handles = {h.get_label(): h for ax in axes for h in ax.get_legend_handles_labels()[0]}
    fig.legend(list(handles.values()), list(handles), fontsize=FONT, loc="lower center", ncol=len(handles), frameon=False)
    fig.tight_layout(rect=(0, 0.5 / height, 1, 1))  # room below the panels for the legend
    return fig
