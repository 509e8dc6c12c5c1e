"""Text a figure's font can draw: a character the font has no glyph for is written as its code point.

matplotlib draws such a character as an empty box (and warns). Figures that show entries of a
vocabulary meet them: a random replacement token (notebook 05) may be any of BERT's 30,522 WordPiece
entries, Korean, Devanagari or Tibetan letters among them, which the default font, DejaVu Sans, does
not cover. `drawable` writes ``ᆫ`` as ``U+11AB``, so the picture still says which token it is; only the
first font of the family is consulted, so a figure comes out the same on every machine.
"""
from __future__ import annotations

from functools import lru_cache

from matplotlib import font_manager
from matplotlib.ft2font import FT2Font


@lru_cache(maxsize=8)
def _covered(font_path: str) -> frozenset[int]:
    """The code points the font file has a glyph for."""
    return frozenset(FT2Font(font_path).get_charmap())


def drawable(text: str, font: font_manager.FontProperties | None = None) -> str:
    """``text`` with each character ``font`` (default: matplotlib's current default font) cannot draw
    replaced by its code point, e.g. ``"ᆫ"`` -> ``"U+11AB"``; whitespace is kept."""
    covered = _covered(font_manager.findfont(font or font_manager.FontProperties()))
    return "".join(c if c.isspace() or ord(c) in covered else f"U+{ord(c):04X}" for c in text)
