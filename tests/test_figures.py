"""Every figure can be read when projected: nothing wider than the notebook's column, no text under 10 pt.

A notebook shows a stored PNG at its pixel size in a column about 1000 pixels wide (matplotlib saves
at 100 pixels per inch), so a wider picture is shrunk by the browser, its text with it. Two checks:

- the stored pictures: every ``image/png`` output of every notebook is at most 1000 pixels wide;
- the code that draws them: no literal font size under 10 pt (``fontsize=8``, ``labelsize=7``,
  ``size=9`` in a call that writes text, a ``fontsize=9`` default, ``"small"``) and no ``figsize``
  wider than 10 inches, in the notebooks' code cells and in ``minibert/viz``.

The lecture diagrams measure what they draw (tests/test_diagrams.py); these checks cover the rest.
"""
import ast
import base64
import io
import json
from pathlib import Path

import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
VIZ = sorted((ROOT / "minibert" / "viz").glob("*.py"))

MAX_WIDTH_PX = 1000  # the notebook column at 100 pixels per inch
MAX_FIGSIZE_IN = 10
MIN_FONT_PT = 10
SMALL_NAMES = {"xx-small", "x-small", "small", "smaller"}  # 5.8, 6.9, 8.3 pt, and 83% of the size before
FONT_KEYWORDS = {"fontsize", "labelsize", "titlesize"}
# Calls where ``size=`` is the font size (elsewhere it may be a marker's or a thumbnail's size).
TEXT_CALLS = {"text", "figtext", "annotate", "title", "set_title", "suptitle", "xlabel", "ylabel", "set_xlabel",
              "set_ylabel", "supxlabel", "supylabel", "set_label_text", "xticks", "yticks", "set_xticks",
              "set_yticks", "set_xticklabels", "set_yticklabels", "legend", "clabel", "bar_label", "table",
              "set_fontsize", "set_size", "rc"}
RC_FONT_KEYS = {"font.size", "axes.titlesize", "axes.labelsize", "xtick.labelsize", "ytick.labelsize",
                "legend.fontsize", "figure.titlesize"}  # rcParams that size text


def load(path):
    return json.loads(path.read_text())


