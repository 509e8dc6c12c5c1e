"""The instructor's kit: slide metadata in the notebooks, reveal.js slides that load nothing from the
network, and the student release zipped for an LMS or JupyterHub.

Building slides only converts stored notebooks (nothing is executed); the zip is made from the small
fixture course of tests/test_grading.py, so this file runs in seconds.
"""
import json
import re
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from minibert import cli, grading
from minibert.course import release_zip, slides

ROOT = Path(__file__).resolve().parents[1]
COURSE = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
FIXTURE = ROOT / "tests" / "fixtures" / "grading"
SMALL = [ROOT / "notebooks" / "00_setup_and_tour.ipynb", ROOT / "notebooks" / "02_attention.ipynb"]


def slide_type(cell) -> str | None:
    return cell.metadata.get("slideshow", {}).get("slide_type")


def without_slide_metadata(notebook):
    """The notebook as it was before `slides.annotate` ran on it."""
    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))
    for cell in notebook.cells:
        cell.metadata.pop("slideshow", None)
        cell.metadata.pop(slides.MARK, None)
        tags = [tag for tag in cell.metadata.pop("tags", []) if tag != slides.HIDE_INPUT]
        if tags:
            cell.metadata.tags = tags
    return notebook


def is_exercise(cell) -> bool:
    nbgrader = cell.metadata.get("nbgrader", {})
    return bool(nbgrader.get("solution") or nbgrader.get("grade"))


# --- slide metadata -----------------------------------------------------------------------------

@pytest.mark.parametrize("path", COURSE, ids=lambda p: p.stem)
def test_every_notebook_cell_has_slide_metadata(path):
    cells = nbformat.read(path, as_version=4).cells
    missing = [i for i, cell in enumerate(cells) if slides.MARK not in cell.metadata and slide_type(cell) is None]
    assert not missing, (f"{path.name}: cells {missing} have no slide metadata; run "
                         f"python -m minibert.course.slides annotate notebooks/{path.name}")


@pytest.mark.parametrize("path", COURSE, ids=lambda p: p.stem)
def test_lectures_skip_exercises_and_the_parameters(path):
    cells = nbformat.read(path, as_version=4).cells
    shown = [i for i, cell in enumerate(cells) if slide_type(cell) != "skip"
             and (is_exercise(cell) or "parameters" in cell.metadata.get("tags", []))]
    assert not shown, f"{path.name}: cells {shown} (exercise solutions/tests or parameters) are on slides"


@pytest.mark.parametrize("path", COURSE, ids=lambda p: p.stem)
def test_annotating_a_stored_notebook_changes_nothing(path):
    notebook = nbformat.read(path, as_version=4)
    assert slides.annotate(notebook) == notebook


def toy_notebook():
    """One cell for each rule, in the course's shape."""
    stream = new_output("stream", name="stdout", text="42\n")
    picture = new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})
    progress = new_output("display_data", data={slides.WIDGET: {"model_id": "m"}, "text/plain": "HBox()"})
    solution = {"grade": False, "grade_id": "ex", "locked": False, "schema_version": 3, "solution": True}
    tests = {"grade": True, "grade_id": "ex_tests", "locked": True, "points": 1, "schema_version": 3,
             "solution": False}
    return new_notebook(cells=[
        new_markdown_cell("# 99 · Toy\n\nWhy it matters."),                               # slide
        new_markdown_cell("## Parameters"),                                                # skip: nothing shown
        new_code_cell("SEED = 0", metadata={"tags": ["parameters"]}),                     # skip
        new_markdown_cell("## Setup"),                                                     # skip: nothing shown
        new_code_cell("import torch", outputs=[stream]),                                  # skip: setup
        new_markdown_cell("## 1 · An idea"),                                               # slide
        new_markdown_cell("Prose goes on."),                                               # -
        new_code_cell("print(42)", outputs=[stream]),                                     # -, code shown
        new_code_cell("a = 1\nb = 2\nc = 3\nd = 4\nplot(a)", outputs=[picture]),           # -, code hidden
        new_code_cell("# NBVAL_IGNORE_OUTPUT\nprint(42)", outputs=[stream]),              # -, code hidden
        new_code_cell("x = 1"),                                                            # skip: no output
        new_code_cell("train()", outputs=[progress]),                                     # skip: a widget only
        new_markdown_cell("### Exercise"),                                                 # subslide
        new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION", metadata={"nbgrader": solution}),  # skip
        new_code_cell("assert x == 1", outputs=[stream], metadata={"nbgrader": tests}),  # skip
    ])


