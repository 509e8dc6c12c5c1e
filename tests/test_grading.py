"""The course's grading promise, checked with nbgrader's own autograder: the release command
works, the instructor version gets full marks and the untouched student release gets zero.

The machinery is tested on a small fixture course (tests/fixtures/grading/01_demo.ipynb: a
stable softmax worth 2 points and scaled attention scores worth 3), then the two promises are
checked on the real course notebooks, with one autograde run per version because executing the
notebooks is slow. Last, whether an exercise was done by hand: an answer that calls the library's own
implementation gets a note beside its points (minibert.course.integrity, called from every hidden test).
The attacks on the grader, and the ways honest students write answers, are in test_walled_grading.py.
"""
import ast
import os
import re
import shutil
import sys
import time
import warnings
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
import system_programs

from minibert import grading
from minibert.grading import gradebook, intake, walls

FIXTURE = Path(__file__).parent / "fixtures" / "grading"
COURSE = Path(__file__).resolve().parents[1] / "notebooks"
COURSE_GRADED = sorted(p.stem for p in COURSE.glob("*.ipynb") if grading.test_points(p))

STABLE_SOFTMAX = "def softmax(x):\n    z = np.exp(x - x.max(axis=-1, keepdims=True))\n    return z / z.sum(axis=-1, keepdims=True)"
NAIVE_SOFTMAX = "def softmax(x):\n    return np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)"  # overflows at 1000


@pytest.fixture(scope="module")
def demo_release(tmp_path_factory) -> Path:
    return grading.release(FIXTURE, tmp_path_factory.mktemp("demo"))


