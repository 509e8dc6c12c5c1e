"""The course notebooks as reveal.js slides for a lecture: prose and pictures, not long code, offline.

A lecture shows what a notebook explains and draws, so the slides keep markdown and outputs and drop
what a reader of the notebook needs but an audience does not: the parameters and setup cells, the
exercises' solutions and tests, the code of cells longer than a few lines, cells that show nothing.
Which cell does what is stored in the notebooks as Jupyter's own slide metadata
(``cell.metadata.slideshow.slide_type``, plus the tag ``hide-input-in-slides``), so JupyterLab's
property inspector and RISE show and change the same choices.

`annotate` fills that metadata by rules in the cells it has not seen, and marks each one with the
rules' choice (``cell.metadata.minibert.auto_slide_type``). Cells it has seen, and cells with slide
metadata set by hand, are never touched again, so annotating again changes nothing and a choice made
by hand survives, even JupyterLab's "-", which deletes the ``slideshow`` key. To let the rules decide
a cell again, delete both keys. `build` annotates in memory too, so a cell added since the last
``annotate`` still gets the rules' choice in the slides.

`build` converts with nbconvert's reveal.js template and loads nothing from the network: reveal.js
comes from the pinned ``sphinx-revealjs`` package, MathJax 2.7 from ``jupyter-server-mathjax``, both
copied beside the slides. The template's require.js, jQuery, mermaid and widget loaders (CDN links)
are dropped; reveal.js is loaded with plain script tags. The figures are already in the notebooks.

    python -m minibert.course.slides annotate NOTEBOOKS...       # write the slide metadata into notebooks
    python -m minibert.course.slides build [NOTEBOOKS...] [--out slides]   # = minibert slides
"""
import argparse
import copy
import importlib.util
import re
import shutil
import sys
from pathlib import Path

import nbformat

from ..atomic import DiskFullError, atomic_path, disk_full
from ..out_folder import writing

HIDE_INPUT = "hide-input-in-slides"
MARK = "minibert"  # cell metadata of our own: {"auto_slide_type": what the rules chose}
SHOWN_CODE_LINES = 3  # a cell this short reads at a glance: its code stays on the slide
TEST_MARKER = re.compile(r"^\s*# NBVAL_")  # nbval's markers are test plumbing, not lecture material
WIDGET = "application/vnd.jupyter.widget-view+json"  # progress bars: nothing to see without a kernel
SLIDE_HEADINGS = (("# ", "slide"), ("## ", "slide"), ("### ", "subslide"))
DEFAULT_NOTEBOOKS = "notebooks/[0-9][0-9]*_*.ipynb"  # 04_pretraining, 04b_pretrained_bert, ...

ASSETS = "assets"  # the folder beside the slides; in it: path -> (pinned package that ships it, path in it)
ASSET_SOURCES = {"reveal.js/dist": ("sphinx_revealjs", "_static/revealjs/dist"),
                 "reveal.js/plugin/notes": ("sphinx_revealjs", "_static/revealjs/plugin/notes"),
                 "reveal.js/LICENSE": ("sphinx_revealjs", "_static/revealjs/LICENSE"),
                 "mathjax": ("jupyter_server_mathjax", "static")}
NOT_NEEDED = shutil.ignore_patterns("*.map", "*.esm.js")  # source maps and ES-module copies
THEME = "white"  # a reveal.js theme whose fonts ship with it (others import web fonts)
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"  # the combined configuration the package ships

# nbconvert's reveal template, minus everything it loads from a CDN
TEMPLATE_NAME = "minibert-slides.html.j2"
TEMPLATE = """{%- extends 'index.html.j2' -%}
{% block html_head_js_jquery %}{% endblock %}
{% block html_head_js_requirejs %}{% endblock %}
{% block html_head_js_mermaidjs %}{% endblock %}
{% block jupyter_widgets %}{% endblock %}
{% block html_head_js_mathjax %}
{{ super() }}
<script type="text/x-mathjax-config">
MathJax.Hub.Config({"HTML-CSS": {webFont: "STIX-Web", availableFonts: [], preferredFont: null, imageFont: null}});
</script>
{% endblock %}
{% block footer_js %}
{% set reveal = resources.reveal %}
<script src="{{ reveal.url_prefix }}/dist/reveal.js"></script>
<script src="{{ reveal.url_prefix }}/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({controls: true, progress: true, history: true, plugins: [RevealNotes],
                   transition: "{{ reveal.transition | default('slide', true) }}",
                   slideNumber: "{{ reveal.number }}", width: {{ reveal.width | default('960', true) }},
                   height: {{ reveal.height | default('700', true) }}});
function fitSlide() {  // a slide taller than the screen scrolls instead of being cut off
  var limit = document.querySelector(".reveal").offsetHeight * 0.95;
  document.querySelectorAll("section.present section").forEach(function (section) {
    if (section.offsetHeight > limit) {
      section.style.height = "95vh"; section.style.overflowY = "scroll"; section.style.marginTop = "20px";
    }
  });
}
Reveal.on("ready", fitSlide);
Reveal.on("slidechanged", function () {
  fitSlide();
  var slide = Reveal.getCurrentSlide();
  if (window.MathJax && MathJax.Hub.getAllJax(slide)) MathJax.Hub.Rerender(slide);
});
</script>
{% endblock %}
"""