def test_rules():
    annotated = slides.annotate(toy_notebook())
    types = [slide_type(cell) for cell in annotated.cells]
    assert types == ["slide", "skip", "skip", "skip", "skip", "slide", "-", "-", "-", "-", "skip", "skip",
                     "subslide", "skip", "skip"]
    assert [cell.metadata[slides.MARK]["auto_slide_type"] for cell in annotated.cells] == types
    hidden = [i for i, cell in enumerate(annotated.cells) if slides.HIDE_INPUT in cell.metadata.get("tags", [])]
    assert hidden == [8, 9]


def test_annotate_keeps_outputs_and_other_metadata_and_is_idempotent():
    original = toy_notebook()
    annotated = slides.annotate(original)
    assert annotated is not original and slides.annotate(annotated) == annotated
    assert without_slide_metadata(annotated) == original
    assert annotated.cells[2].metadata.tags == ["parameters"]
    assert annotated.cells[13].metadata.nbgrader == original.cells[13].metadata.nbgrader


def test_a_choice_made_by_hand_survives():
    annotated = slides.annotate(toy_notebook())
    del annotated.cells[4].metadata["slideshow"]  # JupyterLab's "-" for the setup cell deletes the key
    again = slides.annotate(annotated)
    assert again == annotated and slides.shown_as(again.cells[4]) == "-"

    notebook = toy_notebook()
    notebook.cells[6].metadata.slideshow = {"slide_type": "fragment"}  # prose that steps in
    notebook.cells[8].metadata.slideshow = {"slide_type": "-"}         # long code shown after all
    notebook.cells[13].metadata.slideshow = {"slide_type": "notes"}    # a solution as speaker notes
    annotated = slides.annotate(notebook)
    assert [slide_type(annotated.cells[i]) for i in (6, 8, 13)] == ["fragment", "-", "notes"]
    assert "tags" not in annotated.cells[8].metadata


def test_annotate_command_rewrites_only_slide_metadata(tmp_path, capsys):
    stored = nbformat.read(SMALL[0], as_version=4)
    path = tmp_path / SMALL[0].name
    nbformat.write(without_slide_metadata(stored), path)
    before = json.loads(path.read_text())

    assert slides.main(["annotate", str(path)]) == 0
    assert "added to 1 of 1" in capsys.readouterr().out
    after = json.loads(path.read_text())
    assert all(slide_type(cell) for cell in nbformat.from_dict(after).cells)
    assert without_slide_metadata(nbformat.from_dict(after)) == nbformat.from_dict(before)
    for key in ("outputs", "execution_count", "source"):
        assert [c.get(key) for c in after["cells"]] == [c.get(key) for c in before["cells"]]

    written = path.read_bytes()
    assert slides.main(["annotate", str(path)]) == 0
    assert path.read_bytes() == written
    assert "added to 0 of 1" in capsys.readouterr().out


# --- slides -----------------------------------------------------------------------------------

class Page(HTMLParser):
    """What a page loads (scripts, style sheets, images, frames; not the links in its prose), its
    elements' classes and its inline style sheets."""

    def __init__(self):
        super().__init__()
        self.loads, self.styles = [], []
        self.classes = Counter()
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.classes.update((attrs.get("class") or "").split())
        if tag == "link" and attrs.get("href"):
            self.loads.append(attrs["href"])
        elif attrs.get("src"):
            self.loads.append(attrs["src"])
        self._in_style = tag == "style"

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)

    def handle_endtag(self, tag):
        self._in_style = False


def parse(page: Path) -> Page:
    parsed = Page()
    parsed.feed(page.read_text(encoding="utf-8"))
    return parsed


def css_urls(css: str) -> list[str]:
    return [url.strip("'\" ") for url in re.findall(r"url\(([^)]*)\)", css)]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> list[Path]:
    return slides.build(SMALL, tmp_path_factory.mktemp("slides"))


def test_slides_are_reveal_js_pages(built):
    assert [page.name for page in built] == ["00_setup_and_tour.slides.html", "02_attention.slides.html"]
    for page in built:
        html = page.read_text(encoding="utf-8")
        assert '<div class="reveal">' in html and '<div class="slides">' in html
        assert html.count("<section") >= 10 and "Reveal.initialize(" in html


