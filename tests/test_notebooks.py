"""The notebooks keep the course's conventions (notebooks/CONVENTIONS.md); nbval checks their outputs."""
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
MACHINE_PATHS = re.compile(r"(/root/|/home/|/tmp/|/work/|/Users/|C:\\\\)")


def load(path):
    return json.loads(path.read_text())


def test_the_first_four_notebooks_exist():
    assert [p.name[:2] for p in NOTEBOOKS][:4] == ["00", "01", "02", "03"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_header_and_parameters(path):
    cells = load(path)["cells"]
    header = "".join(cells[0]["source"])
    number = path.name.split("_")[0]   # "04", or "04b" for a lecture's second part
    assert header.startswith(f"# {number} ·"), "first cell: '# NN · Title' (NN as in the file name)"
    for section in ("Learning goals", "Prerequisites", "Run time"):
        assert section in header, f"the header names its {section}"
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1 and tagged[0]["cell_type"] == "code", "exactly one code cell tagged 'parameters'"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_outputs_are_a_clean_run(path):
    code = [c for c in load(path)["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), "run top to bottom once in a fresh kernel, then save"
    outputs = [o for c in code for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"], "no stored errors"
    text = json.dumps([{k: v for k, v in o.items() if k != "data"} | {"text": o.get("data", {}).get("text/plain")}
                       for o in outputs])
    assert not MACHINE_PATHS.search(text), "outputs must not show paths of the machine that ran them"
    assert not any("execution" in c["metadata"] for c in code), "strip per-cell execution timestamps"
    assert path.stat().st_size < 2_000_000, "keep figures modest"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_nbval_markers_stand_alone(path):
    """nbval reads a marker only when the comment is the marker alone: '# NBVAL_IGNORE_OUTPUT (why)'
    is silently not one, and its cell's output is then compared after all."""
    for cell in load(path)["cells"]:
        for line in "".join(cell["source"]).splitlines():
            if "NBVAL_" in line and line.strip().startswith("#"):
                assert re.fullmatch(r"\s*#\s*NBVAL_[A-Z_]+\s*", line), f"put the reason on the next line: {line!r}"


WORDS = re.compile(r"[A-Za-z0-9']+")
MAX_WORDS, MAX_RUN = 3000, 20


def session_shape(path) -> tuple[int, int]:
    """(words of prose, the longest run of cells with no question in it: from the start, between two
    solution cells, or after the last one)."""
    cells = load(path)["cells"]
    words = sum(len(WORDS.findall("".join(c["source"]))) for c in cells if c["cell_type"] == "markdown")
    asked = [i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get("solution")]
    edges = [-1, *asked, len(cells)]
    return words, max(b - a - 1 for a, b in zip(edges, edges[1:]))


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if not p.name.startswith("00_")], ids=lambda p: p.stem)
def test_one_session(path):
    """A lecture slot of 90 minutes: at most 3,000 words of prose, and never more than 20 cells without
    something the student answers (an exercise, a judgement question or a prediction, CONVENTIONS.md 5a)."""
    words, run = session_shape(path)
    assert words <= MAX_WORDS, f"{path.name}: {words:,} words of prose, at most {MAX_WORDS:,}: split it or cut prose"
    assert run <= MAX_RUN, f"{path.name}: {run} cells in a row with no question, at most {MAX_RUN}: add a prediction"