class SlidesError(RuntimeError):
    """Slides cannot be made; the message says what to do."""


def annotate(notebook):
    """A copy of ``notebook`` with slide metadata on every cell not seen before; see `slide_type`.

    Other metadata (nbgrader's, tags such as ``parameters``) and outputs stay as they are.
    The heading of the parameters or setup section (``## Parameters``, ``## Setup``) is skipped too
    when nothing in its section is shown.
    """
    notebook = copy.deepcopy(notebook)
    cells = notebook.cells
    setup = _setup_cell(cells)
    new = [i for i, cell in enumerate(cells) if not {MARK, "slideshow"} & cell.metadata.keys()]
    for i in new:
        cell = cells[i]
        cell.metadata.slideshow = {"slide_type": slide_type(cell, is_setup=i == setup)}
        tags = cell.metadata.get("tags", [])
        if cell.metadata.slideshow["slide_type"] != "skip" and _hide_input(cell) and HIDE_INPUT not in tags:
            cell.metadata.tags = [*tags, HIDE_INPUT]
    for i in new:
        if _kind(cells[i]) in ("slide", "subslide") and _only_setup_below(cells, i, setup):
            cells[i].metadata.slideshow["slide_type"] = "skip"
    for i in new:
        cells[i].metadata[MARK] = {"auto_slide_type": cells[i].metadata.slideshow["slide_type"]}
    return notebook


def slide_type(cell, is_setup=False) -> str:
    """The rules: ``#``/``##`` headings open a slide, ``###`` a subslide, other prose continues it
    ("-", not "fragment": a notebook's paragraphs are written to be read together); code shows
    its output and is skipped when it has none, when it is the parameters or setup cell, or when
    it belongs to an exercise (a lecture does not show solutions); raw cells are skipped."""
    if cell.cell_type == "markdown":
        return _kind(cell) or "-"
    nbgrader = cell.metadata.get("nbgrader", {})
    if cell.cell_type != "code" or nbgrader.get("solution") or nbgrader.get("grade"):
        return "skip"
    if is_setup or _is_parameters(cell):
        return "skip"
    return "-" if any(_shows_something(output) for output in cell.outputs) else "skip"


def _kind(cell) -> str | None:
    if cell.cell_type != "markdown":
        return None
    return next((kind for prefix, kind in SLIDE_HEADINGS if cell.source.lstrip().startswith(prefix)), None)


def _setup_cell(cells) -> int | None:
    """The first code cell after the parameters cell (or the first, without one): the convention's
    Setup (imports, seed)."""
    code = [i for i, cell in enumerate(cells) if cell.cell_type == "code"]
    parameters = next((i for i in code if _is_parameters(cells[i])), -1)
    return next((i for i in code if i > parameters), None)


def _is_parameters(cell) -> bool:
    return "parameters" in cell.metadata.get("tags", [])


def _shows_something(output) -> bool:
    if output.output_type == "stream":
        return bool(output.text.strip())
    return output.output_type == "error" or WIDGET not in output.get("data", {})


def _hide_input(cell) -> bool:
    lines = cell.source.splitlines()
    return cell.cell_type == "code" and (len(lines) > SHOWN_CODE_LINES or any(map(TEST_MARKER.match, lines)))


def _only_setup_below(cells, start, setup) -> bool:
    """Whether the section opened at ``start`` holds the parameters or setup cell and shows nothing."""
    section = []
    for i in range(start + 1, len(cells)):
        if shown_as(cells[i]) in ("slide", "subslide"):
            break
        section.append(i)
    return (any(i == setup or _is_parameters(cells[i]) for i in section)
            and all(shown_as(cells[i]) == "skip" for i in section))


def shown_as(cell) -> str:
    """The slide type nbconvert gives the cell: without one, "-"."""
    return cell.metadata.get("slideshow", {}).get("slide_type") or "-"


def annotate_files(paths) -> list[Path]:
    """Write the slide metadata into the notebook files; outputs and execution counts are rewritten
    byte for byte (nbformat writes what it read). Each notebook is replaced whole or not at all: a full
    disk leaves it as it was. Returns the files that changed."""
    changed = []
    for path in _existing(paths):
        notebook = _read(path)
        annotated = annotate(notebook)
        if annotated != notebook:
            with atomic_path(path) as tmp:
                nbformat.write(annotated, tmp)
                shutil.copymode(path, tmp)  # the notebook's own permissions, not a new file's
            changed.append(path)
    return changed