def test_slides_load_nothing_from_the_network(built):
    for page in built:
        parsed = parse(page)
        remote = [url for url in parsed.loads + [u for css in parsed.styles for u in css_urls(css)]
                  if re.match(r"(https?:)?//", url)]
        assert not remote, f"{page.name} loads {remote}"
        assert parsed.loads, "the page loads reveal.js and MathJax from beside it"
        for url in parsed.loads:
            if not url.startswith("data:"):
                assert (page.parent / url.split("?")[0]).is_file(), f"{page.name}: {url} is missing"


def test_the_assets_load_nothing_from_the_network(built):
    """The style sheets the pages load, and what those import (fonts), are all beside them; MathJax
    finds the configuration its URL names."""
    folder = built[0].parent
    sheets = [folder / url for url in parse(built[0]).loads if url.endswith(".css")]
    assert any(sheet.name == f"{slides.THEME}.css" for sheet in sheets)
    while sheets:
        sheet = sheets.pop()
        for url in css_urls(sheet.read_text(encoding="utf-8")):
            if url.startswith("data:") or url.startswith("about:"):
                continue
            assert not re.match(r"(https?:)?//", url), f"{sheet.name} loads {url}"
            target = (sheet.parent / url.split("?")[0].split("#")[0]).resolve()
            assert target.is_file(), f"{sheet.name}: {url} is missing"
            if target.suffix == ".css":
                sheets.append(target)
    mathjax = next(url for url in parse(built[0]).loads if "MathJax.js" in url)
    for name in mathjax.split("config=")[1].split(","):
        assert (folder / slides.ASSETS / "mathjax" / "config" / f"{name}.js").is_file()
    assert list((folder / slides.ASSETS / "mathjax" / "fonts" / "HTML-CSS" / "STIX-Web").rglob("*.woff"))


def test_slides_show_prose_and_pictures_not_long_code(built):
    for source, page in zip(SMALL, built):
        cells = slides.annotate(nbformat.read(source, as_version=4)).cells
        html, parsed = page.read_text(encoding="utf-8"), parse(page)
        shown = [cell for cell in cells if slide_type(cell) != "skip"]
        code = [cell for cell in shown if cell.cell_type == "code"]
        with_code = [cell for cell in code if slides.HIDE_INPUT not in cell.metadata.get("tags", [])]
        assert all(len(cell.source.splitlines()) <= slides.SHOWN_CODE_LINES for cell in with_code)
        assert parsed.classes["jp-InputArea-editor"] == len(with_code) < len(code)
        assert parsed.classes["jp-RenderedMarkdown"] == sum(cell.cell_type == "markdown" for cell in shown)
        pictures = sum("image/png" in output.get("data", {}) for cell in code for output in cell.outputs)
        assert 0 < pictures == sum(url.startswith("data:image/png") for url in parsed.loads)
        assert "BEGIN SOLUTION" not in html and "HIDDEN TESTS" not in html
    assert "Every layer of BERT does two things" in built[1].read_text(encoding="utf-8")


def test_slides_command(tmp_path, capsys, monkeypatch):
    out = tmp_path / "lecture"
    assert cli.main(["slides", str(SMALL[0]), "--out", str(out)]) == 0
    assert str(out / "00_setup_and_tour.slides.html") in capsys.readouterr().out
    assert (out / "00_setup_and_tour.slides.html").is_file() and (out / slides.ASSETS / "reveal.js").is_dir()

    monkeypatch.chdir(tmp_path)  # no notebooks/ here
    assert cli.main(["slides"]) == 1
    assert capsys.readouterr().err.startswith("error: no notebooks match notebooks/")
    assert cli.main(["slides", "nowhere.ipynb"]) == 1
    assert capsys.readouterr().err.strip() == "error: notebook not found: nowhere.ipynb"
    (tmp_path / "broken.ipynb").write_text('{"cells": [')  # half saved
    for command in (["slides", "broken.ipynb", "--out", str(out)], ["slides", "annotate", "broken.ipynb"]):
        assert cli.main(command) == 1
        assert capsys.readouterr().err.startswith("error: broken.ipynb is not a readable notebook (")
    assert cli.main(["slides", "broken.ipynb", "--out", "new-slides"]) == 1
    assert not (tmp_path / "new-slides").exists(), "a broken notebook stops the build before anything is written"


# --- the course zip -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """The release command on the fixture course, with files beside the notebook as the course has."""
    source = tmp_path_factory.mktemp("source")
    shutil.copy(FIXTURE / "01_demo.ipynb", source)
    (source / "pretrained" / "tiny").mkdir(parents=True)
    (source / "pretrained" / "tiny" / "README.md").write_text("a model card\n")
    (source / "results").mkdir()
    (source / "results" / "grid.json").write_text("{}\n")
    (source / "CONVENTIONS.md").write_text("authors' notes\n")
    out = tmp_path_factory.mktemp("release")
    assert grading.main(["release", "--source", str(source), "--out", str(out)]) == 0
    return out


