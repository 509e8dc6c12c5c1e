"""Diagrams drawn by the library, so they stay true to the code they explain.

- `plot_figure3`: the paper's Figure 3 as attention masks: which positions each position may read
  in BERT (everything), OpenAI GPT (itself and the past) and ELMo (two separate one-way models),
  and why a bidirectional model cannot simply predict the words it reads.
- `plot_figure4`: the paper's Figure 4, BERT fine-tuned on four kinds of task: one linear layer on
  C for a sentence or a pair, start and end scores over a paragraph, a tag on every word.
- The encoder layer, the multi-head split and the pre-training heads, drawn from a config's real
  sizes, are in `minibert.viz.architecture_diagrams`.

Readability is measured, not hoped for: `drawn_texts` records every piece of text a figure draws,
`smallest_font_pt` the smallest of them, `displayed_size_in` the size of the picture a notebook
shows, and `overlapping_texts` the labels that run into each other. A notebook shows a figure at
100 pixels per inch (matplotlib's ``figure.dpi``) cropped to what is drawn, so a figure at most
10 inches wide fits the notebook's column unshrunk and its 11 pt text reads as 11 pt, on a screen or
a projector. The diagrams here are drawn on an axes measured in inches (`inch_canvas`), so boxes and
text are placed by the size they are shown at.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from ..attention import causal_mask
from ..heads import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification

FONT = 11
SEEN, HIDDEN, ITSELF = 0, 1, 2
COLOURS = ListedColormap(["#4c72b0", "#eeeeee", "#dd8452"])  # may read, may not, reads its own answer

# One colour per kind of part, in every diagram: the same thing looks the same wherever it appears.
INK, FAINT = "#222222", "#777777"
TOKEN, EMBEDDING, ENCODER, ATTENTION = "#ffffff", "#f7d4dc", "#e4e4e4", "#fcd9b5"
ADD_NORM, FEED_FORWARD, HEAD, ANSWER = "#f3efa1", "#c8e2f4", "#d3ecc8", "#fdbf6f"


# --- measuring what a figure shows ------------------------------------------------------------
class DrawnText(NamedTuple):
    text: str
    size_pt: float
    bbox: Bbox  # in pixels at the figure's dpi


def drawn_texts(fig: Figure) -> list[DrawnText]:
    """Every non-empty text that drawing ``fig`` puts on the page: titles, labels, tick labels,
    annotations, legend entries, plain texts. Found by drawing the figure and noting each text artist
    that asks the renderer to write something, so hidden tick labels, empty titles and the texts of
    an axes turned off do not count, and nothing drawn is missed."""
    renderer = _renderer(fig)
    writes = [0]
    for method in ("draw_text", "draw_tex"):
        def counted(*args, _write=getattr(renderer, method), **kwargs):  # noqa: B008 (bound now, on purpose)
            writes[0] += 1
            return _write(*args, **kwargs)
        setattr(renderer, method, counted)
    found: dict[int, DrawnText] = {}
    text_draw = Text.draw

    def draw(text: Text, r) -> None:  # Text.draw, noting the texts that wrote something
        before = writes[0]
        text_draw(text, r)
        if r is renderer and writes[0] > before and text.get_text().strip() and id(text) not in found:
            found[id(text)] = DrawnText(text.get_text(), text.get_fontsize(), text.get_window_extent(r))

    Text.draw = draw
    try:
        fig.draw(renderer)
    finally:
        Text.draw = text_draw
    return list(found.values())


def _renderer(fig: Figure) -> RendererAgg:
    """A renderer of its own, so that measuring never touches the canvas a notebook draws on."""
    return RendererAgg(math.ceil(fig.bbox.width), math.ceil(fig.bbox.height), fig.dpi)


def displayed_size_in(fig: Figure) -> tuple[float, float]:
    """(width, height) in inches of the picture a notebook shows: Jupyter's inline backend saves with
    ``bbox_inches="tight"``, cropped to what is drawn plus ``savefig.pad_inches``, so text sticking out
    of the figure makes the picture wider (and a picture wider than the column is shrunk)."""
    bbox = fig.get_tightbbox(_renderer(fig))
    pad = plt.rcParams["savefig.pad_inches"]
    return bbox.width + 2 * pad, bbox.height + 2 * pad


def smallest_font_pt(fig: Figure, column_width_in: float | None = None) -> float:
    """The smallest font size, in points, of any text ``fig`` draws (infinity when it draws none).

    With ``column_width_in`` (a notebook column is about 9.5 inches at 100 pixels an inch), the size
    as seen there: a picture wider than the column is shrunk to fit it, and its text with it."""
    sizes = [t.size_pt for t in drawn_texts(fig)]
    smallest = min(sizes, default=math.inf)
    if column_width_in is not None:
        smallest *= min(1.0, column_width_in / displayed_size_in(fig)[0])
    return smallest


def overlapping_texts(fig: Figure, gap_px: float = 0.0) -> list[tuple[str, str]]:
    """Pairs of drawn texts whose boxes come closer than ``gap_px`` pixels: labels that collide."""
    texts = drawn_texts(fig)
    pairs = []
    for i, a in enumerate(texts):
        grown = a.bbox.padded(gap_px / 2)
        for b in texts[i + 1:]:
            if grown.overlaps(b.bbox.padded(gap_px / 2)):
                pairs.append((a.text, b.text))
    return pairs


# --- drawing in inches --------------------------------------------------------------------------
def inch_canvas(width: float, height: float) -> tuple[Figure, Axes]:
    """A figure with one invisible axes measured in inches, so a box 2 units wide prints 2 inches wide
    and 11 pt text can be fitted into it by arithmetic."""
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    return fig, ax


def box(ax: Axes, x: float, y: float, w: float, h: float, text: str = "", colour: str = TOKEN,
        fontsize: float = FONT, edge: str = INK, dashed: bool = False, **text_kw) -> None:
    """A rounded box centred on (x, y) with ``text`` in its middle."""
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.06",
                                facecolor=colour, edgecolor=edge, linewidth=1.2,
                                linestyle="--" if dashed else "-"))
    if text:
        ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, color=INK, **text_kw)


def arrow(ax: Axes, *points: tuple[float, float], colour: str = INK, dashed: bool = False, head: bool = True) -> None:
    """An arrow along ``points`` (two or more): straight segments, the head on the last one."""
    xs, ys = zip(*points)
    style = "--" if dashed else "-"
    if len(points) > 2:
        ax.plot(xs[:-1], ys[:-1], color=colour, linewidth=1.5, linestyle=style, solid_capstyle="butt")
    ax.annotate("", xy=points[-1], xytext=points[-2],
                arrowprops=dict(arrowstyle="-|>" if head else "-", color=colour, linewidth=1.5, linestyle=style,
                                shrinkA=0, shrinkB=0, mutation_scale=14))


def token_row(ax: Axes, tokens: list[str], centres: list[float], y: float, w: float, h: float = 0.4,
              colours: list[str] | None = None) -> None:
    """Word pieces as boxes, one per position."""
    for i, (token, x) in enumerate(zip(tokens, centres)):
        box(ax, x, y, w, h, token, colours[i] if colours else TOKEN, fontsize=FONT)


def slots(n: int, left: float, right: float, widest: float = 0.9, gap: float = 0.07) -> tuple[list[float], float]:
    """Centres of ``n`` equal slots between ``left`` and ``right`` (at most ``widest`` apart, centred),
    and the width of a box that leaves ``gap`` between neighbours."""
    step = min(widest, (right - left) / n)
    start = (left + right) / 2 - step * n / 2
    return [start + step * (i + 0.5) for i in range(n)], step - gap


# --- Figure 3 -------------------------------------------------------------------------------------
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


# --- Figure 2 -------------------------------------------------------------------------------------
SEGMENT_COLOURS = ("#dbe8f6", "#fbe3cf")  # sentence A, sentence B


def plot_input_representation(tokens: list[str], input_ids: list[int], token_type_ids: list[int],
                              width: float = 9.8) -> Figure:
    """Figure 2 of the paper for one encoded pair: each position's input is the sum of its token's
    embedding (row ``input_id`` of the table), its segment's (E_A for token type 0, E_B for 1) and its
    position's (E_0, E_1, ...).
    Token boxes are coloured by segment, so the [SEP] that closes A is seen to belong to A. ``width``
    inches holds at most about 13 positions at a readable size: encode a short pair."""
    if not len(tokens) == len(input_ids) == len(token_type_ids):
        raise ValueError(f"{len(tokens)} tokens, {len(input_ids)} ids and {len(token_type_ids)} token types: "
                         "pass one id and one type per token")
    fig, ax = inch_canvas(width, 2.7)
    centres, w = slots(len(tokens), 1.6, width - 0.05, widest=0.8, gap=0.06)
    rows = [("input", tokens, [SEGMENT_COLOURS[t] for t in token_type_ids]),
            ("token", [f"E[{i}]" for i in input_ids], [EMBEDDING] * len(tokens)),
            ("segment", ["E_A" if t == 0 else "E_B" for t in token_type_ids],
             [SEGMENT_COLOURS[t] for t in token_type_ids]),
            ("position", [f"E_{i}" for i in range(len(tokens))], [EMBEDDING] * len(tokens))]
    for k, (name, texts, colours) in enumerate(rows):
        y = 2.35 - 0.62 * k
        ax.text(0.05, y, f"+ {name}" if k > 1 else name, fontsize=FONT, va="center",
                fontweight="bold" if k == 0 else "normal")
        for text, x, colour in zip(texts, centres, colours):
            box(ax, x, y, w, 0.4, text, colour, fontsize=10 if len(text) > 6 else FONT)
    ax.plot([1.5, width - 0.05], [2.04, 2.04], color=FAINT, linewidth=1)
    return fig


# --- Figure 4 -------------------------------------------------------------------------------------
class Figure4Panel(NamedTuple):
    title: str
    model: str                        # the library's class for the task, so the panel leads to the code
    reads: str                        # which output vectors its one new layer reads
    tokens: list[str]
    segments: list[tuple[str, int, int]]  # (name, first token, last token) under the tokens
    outputs: dict[int, str]           # position -> what the task layer predicts there ("" scored, not chosen;
                                      # "—" not scored: the label is -100)
    answer: frozenset[int] = frozenset()  # positions to highlight in the input (an answer span)


def figure4_panels() -> list[Figure4Panel]:
    """The four task types of Figure 4, each on a short example of the datasets the course uses."""
    return [
        Figure4Panel("(a) Sentence pair classification: MNLI, MRPC", BertForSequenceClassification.__name__,
                     "a class from C", ["[CLS]", "he", "ran", "[SEP]", "he", "moved", "[SEP]"],
                     [("sentence A", 1, 2), ("sentence B", 4, 5)], {0: "entailment"}),
        Figure4Panel("(b) Single sentence classification: SST-2", BertForSequenceClassification.__name__,
                     "a class from C", ["[CLS]", "a", "great", "film", "[SEP]"],
                     [("sentence", 1, 3)], {0: "positive"}),
        Figure4Panel("(c) Question answering: SQuAD v1.1", BertForQuestionAnswering.__name__,
                     "start, end over paragraph tokens", ["[CLS]", "who", "won", "[SEP]", "kim", "lee", "won", "[SEP]"],
                     [("question", 1, 2), ("paragraph", 4, 6)], {4: "start", 5: "end", 6: ""}, frozenset({4, 5})),
        Figure4Panel("(d) Single sentence tagging: CoNLL-2003 NER", BertForTokenClassification.__name__,
                     "a tag per word, on its first piece", ["[CLS]", "kim", "visits", "ber", "##lin", "[SEP]"],
                     [("sentence", 1, 4)], {1: "B-PER", 2: "O", 3: "B-LOC", 4: "—"}),
    ]


def _figure4_panel(ax: Axes, panel: Figure4Panel, x0: float, y0: float, width: float) -> None:
    left, right = x0 + 0.1, x0 + width - 0.1
    ax.text(x0 + 0.15, y0 + 3.75, panel.title, fontsize=FONT, fontweight="bold", va="center")
    ax.text(x0 + 0.15, y0 + 3.45, f"{panel.model}: {panel.reads}", fontsize=10, color=FAINT, va="center")
    centres, w = slots(len(panel.tokens), left, right, widest=0.8)
    colours = [ANSWER if i in panel.answer else TOKEN for i in range(len(panel.tokens))]
    token_row(ax, panel.tokens, centres, y0 + 0.6, w, colours=colours)
    for name, first, last in panel.segments:
        a, b = centres[first] - w / 2, centres[last] + w / 2
        ax.plot([a, a, b, b], [y0 + 0.33, y0 + 0.28, y0 + 0.28, y0 + 0.33], color=FAINT, linewidth=1)
        ax.text((a + b) / 2, y0 + 0.12, name, ha="center", va="center", fontsize=10, color=FAINT)
    box(ax, (left + right) / 2, y0 + 1.45, right - left, 0.5, "BERT", ENCODER, fontsize=13, fontweight="bold")
    counted = {i for i, label in panel.outputs.items() if label != "—"}
    for i, x in enumerate(centres):
        arrow(ax, (x, y0 + 0.8), (x, y0 + 1.2))
        arrow(ax, (x, y0 + 1.7), (x, y0 + 1.98), head=False)
        box(ax, x, y0 + 2.15, w, 0.34, "C" if i == 0 else f"T{i}", HEAD if i in counted else TOKEN)
    for i, label in panel.outputs.items():
        faint = label in ("", "—")
        arrow(ax, (centres[i], y0 + 2.32), (centres[i], y0 + 2.76), colour=FAINT if faint else INK)
        if i == 0:  # a class: one box, wide enough for the label, standing on C
            box(ax, centres[0] - w / 2 + 0.75, y0 + 2.95, 1.5, 0.38, f"class: {label}", ANSWER)
        else:
            box(ax, centres[i], y0 + 2.95, w, 0.38, label, TOKEN if faint else ANSWER, edge=FAINT if faint else INK,
                dashed=label == "")


PANEL = 4.8  # inches: two panels side by side show 9.8 inches wide, within a notebook's column


def plot_figure4() -> Figure:
    """Figure 4 of the paper: the same pre-trained BERT fine-tuned with one new output layer per task
    type. Sentence and pair tasks read the [CLS] vector C; SQuAD scores every paragraph token as the
    start and the end of the answer (the dashed box: scored, not chosen); tagging labels each word at
    its first piece (later pieces, "—", get label −100, which the loss skips)."""
    fig, ax = inch_canvas(2 * PANEL, 8)
    for k, panel in enumerate(figure4_panels()):
        _figure4_panel(ax, panel, x0=PANEL * (k % 2), y0=4.0 * (1 - k // 2), width=PANEL)
    ax.plot([PANEL, PANEL], [0.1, 7.9], color="#cccccc", linewidth=1)
    ax.plot([0.1, 2 * PANEL - 0.1], [4, 4], color="#cccccc", linewidth=1)
    return fig