def submit(release: Path, folder: Path, notebook: str = "01_demo.ipynb", **answers: str) -> Path:
    """A student's submission: the release with the solution cells named in ``answers`` filled in."""
    nb = nbformat.read(release / notebook, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers.pop(grade_id)
    assert not answers, f"no solution cells {list(answers)}"
    folder.mkdir()
    nbformat.write(nb, folder / notebook)
    return folder


@pytest.fixture(autouse=True, scope="module")
def grader_account(bubblewrap_installed):
    """The account student code runs as in these tests: ``nobody`` when they run as root (as in CI), None
    when they run as an ordinary user. If root's ``nobody`` cannot start this checkout's Python (a checkout
    under /root), the tests grade with ``MINIBERT_GRADER_RUN_AS=root`` and the walls' tests are skipped,
    saying why, rather than every grading test failing on the machine's layout."""
    try:
        user = walls.user_to_run_as(None)
        if user is not None:
            walls.check_user(user)
    except walls.WallError as e:  # no `nobody`, or it cannot reach this checkout
        warnings.warn(f"grading tests run student code as root: {e}", stacklevel=2)
        with pytest.MonkeyPatch.context() as env:
            env.setenv("MINIBERT_GRADER_RUN_AS", "root")
            yield None
        return
    yield user


@pytest.fixture(scope="module")
def bubblewrap_installed():
    """Grading as root walls the student's process in with bubblewrap where the machine has it: installed here
    where the tests may (root with apt-get, as in CI), so that they grade inside its walls; elsewhere they grade
    without, and say why."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        found, why_not = system_programs.program("bwrap", "bubblewrap")
        if not found:
            warnings.warn(f"grading tests run without bubblewrap: {why_not}", stacklevel=2)


def exercises(notebook) -> list[tuple[str, str, float]]:
    """(solution grade_id, test grade_id, points) of each solution cell directly followed by a
    graded test cell: the course's exercise convention."""
    cells = [c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"]
    meta = [c.metadata.get("nbgrader", {}) for c in cells]
    return [(m["grade_id"], n["grade_id"], n["points"]) for m, n in zip(meta, meta[1:])
            if m.get("solution") and n.get("grade") and not n.get("solution") and n.get("points", 0) > 0]


def marks(scores: grading.Scores) -> dict[str, tuple[float, float]]:
    return {grade_id: (cell.score, cell.max_score) for grade_id, cell in scores.notebooks["01_demo"].items()}


# --- the machinery, on the fixture course ---------------------------------------------------

def test_exercises_pair_each_solution_with_its_tests():
    assert exercises(FIXTURE / "01_demo.ipynb") == [
        ("softmax", "softmax_tests", 2), ("attention_scores", "attention_scores_tests", 3)]


def test_release_strips_solutions_hidden_tests_and_outputs(demo_release):
    text = (demo_release / "01_demo.ipynb").read_text()
    for secret in ("BEGIN SOLUTION", "x.max(axis=-1", "np.sqrt(q.shape[-1])",
                   "HIDDEN TESTS", "overflows on large logits", "np.allclose(attention_scores(q, k), 2.0)"):
        assert secret not in text
    assert text.count("raise NotImplementedError()") == 2
    assert "assert np.isclose(p.sum(), 1.0)" in text  # visible tests stay

    nb = nbformat.read(demo_release / "01_demo.ipynb", as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)
    tests = [cell for cell in code if cell.metadata.get("nbgrader", {}).get("grade")]
    assert len(tests) == 2 and all(cell.metadata.editable is False for cell in tests)


def test_release_command_replaces_only_its_own_previous_release(tmp_path, capsys):
    assert grading.main(["release", "--source", str(FIXTURE), "--out", str(tmp_path)]) == 0
    assert "student release written to" in capsys.readouterr().out
    (tmp_path / "notebooks" / "stale.ipynb").write_text("{}")  # in the release folder: the next release replaces it
    assert grading.main(["release", "--source", str(FIXTURE), "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["minibert-course.zip", "notebooks"]  # no staging left over
    assert sorted(p.name for p in (tmp_path / "notebooks").iterdir()) == [".minibert-release", "01_demo.ipynb"]
    with zipfile.ZipFile(tmp_path / "minibert-course.zip") as archive:
        assert not [n for n in archive.namelist() if ".minibert-release" in n]


def test_release_never_replaces_or_deletes_what_it_did_not_write(tmp_path, capsys):
    course = tmp_path / "course"                    # an instructor's checkout: notebooks/ beside other files
    shutil.copytree(FIXTURE, course / "notebooks")
    (course / "notebooks" / "CONVENTIONS.md").write_text("my notes")
    before = sorted(p.relative_to(course) for p in course.rglob("*"))
    for out in (course, course / "notebooks", course / "notebooks" / "deeper"):
        assert grading.main(["release", "--source", str(course / "notebooks"), "--out", str(out)]) == 1
        assert "overlaps the instructor notebooks" in capsys.readouterr().err
    own = tmp_path / "mine"
    (own / "notebooks").mkdir(parents=True)
    (own / "notebooks" / "draft.ipynb").write_text("{}")
    assert grading.main(["release", "--source", str(course / "notebooks"), "--out", str(own)]) == 1
    assert "was not written by `release`; refusing to replace it" in capsys.readouterr().err
    zipped = tmp_path / "zipped"
    zipped.mkdir()
    (zipped / "minibert-course.zip").write_text("someone's zip")
    assert grading.main(["release", "--source", str(course / "notebooks"), "--out", str(zipped)]) == 1
    assert "minibert-course.zip exists and was not written by `release`" in capsys.readouterr().err
    assert sorted(p.relative_to(course) for p in course.rglob("*")) == before
    assert (own / "notebooks" / "draft.ipynb").exists() and (zipped / "minibert-course.zip").read_text() == "someone's zip"


def test_instructor_version_gets_full_marks():
    scores = grading.autograde(FIXTURE, source=FIXTURE)
    assert marks(scores) == {"softmax_tests": (2, 2), "attention_scores_tests": (3, 3)}
    assert (scores.score, scores.max_score) == (5, 5)
    table = scores.table().splitlines()
    assert table[0].split() == ["01_demo", "5", "/", "5"] and table[-1].split() == ["total", "5", "/", "5"]


def test_untouched_release_gets_zero(demo_release):
    scores = grading.autograde(demo_release, source=FIXTURE)
    assert marks(scores) == {"softmax_tests": (0, 2), "attention_scores_tests": (0, 3)}
    assert scores.notebooks["01_demo"]["softmax_tests"].error == "NotImplementedError (line 1 of the test cell)"


SNOOPING_SOFTMAX = """import os
from pathlib import Path
assert os.geteuid() != 0, "student code runs as root"
for secret in {secrets!r}:
    try:
        found = list(Path(secret).iterdir()) if Path(secret).is_dir() else Path(secret).read_bytes()
    except (PermissionError, FileNotFoundError, NotADirectoryError):
        continue
    assert not found, f"student code read {{secret}}"
Path("scratch.txt").write_text("its own folder is writable")
seen = [f for p in Path("/tmp").iterdir() if p.name not in ("work", "home") and not p.name.startswith("minibert-")
        for f in p.rglob("*") if f.is_file()]  # only empty folders where the walls cover or bind paths
assert not seen, f"a file of the machine's /tmp (where the grader's course folder is): {{seen[:3]}}"
print(In)  # its own history holds no test: the tests never came here
assert not any("overflows on " + "large logits" in cell for cell in In), "a hidden test in the student's history"
""" + STABLE_SOFTMAX


def test_student_code_cannot_reach_hidden_tests_or_the_gradebook(grader_account, demo_release, tmp_path):
    """Grading as root in bubblewrap, the student's process sees neither the instructor notebooks (hidden tests),
    nor Jupyter's checkpoints of them, nor the checkout's git history, nor the course folder the grader works in
    (gradebook, the instructor copy, the submitted original), nor a sibling submission and its other files; its
    own folder is writable, and its history holds no test."""
    if grader_account is None or walls.bubblewrap_missing():
        pytest.skip("only a grader started as root, with bubblewrap, walls student code off the machine's files")
    source = tmp_path / "source"
    (source / ".ipynb_checkpoints").mkdir(parents=True)
    shutil.copy(FIXTURE / "01_demo.ipynb", source / "01_demo.ipynb")
    shutil.copy(FIXTURE / "01_demo.ipynb", source / ".ipynb_checkpoints" / "01_demo-checkpoint.ipynb")
    (source / "answers.txt").write_text("the instructor's notes")
    for path in [tmp_path, *tmp_path.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # world-readable: only the walls keep them away
    (tmp_path / "class").mkdir()
    sibling = submit(demo_release, tmp_path / "class" / "another student", softmax=STABLE_SOFTMAX)
    (sibling / "notes.txt").write_text("another student's own file")
    git = next(f / ".git" for f in FIXTURE.resolve().parents if (f / ".git").exists())  # every hidden test's history
    secrets = [str(p) for p in (source / "01_demo.ipynb", source / ".ipynb_checkpoints", source / "answers.txt", git,
                                sibling / "01_demo.ipynb", sibling / "notes.txt")]
    submission = submit(demo_release, tmp_path / "class" / "submission",
                        softmax=SNOOPING_SOFTMAX.format(secrets=secrets))
    scores = grading.autograde(submission, source=source)
    assert marks(scores)["softmax_tests"] == (2, 2), scores.table()


LEAVES_A_PROCESS = """import os, subprocess, sys
from minibert.grading.walls import SUBMISSION_IDS
assert os.getuid() in SUBMISSION_IDS and os.getgid() == os.getuid() and not os.getgroups(), "an identity of its own"
import resource
memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
assert resource.getrlimit(resource.RLIMIT_AS)[0] <= memory // 2, "more address space than half the machine's memory"
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(31337)"], start_new_session=True)
os.makedirs("/tmp/left-by-a-submission", exist_ok=True)
open("/tmp/left-by-a-submission/notes.txt", "w").write("for whoever gets this id next")
open("/dev/shm/left-by-a-submission", "w").write("and here")
""" + STABLE_SOFTMAX
FINDS_NOTHING_LEFT = """import os
assert not os.path.exists("/tmp/left-by-a-submission"), "a file the last submission left in /tmp"
assert not os.path.exists("/dev/shm/left-by-a-submission"), "a file the last submission left in /dev/shm"
""" + STABLE_SOFTMAX


@pytest.mark.parametrize("wall", ["bubblewrap where installed", "an id of its own only"])
def test_each_submission_runs_as_its_own_identity_and_leaves_no_process(grader_account, demo_release, tmp_path,
                                                                        request, monkeypatch, wall):
    """A detached process started by one submission used to outlive its kernel, as the same `nobody` as the
    next student's kernels: it could kill them or copy their work. Now every graded notebook runs as a user id
    of its own, and every process of that id is ended when its grading ends; what it left in /tmp or
    /dev/shm for the next holder of the id is deleted. Where bubblewrap walls the kernel in, it sees neither the
    machine's processes nor its /tmp, and has no network."""
    if grader_account is None:
        pytest.skip("only a grader started as root switches student code to another user")

    def sleepers():
        return [p for p in Path("/proc").glob("[0-9]*/cmdline") if b"31337" in _read(p)]

    if wall == "an id of its own only":
        monkeypatch.setenv("MINIBERT_NO_BUBBLEWRAP", "1")
    unseen = ""
    if not walls.bubblewrap_missing():  # its own processes and /tmp: it sees neither the machine's nor another's
        shared = Path("/tmp/minibert-a-file-of-the-machines.txt")
        shared.write_text("world-readable, in the machine's /tmp")
        shared.chmod(0o644)
        request.addfinalizer(lambda: shared.unlink(missing_ok=True))
        unseen = (f"import os\nassert not os.path.exists({str(shared)!r}), 'the machine\\'s /tmp'\n"
                  "assert len([p for p in os.listdir('/proc') if p.isdigit()]) < 20, 'the machine\\'s processes'\n"
                  "import socket\nassert [n for _, n in socket.if_nameindex()] == ['lo'], 'a network'\n")
    first = submit(demo_release, tmp_path / "first", softmax=unseen + LEAVES_A_PROCESS)
    assert marks(grading.autograde(first, source=FIXTURE))["softmax_tests"] == (2, 2)
    assert not sleepers(), "the detached process outlived the grading"
    assert not Path("/tmp/left-by-a-submission").exists() and not Path("/dev/shm/left-by-a-submission").exists()
    second = submit(demo_release, tmp_path / "second", softmax=FINDS_NOTHING_LEFT)
    assert marks(grading.autograde(second, source=FIXTURE))["softmax_tests"] == (2, 2)


@pytest.mark.skipif(walls.pwd is None or not Path("/proc").is_dir(), reason="user ids are a Unix thing")
def test_an_id_held_by_a_grader_that_was_killed_is_taken_again(tmp_path, monkeypatch):
    """A grader killed by SIGKILL never gives its id back: its file stayed and the id was lost for good. The file
    names the process that holds it: an id whose holder still runs stays held, one whose holder ended is taken
    again, and what it left in the scratch folders goes first (the next student must not find it)."""
    import subprocess

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    first = 1_799_990
    monkeypatch.setattr(walls, "IDS_HELD", tmp_path / "held")
    monkeypatch.setattr(walls, "SUBMISSION_IDS", range(first, first + 3))
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / str(first)).write_text(f"{os.getpid()}\n")  # a grader still running: this one
    (tmp_path / "held" / str(first + 1)).write_text(f"{ended.pid}\n")  # a grader that was killed
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    left = scratch / "left-by-the-killed-gradings-student"
    left.write_text("the last holder's")
    can_chown = os.geteuid() == 0
    if can_chown:
        os.chown(left, first + 1, first + 1)
    monkeypatch.setattr(walls, "SCRATCH", (str(scratch),))
    assert walls.reserve_identity() == first + 1
    assert (tmp_path / "held" / str(first + 1)).read_text().strip() == str(os.getpid())
    assert left.exists() != can_chown  # removed where it could belong to that id
    assert walls.reserve_identity() == first + 2  # the ids now held: none is handed out twice
    with pytest.raises(walls.WallError, match="held by a running grader"):
        walls.reserve_identity()
    walls.release_identity(first + 1)
    assert walls.reserve_identity() == first + 1


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # the process ended meanwhile
        return b""


def test_an_input_changed_in_place_is_noted_beside_the_points(tmp_path):
    """The student's function works on a copy of the test's tensor, so a test's "must not change its input in
    place" check cannot see a change; the student's process reports it, as a note for the person grading."""
    source = tmp_path / "source"
    source.mkdir()
    nb = nbformat.read(FIXTURE / "01_demo.ipynb", as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "softmax":
            cell.source = "def softmax(x):\n    ### BEGIN SOLUTION\n    return x.softmax(-1)\n    ### END SOLUTION"
        elif grade_id == "softmax_tests":
            cell.source = ("import torch\nx = torch.tensor([[1.0, 2.0, 3.0]])\nbefore = x.clone()\n"
                           "assert torch.allclose(softmax(x), before.softmax(-1))\n"
                           "assert torch.equal(x, before), 'softmax must not change its input in place'")
    nbformat.write(nb, source / "01_demo.ipynb")
    release = grading.release(source, tmp_path / "release")
    in_place = "def softmax(x):\n    x -= x.max(-1, keepdim=True).values\n    x.exp_()\n    return x / x.sum(-1, keepdim=True)"
    for answer, notes in [(in_place, ["softmax changed its argument 0 in place"]), ("import torch\nsoftmax = lambda x: x.softmax(-1)", [])]:
        cell = grading.autograde(submit(release, tmp_path / f"s{len(notes)}", softmax=answer),
                                 source=source).notebooks["01_demo"]["softmax_tests"]
        assert (cell.score, list(cell.notes)) == (2, notes), cell


def test_links_in_a_submission_are_not_followed(demo_release, tmp_path):
    """A link to a file the student may not read (here the instructor notebook with its hidden tests) would
    otherwise be copied in by the grader, as its target, for the student's code to read."""
    reads_link = 'assert not Path("answers.json").exists(), "the link came through"\n' + STABLE_SOFTMAX
    submission = submit(demo_release, tmp_path / "submission", softmax="from pathlib import Path\n" + reads_link)
    (submission / "answers.json").symlink_to(FIXTURE.resolve() / "01_demo.ipynb")
    assert marks(grading.autograde(submission, source=FIXTURE))["softmax_tests"] == (2, 2)


def test_a_submission_is_data_only_regular_files_are_taken(demo_release, tmp_path):
    """A named pipe used to block the grader for good; a hard link could name a file the grader may read;
    neither is copied, and a notebook that is one scores zero with the reason, the others still graded."""
    import os
    submission = submit(demo_release, tmp_path / "submission", softmax=STABLE_SOFTMAX)
    os.mkfifo(submission / "pipe")
    secret = tmp_path / "secret.txt"
    secret.write_text("the grader's")
    os.link(secret, submission / "notes.txt")
    (submission / "data.txt").write_text("mine")
    assert [name for name in ("pipe", "notes.txt", "data.txt", "01_demo.ipynb")
            if not intake.is_plain_file(submission / name)] == ["pipe", "notes.txt"]
    assert [f["path"] for f in intake.submitted_files(submission)] == ["data.txt"]
    fifo_notebook = tmp_path / "fifo"
    fifo_notebook.mkdir()
    os.mkfifo(fifo_notebook / "01_demo.ipynb")
    grades = grading.autograde(fifo_notebook, source=FIXTURE)
    assert {g.error for g in grades.notebooks["01_demo"].values()} == {
        "01_demo.ipynb is not a plain file (a link or a named pipe): submit the notebook file Jupyter saved"}
    for timeout in (0, -5):
        with pytest.raises(grading.GradingError, match=r"--timeout must be a positive number of seconds per cell"):
            grading.autograde(submission, source=FIXTURE, timeout=timeout)


def test_run_as_names_a_usable_account(tmp_path):
    with pytest.raises(grading.GradingError, match="--run-as no-such-user"):
        grading.autograde(FIXTURE, source=FIXTURE, run_as="no-such-user")


def test_a_checkout_the_student_user_cannot_reach_is_refused_with_the_fix(grader_account, tmp_path, monkeypatch):
    """A checkout in a private (0700) home, as a grader's often is: the kernel's user cannot even start its Python.
    That ended in a PermissionError traceback (and every grading test in an error); now it is refused with what
    to do, and these tests grade as root there, saying why (`grader_account`)."""
    if grader_account is None:
        pytest.skip("only a grader started as root switches student code to another user")
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    (private / "python").symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(private / "python"))
    with pytest.raises(grading.GradingError, match=r"nobody, who cannot start .*home/python with the course's "
                                                   r"packages \(PermissionError: Permission denied\); install"):
        grading.autograde(FIXTURE, source=FIXTURE)


def test_a_model_cache_the_student_user_cannot_read_is_refused_before_grading(grader_account, tmp_path, monkeypatch):
    """Else every notebook would fail on loading its model, and the students lose points for the setup."""
    if grader_account is None:
        pytest.skip("only a grader started as root switches student code to another user")
    private = tmp_path / "hf-home"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("HF_HOME", str(private))
    with pytest.raises(grading.GradingError, match=f"nobody, who cannot read {private}.*Point HF_HOME at a copy"):
        grading.autograde(FIXTURE, source=FIXTURE)


def test_cells_after_the_last_test_are_not_run(tmp_path):
    """They cannot change a score, and in the course they are where models train: a cell there that
    would fail the run (or take an hour) leaves the marks as they are."""
    source = broken_copy(tmp_path / "source", lambda cells: cells.append(
        nbformat.v4.new_code_cell("import time\ntime.sleep(3600)  # the long training run")))
    started = time.monotonic()
    scores = grading.autograde(source, source=source, timeout=30)
    assert marks(scores) == {"softmax_tests": (2, 2), "attention_scores_tests": (3, 3)}
    assert time.monotonic() - started < 300


def read_only_cell(grade_id: str, source: str, tagged=True) -> nbformat.NotebookNode:
    """A locked cell, marked (or not) to be skipped in grading."""
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": False, "solution": False, "locked": True, "grade_id": grade_id,
                                 "schema_version": 3}
    if tagged:
        cell.metadata["tags"] = [gradebook.SKIP_TAG]
    return cell


def test_grading_skips_the_cells_the_instructor_marks_and_only_those(tmp_path):
    """Notebook 07's fine-tuning run sits before its last exercise (a question on frozen features): grading
    skips it, and the tests after it still run and score. A submission cannot skip cells by tagging them
    (its copy is matched to the instructor's by grade_id, and only the instructor's tags count), and a
    test cell marked to be skipped in the instructor's copy is a markup error, not a free pass."""
    def spoiler(tagged):  # a cell that, if it runs, breaks the answer of the test after it
        return lambda cells: cells.insert(7, read_only_cell(
            "spoiler", "def attention_scores(q, k):\n    raise RuntimeError('the spoiler ran')", tagged))
    skipped = grading.autograde(broken_copy(tmp_path / "skipped", spoiler(True)),
                                source=broken_copy(tmp_path / "skipped_source", spoiler(True)))
    assert marks(skipped)["attention_scores_tests"] == (3, 3)
    run = grading.autograde(broken_copy(tmp_path / "tagged", spoiler(True)),
                            source=broken_copy(tmp_path / "plain", spoiler(False)))
    assert marks(run)["attention_scores_tests"] == (0, 3), "the student's tag was obeyed"

    def skip_a_test(cells):
        cells[7].metadata["tags"] = [gradebook.SKIP_TAG]
    with pytest.raises(grading.GradingError, match=r"01_demo.ipynb, cell 7: a cell tagged 'skip-when-grading'"):
        grading.autograde(FIXTURE, source=broken_copy(tmp_path / "test_skipped", skip_a_test))


def test_commands_report_errors_without_a_traceback(tmp_path, capsys):
    assert grading.main(["autograde", str(tmp_path / "nowhere"), "--source", str(FIXTURE)]) == 1
    assert capsys.readouterr().err.startswith("error: submission folder not found")


def broken_copy(tmp_path: Path, edit) -> Path:
    nb = nbformat.read(FIXTURE / "01_demo.ipynb", as_version=4)
    edit(nb.cells)
    tmp_path.mkdir(exist_ok=True)
    nbformat.write(nb, tmp_path / "01_demo.ipynb")
    return tmp_path


def test_duplicate_grade_ids_are_reported_with_their_file(tmp_path):
    def duplicate(cells):
        cells[6].metadata.nbgrader.grade_id = "softmax"
    with pytest.raises(grading.GradingError, match=r"01_demo.ipynb.*Duplicate grade id: softmax"):
        grading.release(broken_copy(tmp_path / "source", duplicate), tmp_path / "out")


def test_nbgrader_markup_errors_are_surfaced(tmp_path):
    def unclosed(cells):
        cells[3].source = cells[3].source.replace("### END SOLUTION", "")
    with pytest.raises(grading.GradingError, match="No end solution statement found"):
        grading.release(broken_copy(tmp_path / "source", unclosed), tmp_path / "out")
    assert not (tmp_path / "out" / "notebooks").exists()


def test_missing_source_and_empty_source_are_reported(tmp_path):
    with pytest.raises(grading.GradingError, match="source folder not found"):
        grading.release(tmp_path / "nowhere", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(grading.GradingError, match="no notebooks in"):
        grading.release(tmp_path / "empty", tmp_path / "out")


# --- the promise, on the real course ----------------------------------------------------------

_releases: dict = {}


def course_release(tmp_path_factory) -> Path:
    """The student release of the course, made once per test session."""
    if "course" not in _releases:
        _releases["course"] = grading.release(COURSE, tmp_path_factory.mktemp("course"))
    return _releases["course"]


@pytest.fixture(scope="module")
def course_scores(tmp_path_factory) -> tuple[grading.Scores, grading.Scores]:
    """Both autograde runs of the course (instructor version, untouched release) at the same time,
    one CPU thread per notebook kernel: each runs every graded notebook, the slowest part of CI."""
    release = course_release(tmp_path_factory)
    with pytest.MonkeyPatch.context() as env, ThreadPoolExecutor(2) as pool:
        env.setenv("OMP_NUM_THREADS", "1")  # read by torch in each kernel: two kernels, two cores
        env.setenv("MKL_NUM_THREADS", "1")
        instructor = pool.submit(grading.autograde, COURSE, source=COURSE)
        untouched = pool.submit(grading.autograde, release, source=COURSE)
        return instructor.result(), untouched.result()


@pytest.fixture(scope="module")
def course_instructor_scores(course_scores) -> grading.Scores:
    return course_scores[0]


@pytest.fixture(scope="module")
def course_release_scores(course_scores) -> grading.Scores:
    return course_scores[1]


@pytest.mark.slow  # the course's autograde runs every graded notebook
@pytest.mark.parametrize("notebook", COURSE_GRADED)
def test_course_instructor_version_gets_full_marks(notebook, course_instructor_scores):
    cells = course_instructor_scores.notebooks[notebook]
    lost = {grade_id: cell.error for grade_id, cell in cells.items() if cell.score < cell.max_score}
    assert cells and not lost, f"{notebook}: the solutions fail their own tests: {lost}"
    # and no cell of the instructor's raises as graded (one that reads what a skip-when-grading cell made, or
    # asserts on a model that grading leaves untrained): a student who loses a point would read it as their fault
    raised = {grade_id: cell.before for grade_id, cell in cells.items() if cell.before}
    assert not raised, f"{notebook}: cells raise when the notebook is graded: {raised}"


@pytest.mark.slow  # the course's autograde runs every graded notebook
@pytest.mark.parametrize("notebook", COURSE_GRADED)
def test_course_untouched_release_gets_zero(notebook, course_release_scores):
    cells = course_release_scores.notebooks[notebook]
    scored = {grade_id: cell.score for grade_id, cell in cells.items() if cell.score}
    assert cells and not scored, f"{notebook}: tests pass without the exercise being done: {scored}"


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names a cell binds, names it reads), magics and shell lines left out."""
    tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    bound |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
              for a in n.names}
    return bound, {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


@pytest.mark.parametrize("notebook", COURSE_GRADED)
def test_course_cells_graded_never_read_what_grading_skips(notebook):
    """A cell tagged skip-when-grading does not run when a notebook is graded: no cell that does run (up to the
    last test) may read a name that only skipped cells bind, or it raises in the student's process and its
    error reads, beside a lost point, as the student's fault. (The full autograde checks that nothing raises.)"""
    nb = nbformat.read(COURSE / f"{notebook}.ipynb", as_version=4)
    skipped = gradebook.skipped_cells(COURSE / f"{notebook}.ipynb")
    last = max(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade"))
    bound_by_run: set[str] = set()
    only_skipped: set[str] = set()
    readers = []
    for i, cell in enumerate(nb.cells[:last + 1]):
        if cell.cell_type != "code":
            continue
        bound, read = _names(cell.source)
        tree = ast.parse("\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))))
        read -= {a.arg for node in ast.walk(tree) if isinstance(node, ast.arguments)   # a function's own parameters
                 for a in [*node.posonlyargs, *node.args, *node.kwonlyargs, node.vararg, node.kwarg] if a}
        if cell.metadata.get("nbgrader", {}).get("grade_id") in skipped:
            only_skipped |= bound - bound_by_run
            continue
        if missing := (read - bound) & only_skipped:
            readers.append(f"cell {i} reads {sorted(missing)}")
        bound_by_run |= bound
        only_skipped -= bound
    assert not readers, f"{notebook}: graded cells read what only skip-when-grading cells bind: {readers}"


@pytest.mark.parametrize("notebook", COURSE_GRADED)
def test_course_unsolved_exercises_do_not_stop_run_all(notebook):
    """00 promises that an unsolved exercise never blocks the rest of the notebook. Its solution and test
    cells carry Jupyter's ``raises-exception`` tag, so Run All goes on past their errors (JupyterLab,
    nbclient and nbval all read it), and no later cell needs a name that only a solution cell defines,
    unless it carries the tag too (a cell that puts the student's answer to use)."""
    nb = nbformat.read(COURSE / f"{notebook}.ipynb", as_version=4)
    only_in_solutions, untagged, needs = set(), [], {}
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        meta = cell.metadata.get("nbgrader", {})
        bound, read = _names(cell.source)
        if meta.get("solution") or meta.get("grade"):
            if "raises-exception" not in cell.metadata.get("tags", []):
                untagged.append(meta["grade_id"])
            if meta.get("solution"):
                only_in_solutions |= bound
            continue
        goes_on = "raises-exception" in cell.metadata.get("tags", [])  # e.g. a cell that shows the student's answer
        if read & only_in_solutions - bound and not goes_on:
            needs[i] = sorted(read & only_in_solutions - bound)
        only_in_solutions -= bound
    assert not untagged, f"{notebook}: exercise cells without the raises-exception tag: {untagged}"
    assert not needs, f"{notebook}: code cells (by index) that need a student's answer: {needs}"


@pytest.mark.parametrize("notebook", COURSE_GRADED)
def test_course_exercise_headings_state_their_points(notebook):
    """A student sees what an exercise is worth where it starts: each exercise (or prediction) heading, in
    order, names the points of its test cell."""
    nb = nbformat.read(COURSE / f"{notebook}.ipynb", as_version=4)
    headings = [line for cell in nb.cells if cell.cell_type == "markdown" for line in cell.source.splitlines()
                if line.startswith("#") and ("Exercise" in line or "Predict first" in line)]
    points = [cell.metadata.nbgrader["points"] for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("grade")]
    stated = [int(m.group(1)) if (m := re.search(r"\((\d+) points?\)", h)) else None for h in headings]
    assert stated == points, f"{notebook}: headings {headings} for test cells worth {points}"


@pytest.mark.slow  # runs a whole notebook
def test_run_all_on_the_student_release_goes_past_unsolved_exercises(tmp_path_factory):
    """Run All, as nbclient does it (it stops at an error unless the cell is tagged raises-exception, like
    JupyterLab), on an untouched student notebook: every cell runs, and only the exercises fail."""
    from nbclient import NotebookClient

    release = course_release(tmp_path_factory)
    nb = nbformat.read(release / "02_attention.ipynb", as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(release)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    failed = [c for c in code if any(o.output_type == "error" for o in c.outputs)]
    assert all(c.execution_count for c in code), "Run All stopped before the last cell"
    assert failed and all(c.metadata.get("nbgrader", {}).get("grade_id") for c in failed)


@pytest.mark.parametrize("prefix", ["01", "02", "03"])
def test_course_notebook_has_two_exercises(prefix):
    found = sorted(COURSE.glob(f"{prefix}_*.ipynb"))
    assert found, f"notebooks/{prefix}_*.ipynb does not exist"
    assert len(exercises(found[0])) >= 2, f"{found[0].name}: fewer than two graded exercises"


# --- the exercises done by hand: integrity notes ------------------------------------------------

LIBRARY_WORDPIECE = "from minibert.tokenizer import wordpiece  # the library's answer, not the student's"


def cell_sources(notebook: Path) -> dict[str, str]:
    return {cell.metadata["nbgrader"]["grade_id"]: cell.source
            for cell in nbformat.read(notebook, as_version=4).cells if "grade_id" in cell.metadata.get("nbgrader", {})}


@pytest.mark.parametrize("notebook", COURSE_GRADED)
def test_course_hidden_tests_forbid_the_libraries_answer(notebook):
    """Every function or class a solution cell defines is checked with assert_by_hand, and called under
    forbidden_calls, in its exercise's hidden tests (a judgement question, whose answers are values, has none)."""
    cells = cell_sources(COURSE / f"{notebook}.ipynb")
    for solution, tests, _ in exercises(COURSE / f"{notebook}.ipynb"):
        hidden = cells[tests].partition("### BEGIN HIDDEN TESTS")[2].partition("### END HIDDEN TESTS")[0]
        defined = {node.name for node in ast.parse(cells[solution]).body
                   if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        if not defined and re.search(r"^[A-Z_]+ = ", cells[solution], re.MULTILINE):
            continue  # a judgement question: values read off the notebook's own numbers, no library answer to copy
        checked = set(re.findall(r"\bassert_by_hand\((\w+)", hidden))
        assert defined and defined <= checked, f"{tests}: hidden tests do not check {sorted(defined - checked)} by hand"
        assert re.search(r"^\s*with .*forbidden_calls\(", hidden, re.MULTILINE), f"{tests}: no forbidden_calls block"


@pytest.mark.slow  # runs notebook 01 up to its last exercise
def test_course_exercise_answered_with_the_library_gets_a_note_beside_its_points(tmp_path):
    """nbgrader's autograder on notebook 01: a WordPiece 'solution' that imports the library's wordpiece is
    right, and keeps its points; beside them, a note for the person grading names what it used (the student's
    process reports it, so it is a hint to judge, not a zero)."""
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(COURSE / "01_inputs.ipynb", source)
    release = grading.release(source, tmp_path / "release")
    honest = cell_sources(source / "01_inputs.ipynb")["ex01_embedding_sum"]
    submission = submit(release, tmp_path / "submission", notebook="01_inputs.ipynb",
                        ex01_wordpiece=LIBRARY_WORDPIECE, ex01_embedding_sum=honest)
    cells = grading.autograde(submission, source=source).notebooks["01_inputs"]
    exercises_graded = ("ex01_wordpiece_tests", "ex01_embedding_sum_tests")   # 01's predictions are left unanswered
    assert {grade_id: (cells[grade_id].score, cells[grade_id].max_score) for grade_id in exercises_graded} == {
        "ex01_wordpiece_tests": (2, 2), "ex01_embedding_sum_tests": (2, 2)}
    assert any("wordpiece is minibert.tokenizer.wordpiece" in note for note in cells["ex01_wordpiece_tests"].notes)
    assert not cells["ex01_embedding_sum_tests"].notes


def test_one_broken_notebook_costs_only_its_own_points_and_says_why(tmp_path, demo_release):
    """A course of two notebooks: whatever happens to one submitted notebook, the other is graded."""
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(FIXTURE / "01_demo.ipynb", source / "01_demo.ipynb")
    shutil.copy(FIXTURE / "01_demo.ipynb", source / "02_demo.ipynb")
    honest = submit(demo_release, tmp_path / "honest", softmax=STABLE_SOFTMAX)

    def submission(name, damage):
        folder = tmp_path / "class" / name
        shutil.copytree(honest, folder)
        shutil.copy(folder / "01_demo.ipynb", folder / "02_demo.ipynb")
        damage(folder / "02_demo.ipynb")
        return folder

    def without_test_metadata(path):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == "softmax_tests":
                del cell.metadata["nbgrader"]
        nbformat.write(nb, path)

    def killing_the_kernel(path):
        nb = nbformat.read(path, as_version=4)
        nb.cells.insert(0, nbformat.v4.new_code_cell("import os\nos._exit(1)  # the kernel dies"))
        nbformat.write(nb, path)

    def duplicated_test_cell(path):
        nb = nbformat.read(path, as_version=4)
        k = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax_tests")
        nb.cells.insert(k, nbformat.from_dict({**nb.cells[k], "id": "pasted-copy"}))  # Jupyter's copy: a new id
        nbformat.write(nb, path)

    cases = {"invalid JSON": (lambda p: p.write_text('{"cells": [', encoding="utf-8"), "is not a readable notebook"),
             "duplicated cell": (duplicated_test_cell, "02_demo.ipynb: its grading cells are damaged"),
             "stripped metadata": (without_test_metadata, "not in the submitted notebook"),
             "oversized": (lambda p: p.write_bytes(p.read_bytes() + b" " * (intake.MOST_NOTEBOOK_BYTES + 1)),
                           "more than a notebook needs")}  # valid JSON, too large to parse safely
    for label, (damage, _) in cases.items():
        submission(label.replace(" ", "_"), damage)
    submission("dying", killing_the_kernel)
    (tmp_path / "class" / "renamed").mkdir()
    shutil.copy(honest / "01_demo.ipynb", tmp_path / "class" / "renamed" / "01_demo.ipynb")
    shutil.copy(honest / "01_demo.ipynb", tmp_path / "class" / "renamed" / "02_demo (copy).ipynb")
    scores = grading.autograde_class(tmp_path / "class", source=source, timeout=60)  # one nbgrader run for all
    for label, (_, reason) in cases.items():
        student = scores[label.replace(" ", "_")]
        assert student.notebooks["01_demo"]["softmax_tests"].score == 2, label  # the other notebook is graded
        lost = student.notebooks["02_demo"]["softmax_tests"]
        assert lost.score == 0 and reason in lost.error, (label, lost)
    # a cell that ends the student's process costs only itself: the process starts again without it
    assert scores["dying"].notebooks["02_demo"]["softmax_tests"].score == 2, grading.summary(scores)
    assert scores["renamed"].notebooks["02_demo"]["softmax_tests"].error == "not submitted"
    assert scores["renamed"].notebooks["01_demo"]["softmax_tests"].score == 2


def test_a_failed_grading_reports_its_cause_not_nbgraders_summary():
    from minibert.grading.gradebook import cause, without_stack_frames

    log = without_stack_frames([
        "[AutogradeApp | INFO] Converting notebook submitted/student/notebooks/07_sst2.ipynb",
        "Traceback (most recent call last):",
        '  File "nbclient/client.py", line 782, in _async_poll_for_reply',
        "nbclient.exceptions.CellTimeoutError: A cell timed out while it was being executed, after 600 seconds.",
        "[AutogradeApp | ERROR] There was an error processing assignment: notebooks",
        "[AutogradeApp | ERROR] nbgrader could not grade 07_sst2.ipynb ... see the above traceback"])
    assert not any("File " in line for line in log)
    assert cause("\n".join(log)) == ("nbclient.exceptions.CellTimeoutError: A cell timed out while it was being "
                                     "executed, after 600 seconds.")
    assert cause("just one line") == "just one line" and cause("") == "nbgrader gave no output"


def test_instructors_guide_states_the_course_totals():
    """INSTRUCTORS.md says how many questions the course grades and for how many points: counted here from the
    instructor notebooks' test cells, so the sentence stays true when a question is added."""
    graded = [cell.metadata["nbgrader"] for path in sorted(COURSE.glob("*.ipynb"))
              for cell in nbformat.read(path, as_version=4).cells if cell.metadata.get("nbgrader", {}).get("grade")]
    predictions = sum("_predict_" in meta["grade_id"] for meta in graded)
    points = sum(meta["points"] for meta in graded)
    expected = f"{len(graded) - predictions} graded exercises and {predictions} predictions, {points:g} points"
    guide = " ".join((COURSE.parent / "INSTRUCTORS.md").read_text().split())
    assert expected in guide, f"INSTRUCTORS.md should say: {expected}"


def _stored_output(notebook: str, needle: str) -> str:
    """The stored stdout of the notebook's code cell whose source contains ``needle``."""
    nb = nbformat.read(COURSE / f"{notebook}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and needle in c.source)
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def test_stored_runs_that_predictions_are_graded_against_are_the_notebooks_own():
    """08's and 10's predictions come after a fine-tuning run that grading skips (it would run four times in
    every autograde); their hidden tests read the stored run's numbers instead, and those must be what the
    notebook's stored outputs printed, so a re-run of the notebook that changes them fails here."""
    import json

    segments = json.loads((COURSE / "results" / "08_segments.json").read_text())["accuracy"]
    printed = _stored_output("08_sentence_pairs", "for name, s in ablation.items()")
    for name, accuracy in segments.items():
        assert f"{name:<26} accuracy {accuracy:.1%}" in printed, f"results/08_segments.json: {name} is not {printed!r}"
    short = json.loads((COURSE / "results" / "10_short_run.json").read_text())
    printed = _stored_output("10_squad", "_, short_scores = squad.evaluate")
    assert (f"after {short['train_steps']} updates: exact match {short['exact_match']:.1f}, F1 {short['f1']:.1f} "
            f"on {short['questions']} held-out questions") in printed, f"results/10_short_run.json vs {printed!r}"
