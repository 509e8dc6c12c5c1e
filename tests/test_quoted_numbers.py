"""Every number a notebook's prose quotes comes from somewhere a run made it, or from a paper, said where.

A measured number written into the prose by hand goes stale when the code or the data change, and a
lecturer reads it out in front of a class. So each number of the kinds that are measured (a decimal, a
percentage, a ratio "8.7×", "16.3M", a count with a thousands separator) in a markdown cell must be found, at the
precision it is written with, among the numbers the course's runs wrote down: that notebook's stored outputs
and parameters first, else another notebook's outputs, `notebooks/results/*.json` or a shipped model's card
and files. A number quoted from the literature is listed instead in `tests/cited_numbers.json`, under its
notebook, with its source, so that a reader (and this test) can tell a citation from a measurement.

Section, table and figure numbers (§3.1, Table 5), years, and numbers inside code spans and formulas are not
quotes of a measurement and are not checked.
"""
import json
import re
from functools import cache
from pathlib import Path

import pytest

COURSE = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(COURSE.glob("[0-9][0-9]*_*.ipynb"))
CITED = Path(__file__).with_name("cited_numbers.json")

# a number in prose: digits with optional thousands separators and decimals, then an optional unit. Not a
# part of a word, a version, a path, a § or an exponent; not followed by more of a word or a number.
QUOTED = re.compile(r"(?<![\w.§$^_\\/#-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(\s?%|×|[kMB](?![\w])|(?=[-–]\d+(?:\.\d+)?%))?(?![\w.]*\w)")
WRITTEN = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?")   # in an output or a file
NOT_PROSE = [re.compile(p, re.S) for p in (r"```.*?```", r"`[^`]*`", r"\$\$.*?\$\$", r"\$[^$\n]*\$",
                                           r"\]\([^)]*\)", r"<[^>]+>", r"(Table|Figure|Appendix|Eq\.)\s[\w.]+")]


def prose(text: str) -> str:
    """A markdown cell's text without its code, formulas, link targets, HTML and table/figure names."""
    for pattern in NOT_PROSE:
        text = pattern.sub(" ", text)
    return text


def numbers_in(text: str) -> list[float]:
    return [float(match.group(0).replace(",", "")) for match in WRITTEN.finditer(text)]


def notebook_numbers(path: Path) -> list[float]:
    """What a run of the notebook wrote down: its stored text outputs, and its parameters cell."""
    texts = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        if "parameters" in cell["metadata"].get("tags", []):
            texts.append("".join(cell["source"]))
        for output in cell.get("outputs", []):
            texts.append("".join(output.get("text", "")))
            texts.append("".join(output.get("data", {}).get("text/plain", "")))
    return numbers_in("\n".join(texts))


@cache
def course_numbers() -> list[float]:
    """Every notebook's numbers, the stored experiment results, the shipped models' cards and files, and the
    benchmarks' record (where the measurements made from the command line are written down)."""
    found = [n for path in NOTEBOOKS for n in notebook_numbers(path)]
    files = [*(COURSE / "results").glob("*.json"), *(COURSE / "pretrained").glob("*/*.json"),
             *(COURSE / "pretrained").glob("*/README.md"), COURSE.parent / "benchmarks" / "RESULTS.md"]
    return found + [n for f in files if f.name not in ("tokenizer.json", "vocab.txt") for n in numbers_in(f.read_text())]


def quotes(path: Path):
    """(cell index, the number as written, its value, decimals, its unit, the words around it)."""
    for index, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = prose("".join(cell["source"]))
        for match in QUOTED.finditer(text):
            whole, decimals, unit = match.group(1), match.group(2) or "", match.group(3)
            unit = "%" if unit == "" else (unit or "").strip()   # the first of a range "75.1-75.4%" is a percentage too
            if not (decimals or unit or "," in whole):
                continue   # a bare integer: a count of layers, a year, a step of a list
            value = float(whole.replace(",", "") + decimals)
            around = " ".join(text[max(0, match.start() - 60):match.end() + 30].split())
            yield index, match.group(0).strip(), value, max(len(decimals) - 1, 0), unit, around


def matches(value: float, decimals: int, unit: str, numbers: list[float]) -> bool:
    """Whether a number written with ``decimals`` decimals is one of ``numbers`` rounded to that precision: a
    percentage also as a fraction (76% is 0.758), "16.3M" also as 16,312,345."""
    tolerance = 0.5 * 10 ** -decimals + 1e-9
    scale = {"%": 0.01, "k": 1e3, "M": 1e6, "B": 1e9}.get(unit)
    return any(abs(n - value) <= tolerance or (scale and abs(n - value * scale) <= tolerance * scale)
               for n in numbers)


def test_the_citations_name_their_sources():
    cited = json.loads(CITED.read_text())
    names = {p.stem for p in NOTEBOOKS}
    assert set(cited) <= names, f"notebooks that do not exist: {set(cited) - names}"
    for notebook, numbers in cited.items():
        for number, source in numbers.items():
            assert isinstance(source, str) and len(source) > 5, f"{notebook}: {number} needs its source"


def unfound_quotes(path: Path, cited: dict[str, str]) -> list[str]:
    """The numbers of ``path``'s prose that no run wrote down and ``cited`` does not list, with their place."""
    own = notebook_numbers(path)
    return [f"cell {index}: {written!r} in “…{around}…”" for index, written, value, decimals, unit, around in quotes(path)
            if written not in cited and not (matches(value, decimals, unit, own)
                                             or matches(value, decimals, unit, course_numbers()))]


def test_a_number_the_outputs_do_not_hold_is_found(tmp_path):
    """The check can fail: a stale quote, at the precision it is written with, and only that."""
    cells = [{"cell_type": "code", "metadata": {}, "source": "", "outputs": [
                 {"output_type": "stream", "name": "stdout", "text": "accuracy 0.81237, 12,345 steps, 3.25× faster\n"}]},
             {"cell_type": "markdown", "metadata": {}, "source":
                 "It reached 81.2% (81% rounded) in 12,345 steps, 3.2× faster. It reached 81.4% in 12,346 steps, "
                 "7.531× faster, which §4.1 and Table 5 and `0.123` and $0.456$ do not change; 7.7 is cited."}]
    path = tmp_path / "99_stale.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    found = [line.split(": ", 1)[1].split(" in ")[0] for line in unfound_quotes(path, {"7.7": "a paper"})]
    assert found == ["'81.4%'", "'12,346'", "'7.531×'"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_quoted_number_comes_from_a_run_or_a_cited_source(path):
    cited = json.loads(CITED.read_text()).get(path.stem, {})
    unfound = unfound_quotes(path, cited)
    assert not unfound, (
        f"{path.name}: numbers in the prose that no stored output, parameter, results file or model card holds. "
        "Print the number where it is measured and quote the output, or, for a number from a paper, add it with "
        f"its source to {CITED.name} under {path.stem!r}:\n" + "\n".join(unfound))
    in_prose = {written for _, written, *_ in quotes(path)}
    assert set(cited) <= in_prose, f"{CITED.name}, {path.stem}: {sorted(set(cited) - in_prose)} are no longer " \
                                   "in the prose; remove them"
