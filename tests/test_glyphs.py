"""A figure's text is written in characters its font can draw (notebook 05's random tokens)."""
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from minibert.viz.glyphs import drawable  # noqa: E402


def test_a_character_without_a_glyph_becomes_its_code_point():
    assert drawable("ᆫ") == "U+11AB"                       # a Korean letter: DejaVu Sans has no glyph for it
    assert drawable("café ±× ##ing [MASK]") == "café ±× ##ing [MASK]"
    assert drawable("a\tb c") == "a\tb c"


def test_drawn_text_makes_no_missing_glyph_warning():
    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, drawable("token ᆫ here"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # matplotlib warns where it draws a box
        fig.canvas.draw()
    plt.close(fig)