def code_cells(path):
    """(cell index, source) of each code cell, IPython magics and shell lines blanked (line numbers kept)."""
    for index, cell in enumerate(load(path)["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or source.lstrip().startswith("%%"):
            continue
        yield index, "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def png_widths(path):
    """(cell index, width in pixels as shown) of every stored PNG of a notebook."""
    for index, cell in enumerate(load(path)["cells"]):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                width = output.get("metadata", {}).get("image/png", {}).get("width")  # a retina picture's
                if width is None:
                    width = Image.open(io.BytesIO(base64.b64decode(data["image/png"]))).width
                yield index, width


# --- the static rule --------------------------------------------------------------------------
def numbers(node, constants):
    """The numbers a font size or width expression can take: a literal, a module-level constant,
    either branch of ``a if c else b``; nothing for what is only known at run time."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return [node.value]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return [-n for n in numbers(node.operand, constants)]
    if isinstance(node, ast.Name) and node.id in constants:
        return [constants[node.id]]
    if isinstance(node, ast.IfExp):
        return numbers(node.body, constants) + numbers(node.orelse, constants)
    return []


def too_small(node, constants):
    if isinstance(node, ast.Constant) and node.value in SMALL_NAMES:
        return f"{node.value!r}"
    small = [n for n in numbers(node, constants) if n < MIN_FONT_PT]
    return str(small[0]) if small else None


def call_name(call):
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def constants_of(trees):
    """Names bound once to a number at the top level (``FONT = 11``), across the given trees."""
    found = {}
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = numbers(node.value, {})
                if len(value) == 1:
                    found[node.targets[0].id] = value[0]
    return found


def unreadable(tree, constants):
    """(line, what) for each literal font size under 10 pt and each figure wider than 10 inches."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                font = keyword.arg in FONT_KEYWORDS or (keyword.arg == "size" and call_name(node) in TEXT_CALLS)
                if font and (small := too_small(keyword.value, constants)):
                    found.append((keyword.value.lineno, f"{keyword.arg}={small} in {call_name(node)}(): "
                                                        f"under {MIN_FONT_PT} pt"))
                if keyword.arg == "figsize" and isinstance(keyword.value, (ast.Tuple, ast.List)) and keyword.value.elts:
                    wide = [w for w in numbers(keyword.value.elts[0], constants) if w > MAX_FIGSIZE_IN]
                    if wide:
                        found.append((keyword.value.lineno, f"figsize width {wide[0]} > {MAX_FIGSIZE_IN} inches"))
            if call_name(node) == "set_size_inches" and node.args:
                first = node.args[0].elts[0] if isinstance(node.args[0], (ast.Tuple, ast.List)) else node.args[0]
                wide = [w for w in numbers(first, constants) if w > MAX_FIGSIZE_IN]
                if wide:
                    found.append((node.lineno, f"set_size_inches width {wide[0]} > {MAX_FIGSIZE_IN} inches"))
        elif isinstance(node, ast.Dict):  # rcParams.update({"font.size": 8}), plt.rc_context({...})
            for key, value in zip(node.keys, node.values):
                small = too_small(value, constants)
                if isinstance(key, ast.Constant) and key.value in RC_FONT_KEYS and small:
                    found.append((value.lineno, f"{key.value!r}: {small}: under {MIN_FONT_PT} pt"))
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):  # rcParams["font.size"] = 8
            key, small = node.targets[0].slice, too_small(node.value, constants)
            if isinstance(key, ast.Constant) and key.value in RC_FONT_KEYS and small:
                found.append((node.lineno, f"{key.value!r} = {small}: under {MIN_FONT_PT} pt"))
        elif isinstance(node, (ast.FunctionDef, ast.Lambda)):
            args = node.args.posonlyargs + node.args.args
            defaults = list(zip(args[len(args) - len(node.args.defaults):], node.args.defaults))
            defaults += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
            for arg, default in defaults:
                if arg.arg in FONT_KEYWORDS and (small := too_small(default, constants)):
                    found.append((default.lineno, f"default {arg.arg}={small}: under {MIN_FONT_PT} pt"))
    return sorted(found)


# --- the tests --------------------------------------------------------------------------------
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_figures_fit_the_notebook_column(path):
    wide = [f"{path.name} cell {index}: {width} px" for index, width in png_widths(path) if width > MAX_WIDTH_PX]
    assert not wide, (f"figures wider than {MAX_WIDTH_PX} px are shrunk to fit the column, text and all "
                      f"(figsize at most {MAX_FIGSIZE_IN} inches, nothing sticking out): " + "; ".join(wide))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_code_draws_readable_figures(path):
    cells = [(index, ast.parse(source)) for index, source in code_cells(path)]
    constants = constants_of(tree for _, tree in cells)
    found = [f"{path.name} cell {index} line {line}: {what}"
             for index, tree in cells for line, what in unreadable(tree, constants)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", VIZ, ids=lambda p: p.stem)
def test_library_plots_draw_readable_figures(path):
    tree = ast.parse(path.read_text())
    found = [f"{path.relative_to(ROOT)} line {line}: {what}" for line, what in unreadable(tree, constants_of([tree]))]
    assert not found, "\n".join(found)


def test_the_static_rule_finds_what_it_should():
    source = """
FONT, SMALL = 11, 8
TINY = 7
fig, ax = plt.subplots(figsize=(14, 3.2))
ax.set_xticks(x, tokens, rotation=90, fontsize=7)
ax.text(0, 0, "a", size=9 if flag else 12)
ax.legend(fontsize="small")
ax.tick_params(labelsize=TINY)
fig.set_size_inches(12, 4)
def plot(weights, fontsize=9): ...
ok = plt.figure(figsize=(10, 8)); ax.set_title("t", fontsize=FONT); ax.plot(x, markersize=4)
grid = plot_attention_grid(attentions, size=0.55); ax.text(0, 0, "b", fontsize=size)
plt.rcParams["font.size"] = 8
plt.rcParams.update({"legend.fontsize": "x-small", "lines.linewidth": 1})
plt.rcParams["lines.linewidth"] = 1
"""
    found = unreadable(ast.parse(source), constants_of([ast.parse(source)]))
    assert [line for line, _ in found] == [4, 5, 6, 7, 8, 9, 10, 13, 14]
    assert "fontsize=7 in set_xticks()" in found[1][1] and "labelsize=7" in found[4][1]
