"""The run times the notebooks' headers and INSTRUCTORS.md state are the measured ones
(notebooks/results/run_times.json, minibert.course.run_times), and a full test run checks them again."""
import json
import re
from pathlib import Path

import pytest

from minibert.course import run_times

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
FIGURES = run_times.load(ROOT / "notebooks")


def test_say_rounds_as_a_person_would():
    assert [run_times.say(s) for s in (3, 12, 23, 44, 45, 89, 90, 100, 135, 170, 300)] == [
        "about 5 s", "about 10 s", "about 25 s", "about 45 s", "about a minute", "about a minute",
        "about 1½ minutes", "about 1½ minutes", "about 2½ minutes", "about 3 minutes", "about 5 minutes"]
    assert run_times.stated(12, None) == "about 10 s on a quiet 2-core CPU"
    assert run_times.stated(None, 130) == "about 2 minutes on a busy 2-core CPU"
    with pytest.raises(ValueError):
        run_times.stated(None, None)
    assert run_times.stated(200, 400) == "about 3½ minutes on a quiet 2-core CPU, about 6½ minutes on a busy one"


def test_a_full_run_flags_only_notebooks_slower_than_twice_their_busy_figure():
    figures = {"04b": {"quiet_s": 150, "busy_s": 300}, "07": {"quiet_s": 100, "busy_s": None}, "10": {"busy_s": 100}}
    late = run_times.check({"04b": 650, "07": 5000, "10": 150, "99_new": 1000}, figures)
    assert len(late) == 1 and late[0].startswith("04b: 650 s") and "about 5 minutes" in late[0]
    assert run_times.check({"04b": 600}, figures) == []
    assert run_times.check({"00": 50}, {"00": {"busy_s": 5}}) == [], "seconds of noise on a short notebook are no error"


def test_only_a_plainly_wrong_figure_fails_a_run():
    """A shared CI runner took 2.2x a notebook's busy figure: reported, not failed; 4x fails."""
    figures = {"09": {"busy_s": 218}}
    assert run_times.check({"09": 469}, figures) and not run_times.check({"09": 469}, figures, run_times.FAIL_FACTOR)
    assert run_times.check({"09": 900}, figures, run_times.FAIL_FACTOR)


def header_run_time(path: Path) -> str:
    header = "".join(json.loads(path.read_text())["cells"][0]["source"])
    found = re.search(r"\*\*Run time\*\*:(.*?)(?:\n\n|$)", header, re.S)
    assert found, f"{path.name}: the header has no **Run time** paragraph"
    return " ".join(found.group(1).split())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_header_states_its_measured_run_time(path):
    figures = FIGURES.get(path.stem, {})
    assert figures.get("quiet_s") or figures.get("busy_s"), \
        f"{path.stem}: no measured run time in notebooks/{run_times.FILE}"
    expected = run_times.stated(figures.get("quiet_s"), figures.get("busy_s"))
    assert expected in header_run_time(path), f"{path.name}: the header's run time should say {expected!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_instructors_guide_states_the_same_run_times(path):
    rows = [line for line in (ROOT / "INSTRUCTORS.md").read_text().splitlines()
            if line.startswith(f"| `{path.stem}` |") and "CPU" in line]
    figures = FIGURES.get(path.stem, {})
    assert figures.get("quiet_s") or figures.get("busy_s"), f"{path.stem}: no measured run time"
    expected = run_times.stated(figures.get("quiet_s"), figures.get("busy_s"))
    assert any(expected in row for row in rows), f"INSTRUCTORS.md's timing table: {path.stem} should say {expected!r}"


def test_the_figures_are_for_notebooks_that_exist():
    assert set(FIGURES) <= {p.stem for p in NOTEBOOKS}