def build(notebooks=None, out="slides") -> list[Path]:
    """``out/NN_name.slides.html`` for each notebook (default: every ``notebooks/NN*_*.ipynb``), and
    reveal.js and MathJax in ``out/assets/``: the folder works offline and can be copied as a whole."""
    notebooks = _existing(notebooks or sorted(Path().glob(DEFAULT_NOTEBOOKS)))
    read = {path: annotate(_read(path)) for path in notebooks}  # a broken notebook stops us before anything is written
    # A new folder, or one minibert wrote, locked while we write: its assets/ and the pages are replaced only if
    # minibert wrote them there (the folder's mark lists them), never a page or an assets/ folder of the user's.
    writes = (ASSETS, f".{ASSETS}-new", *(f"{path.stem}.slides.html" for path in notebooks))
    try:
        with writing(out, "minibert slides", writes) as out:
            return _build(read, out)
    except DiskFullError as e:
        raise SlidesError(f"{e}, then build the slides again") from None
    except ValueError as e:
        raise SlidesError(str(e)) from None


def _build(read: dict, out: Path) -> list[Path]:
    from jinja2 import DictLoader
    from nbconvert import SlidesExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    _copy_assets(out / ASSETS)
    exporter = SlidesExporter(
        extra_loaders=[DictLoader({TEMPLATE_NAME: TEMPLATE})], template_file=TEMPLATE_NAME,
        reveal_url_prefix=f"{ASSETS}/reveal.js", reveal_theme=THEME,
        mathjax_url=f"{ASSETS}/mathjax/MathJax.js?config={MATHJAX_CONFIG}",
        exclude_input_prompt=True, exclude_output_prompt=True)
    exporter.register_preprocessor(TagRemovePreprocessor(remove_input_tags={HIDE_INPUT}), enabled=True)
    written = []
    for path, notebook in read.items():
        html, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": path.stem}})
        target = out / f"{path.stem}.slides.html"
        with atomic_path(target) as tmp:  # whole or not at all
            tmp.write_text(html, encoding="utf-8")
        written.append(target)
    return written


def _read(path: Path):
    """A notebook, or a SlidesError that names the file: a half-saved or hand-edited one is common."""
    try:
        return nbformat.read(path, as_version=4)
    except Exception as e:  # JSON, encoding or schema: whatever keeps it from being a notebook
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise SlidesError(f"{path} is not a readable notebook ({first[:160]}); open it in Jupyter and save it "
                          "again, or restore it from git") from None


def _existing(paths) -> list[Path]:
    paths = [Path(p) for p in paths]
    if not paths:
        raise SlidesError(f"no notebooks match {DEFAULT_NOTEBOOKS}: run this from the repository root, "
                          "or name the notebooks")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise SlidesError(f"notebook not found: {', '.join(missing)}")
    return paths


def _copy_assets(target: Path) -> None:
    """reveal.js and MathJax from their pinned packages into ``target``, replacing an older copy: the new copy
    is made beside it first, so a full disk leaves the older one as it was."""
    staging = target.with_name(f".{target.name}-new")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _copy_sources(staging)
    except BaseException as e:
        shutil.rmtree(staging, ignore_errors=True)
        if disk_full(e):
            raise DiskFullError(target, code=disk_full(e)) from e
        raise
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)


def _copy_sources(staging: Path) -> None:
    for name, (package, path) in ASSET_SOURCES.items():
        spec = importlib.util.find_spec(package)  # finds the files without importing the package
        if spec is None or not spec.submodule_search_locations:
            raise SlidesError(f"{package} is not installed (it ships what the slides need offline): "
                              "run `python3 course.py lab` once, or `pip install -e .`")
        source = Path(spec.submodule_search_locations[0]) / path
        if source.is_dir():
            shutil.copytree(source, staging / name, ignore=NOT_NEEDED)
        else:
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, staging / name)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minibert.course.slides", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    mark = commands.add_parser("annotate", help="write slide metadata into the cells not annotated before")
    mark.add_argument("notebooks", nargs="+", help="notebook files")
    make = commands.add_parser("build", help="reveal.js slides that work offline")
    make.add_argument("notebooks", nargs="*", help=f"notebook files (default: {DEFAULT_NOTEBOOKS})")
    make.add_argument("--out", default="slides", help="folder for the slides and assets (default: slides)")
    args = parser.parse_args(argv)
    try:
        if args.command == "annotate":
            changed = annotate_files(args.notebooks)
            print(f"slide metadata added to {len(changed)} of {len(args.notebooks)} notebooks"
                  + "".join(f"\n  {path}" for path in changed))
        else:
            written = build(args.notebooks, args.out)
            print(f"{len(written)} slide shows written to {Path(args.out)}/ (open one in a browser; "
                  "the folder works offline, copy it whole)" + "".join(f"\n  {path}" for path in written))
    except SlidesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except DiskFullError as e:  # annotate: the notebook it could not write is as it was
        print(f"error: {e}, then run the same command again", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