def test_release_writes_the_nbgrader_folder_and_the_zip(released):
    assert sorted(p.name for p in released.iterdir()) == ["minibert-course.zip", "notebooks"]


def test_zip_holds_the_student_release_in_one_folder(released):
    with zipfile.ZipFile(released / "minibert-course.zip") as archive:
        names = archive.namelist()
        notebook = archive.read("minibert-course/notebooks/01_demo.ipynb").decode()
    assert {name.split("/")[0] for name in names} == {"minibert-course"}
    top = "minibert-course/"
    for needed in ("notebooks/01_demo.ipynb", "notebooks/pretrained/tiny/README.md", "notebooks/results/grid.json",
                   "pyproject.toml", "environment.yml", "course.py", "README.md", "data/README.md"):
        assert top + needed in names
    package = {f"{top}{p.relative_to(ROOT).as_posix()}" for p in (ROOT / "minibert").rglob("*.py")}
    assert package <= set(names)
    parts = {part for name in names for part in name.split("/")}
    assert not parts & {"tests", "benchmarks", "runs", "checkpoints", ".git", "__pycache__", "slides",
                        "CONVENTIONS.md", "INSTRUCTORS.md"}
    assert not [name for name in names if name.endswith(".pyc")]
    assert "BEGIN SOLUTION" not in notebook and "raise NotImplementedError()" in notebook
    assert all(cell.get("outputs", []) == [] for cell in json.loads(notebook)["cells"])


def test_the_zip_has_a_readme_for_students_that_names_only_what_they_have(released):
    with zipfile.ZipFile(released / "minibert-course.zip") as archive:
        readme = archive.read("minibert-course/README.md").decode()
        names = set(archive.namelist())
    assert "python3 course.py lab" in readme and "NotImplementedError" in readme
    assert not any(word in readme for word in ("INSTRUCTORS", "tests/", "course.py test", "autograde", "release"))
    for path in re.findall(r"`((?:notebooks|data)/[\w./-]*)`", readme):  # every file it points at is in the zip
        assert any(name.startswith(f"minibert-course/{path}") for name in names), path


def test_the_zipped_launcher_knows_it_is_the_student_release(released, tmp_path):
    with zipfile.ZipFile(released / "minibert-course.zip") as archive:
        archive.extractall(tmp_path)
    result = subprocess.run([sys.executable, "course.py", "test"], cwd=tmp_path / "minibert-course",
                            capture_output=True, text=True)
    assert result.returncode == 1 and "student release" in result.stderr and "course.py lab" in result.stderr


def fake_release(folder: Path, *names: str) -> Path:
    folder.mkdir()
    for name in names:
        (folder / name).write_text("{}")
    return folder


def test_a_new_zip_replaces_the_old_one_whole(tmp_path):
    target = tmp_path / "out" / "minibert-course.zip"
    release_zip.write(fake_release(tmp_path / "first", "01_a.ipynb", "02_b.ipynb"), target)
    release_zip.write(fake_release(tmp_path / "second", "01_a.ipynb"), target)
    with zipfile.ZipFile(target) as archive:
        notebooks = [name for name in archive.namelist() if name.startswith("minibert-course/notebooks/")]
    assert notebooks == ["minibert-course/notebooks/01_a.ipynb"]
    assert [p.name for p in target.parent.iterdir()] == ["minibert-course.zip"]  # no partial file left


def test_a_failed_zip_leaves_the_old_one(tmp_path, monkeypatch):
    target = tmp_path / "minibert-course.zip"
    release_zip.write(fake_release(tmp_path / "first", "01_a.ipynb"), target)
    old = target.read_bytes()

    def full_disk(*args, **kwargs):
        raise OSError("No space left on device")
    monkeypatch.setattr(zipfile.ZipFile, "write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        release_zip.write(fake_release(tmp_path / "second", "01_b.ipynb"), target)
    assert target.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first", "minibert-course.zip", "second"]


def test_zip_needs_a_checkout(tmp_path):
    with pytest.raises(FileNotFoundError, match="lacks course.py.*checkout of the course repository"):
        release_zip.write(fake_release(tmp_path / "release", "01_a.ipynb"), tmp_path / "c.zip", root=tmp_path)
