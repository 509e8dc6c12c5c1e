"""The grader is sound by construction: a class of 30, honest, wrong and hostile mixed, graded end to end.

The course's fixture (tests/fixtures/grading/01_demo.ipynb: a stable softmax worth 2 points, attention scores
worth 3) is an ordinary nbgrader notebook whose tests call the student's functions on values and assert on
what they return; it is graded as it is, with nbgrader's own autograde, into one gradebook. Every hostile
submission below got a wrong softmax full marks, or reached another student's work, against the grader that
ran the tests in the student's kernel; every honest one here was held at zero by that grader's code review.
"""
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from test_grading import FIXTURE, NAIVE_SOFTMAX, STABLE_SOFTMAX, bubblewrap_installed, demo_release, grader_account

from minibert import grading
from minibert.grading import autograde_class, summary, walls

__all__ = ["bubblewrap_installed", "demo_release", "grader_account"]  # fixtures shared with test_grading

SCORES = "def attention_scores(q, k):\n    return q @ k.T / np.sqrt(q.shape[-1])"
RIGHT = {"softmax_tests": 2, "attention_scores_tests": 3}
WRONG_SOFTMAX = {"softmax_tests": 0, "attention_scores_tests": 3}

HONEST = {  # each right: full marks, no review, whatever the style
    "plain": STABLE_SOFTMAX,  # (and "honest-one-exercise" below: softmax only, the other left as released)
    "freezes_parameters": "import torch\nmodel = torch.nn.Linear(3, 3)\nfor p in model.parameters():\n"
                          "    p.requires_grad = False\n" + STABLE_SOFTMAX,
    "prints_to_stderr": "import sys\nprint('debugging', file=sys.stderr)\n" + STABLE_SOFTMAX.replace(
        "    z =", "    print(type(x).__name__, x.shape, file=sys.stderr)\n    z ="),
    "own_object": "class Norm:\n    def __init__(self):\n        self._axis = -1\n        setattr(self, 'keep', True)\n"
                  "    def __call__(self, x):\n        z = np.exp(x - x.max(axis=self._axis, keepdims=getattr(self, 'keep')))"
                  "\n        return z / z.sum(axis=self._axis, keepdims=True)\n_norm = Norm()\n"
                  "def softmax(x):\n    return _norm(x)",
    "magics": "%%time\n%load_ext autoreload\n%autoreload 2\n" + STABLE_SOFTMAX,
    "line_magic": "%time total = sum(range(10))\n" + STABLE_SOFTMAX,
    "names_like_the_notebooks": "input = np.array([1.0, 2.0])\nq, k, p = 1, 2, 3\nweights = output = d_k = None\n"
                                + STABLE_SOFTMAX,
    "saves_a_tensor": "import torch\ntorch.save(torch.ones(2), 'mine.pt')\nassert torch.load('mine.pt').sum() == 2\n"
                      + STABLE_SOFTMAX,
    "many_styles": """import collections, copy, functools, itertools, math
from dataclasses import dataclass
import torch
from tqdm.auto import tqdm

calls = 0


@dataclass
class Settings:
    axis: int = -1


@torch.no_grad()
def _stable(x: np.ndarray, settings: Settings) -> np.ndarray:
    global calls
    calls += 1
    shifted = x - x.max(axis=settings.axis, keepdims=True)
    z = np.exp(shifted)
    return z / z.sum(axis=settings.axis, keepdims=True)


class Tiny(torch.nn.Module):
    def forward(self, t):
        return t * 2


assert Tiny()(torch.ones(1)).item() == 2
counts = collections.Counter(itertools.chain("ab", "bc"))
softmax = functools.partial(_stable, settings=copy.deepcopy(Settings()))
for _ in tqdm(range(3)):
    math.sqrt(2)
print("my own check:", softmax(np.zeros(2)))
""",
    "markdown_cell": ("markdown", STABLE_SOFTMAX),  # a solution saved as markdown is the student's code all the same
    "warns": "import warnings\n" + STABLE_SOFTMAX.replace(
        "    z =", "    warnings.warn('a warning a right answer may print')\n    z ="),
}
WRONG = {  # each loses the softmax's points, with a message that says why
    "overflows": (NAIVE_SOFTMAX, "overflows on large logits"),
    "not_normalised": ("def softmax(x):\n    return np.exp(x - x.max(axis=-1, keepdims=True))",
                       "AssertionError (line 2 of the test cell)"),
    "loops": ("def softmax(x):\n    while True:\n        pass", "did not finish in 10 s"),
    "loops_in_the_cell": ("while True:\n    pass", "did not finish in 10 s"),
    "ends_the_process": ("import os\nos._exit(3)", "ended the notebook's process"),
    "warns": ("import warnings\n" + NAIVE_SOFTMAX.replace("    return", "    warnings.warn('hm')\n    return"),
              "overflows on large logits"),
}
HOSTILE = {  # a wrong (overflowing) softmax and a way past the old grader: each scores zero for the softmax
    "patches_allclose": NAIVE_SOFTMAX + "\nnp.allclose = np.isclose = lambda *args, **kwargs: True",
    "input_transformer": NAIVE_SOFTMAX + "\nget_ipython().input_transformers_cleanup.append(\n"
                         "    lambda lines: [l for l in lines if 'assert' not in l])",
    "through_torch_builtins": NAIVE_SOFTMAX + "\nimport torch\ntorch.sys.modules['numpy'].allclose = lambda *a, **k: True"
                              "\nvars(torch.builtins)['AssertionError'] = type('Quiet', (Exception,), {})",
    "frame_globals": NAIVE_SOFTMAX + "\nimport inspect\ninspect.currentframe().f_builtins['len'] = lambda x: 2",
    "method_patches": NAIVE_SOFTMAX + "\nclass Sneaky:\n    def go(np):\n        np.allclose = lambda *a, **k: True\n"
                      "Sneaky.go(np)",
    "equal_to_everything": "class Always:\n    __eq__ = lambda self, other: True\n    __bool__ = lambda self: True\n"
                           "    __gt__ = lambda self, other: True\n    def __getitem__(self, i):\n        return self\n"
                           "    def sum(self, *args, **kwargs):\n        return self\ndef softmax(x):\n    return Always()",
    "mock_any": "from unittest.mock import ANY\ndef softmax(x):\n    return ANY",
    "tensor_subclass": "import torch\nclass Yes(torch.Tensor):\n    def __eq__(self, other):\n        return True\n"
                       "def softmax(x):\n    return torch.as_tensor(x).as_subclass(Yes)",
    "reads_its_history": NAIVE_SOFTMAX + "\nprint([cell for cell in In if 'overflows on ' + 'large' in cell])",
    "raw_cell": ("raw", NAIVE_SOFTMAX + "\nnp.allclose = lambda *args, **kwargs: True"),
    "shells_out": NAIVE_SOFTMAX + "\nimport matplotlib\nmatplotlib.subprocess.run(['sh', '-c', 'for f in "
                  f"{FIXTURE.resolve()}/*.ipynb; do echo > $f; done'])",
}


RIGHT_WITH_A_HACK = {  # the same roads with a right answer: nothing they do reaches the tests, so full marks
    "patches_allclose": STABLE_SOFTMAX + "\nnp.allclose = np.isclose = lambda *args, **kwargs: False",
    "input_transformer": STABLE_SOFTMAX + "\nget_ipython().input_transformers_cleanup.append(\n"
                         "    lambda lines: [l for l in lines if 'assert' not in l])",
}


def notebook(release: Path, answer, scores=SCORES) -> nbformat.NotebookNode:
    kind, answer = answer if isinstance(answer, tuple) else ("code", answer)
    nb = nbformat.read(release / "01_demo.ipynb", as_version=4)
    for i, cell in enumerate(nb.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "softmax":
            new = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
                   "raw": nbformat.v4.new_raw_cell}[kind](answer)
            new.metadata = cell.metadata
            nb.cells[i] = new
        elif grade_id == "attention_scores":
            cell.source = scores
    return nb


@pytest.mark.slow  # a class of 30 notebooks, each run twice (the student's and the grader's process)
def test_a_class_of_thirty_grades_as_it_should_into_one_gradebook(demo_release, tmp_path, capfd, grader_account,
                                                                  request):
    from nbgrader.api import Gradebook

    class_dir = tmp_path / "class"
    expected, messages = {}, {}
    for group, answers in (("honest", HONEST), ("wrong", WRONG), ("hostile", HOSTILE), ("right", RIGHT_WITH_A_HACK)):
        for name, answer in answers.items():
            answer, message = answer if group == "wrong" else (answer, "")
            student = class_dir / f"{group}-{name}".replace("_", "-")
            student.mkdir(parents=True)
            nbformat.write(notebook(demo_release, answer), student / "01_demo.ipynb")
            expected[student.name] = RIGHT if group in ("honest", "right") else WRONG_SOFTMAX
            messages[student.name] = message
    # a submission that would have crashed the grader: folders 1,100 deep, a named pipe, a link out
    deep = class_dir / "wrong-deep-folders"
    deep.mkdir()
    nbformat.write(notebook(demo_release, NAIVE_SOFTMAX), deep / "01_demo.ipynb")
    expected[deep.name] = WRONG_SOFTMAX
    folder = deep
    for _ in range(1100):
        folder = folder / "d"
        folder.mkdir()
    os.mkfifo(deep / "pipe")
    (deep / "link").symlink_to("/etc/shadow")
    # one exercise done, and the untouched release
    (class_dir / "honest-one-exercise").mkdir()
    nbformat.write(notebook(demo_release, STABLE_SOFTMAX, scores="raise NotImplementedError()"),
                   class_dir / "honest-one-exercise" / "01_demo.ipynb")
    expected["honest-one-exercise"] = {"softmax_tests": 2, "attention_scores_tests": 0}
    (class_dir / "untouched").mkdir()
    nbformat.write(nbformat.read(demo_release / "01_demo.ipynb", as_version=4), class_dir / "untouched" / "01_demo.ipynb")
    expected["untouched"] = {"softmax_tests": 0, "attention_scores_tests": 0}
    assert len(expected) >= 30

    def remove_the_deep_folders():  # shutil.rmtree recurses: 1,100 levels would end pytest's clean-up in an error
        chain = [deep / "d"]
        while (chain[-1] / "d").exists():
            chain.append(chain[-1] / "d")
        for folder in reversed(chain):
            folder.rmdir()
    request.addfinalizer(remove_the_deep_folders)

    started = time.monotonic()
    course = tmp_path / "course"
    scores = autograde_class(class_dir, source=FIXTURE, timeout=10, course=course)
    took = time.monotonic() - started
    got = {student: {g: c.score for g, c in result.notebooks["01_demo"].items()} for student, result in scores.items()}
    assert got == expected, summary(scores)
    for student, message in messages.items():
        assert message in scores[student].notebooks["01_demo"]["softmax_tests"].error, (student, summary(scores))
    assert "notebooks checked" in capfd.readouterr().err  # the progress bar
    assert nbformat.read(FIXTURE / "01_demo.ipynb", as_version=4).cells  # the instructor's notebook is intact
    assert took < 60 * len(expected), took  # bounded: a cell's limit (10 s) for the loops, seconds for the rest
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as book:  # where formgrader reads them
        assert {s.id for s in book.students} == set(expected)
        assert {s: book.find_submission("notebooks", s).score for s in expected} == \
            {s: float(sum(e.values())) for s, e in expected.items()}
    # nbgrader's own feedback: which check failed and why, never the hidden test's code
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", "notebooks", "--student", "wrong-overflows",
                    f"--CourseDirectory.root={course}"], cwd=course, check=True, capture_output=True)
    feedback = (course / "feedback" / "wrong-overflows" / "notebooks" / "01_demo.html").read_text()
    assert "overflows on large logits" in feedback and "1000.0" not in feedback


SWAPS_ITS_NOTEBOOK = NAIVE_SOFTMAX + """
from pathlib import Path
for target in {targets!r}:
    for here in [Path.cwd(), *Path.cwd().parents]:
        for name in ("01_demo.ipynb", "gradebook.db"):
            try:
                (here / name).unlink(missing_ok=True)
                (here / name).symlink_to(target)
            except OSError:
                pass
"""


def test_root_never_writes_or_chmods_through_a_students_link(demo_release, tmp_path, grader_account):
    """The old kernel's folder held root's copy of the notebook: replaced by a link, nbgrader (root) wrote through
    it into another student's notebook and made a 0600 file world-readable. The student's process now owns no
    folder the grader writes in: both files stay as they were, and the other student's score with them."""
    secret = tmp_path / "private.txt"
    secret.write_text("the grader's own")
    secret.chmod(0o600)
    other = tmp_path / "class" / "other"
    other.mkdir(parents=True)
    nbformat.write(notebook(demo_release, STABLE_SOFTMAX), other / "01_demo.ipynb")
    before = (secret.read_bytes(), stat.S_IMODE(secret.stat().st_mode), (other / "01_demo.ipynb").read_bytes())
    attacker = tmp_path / "class" / "attacker"
    attacker.mkdir()
    answer = SWAPS_ITS_NOTEBOOK.format(targets=[str(secret), str(other / "01_demo.ipynb")])
    nbformat.write(notebook(demo_release, answer), attacker / "01_demo.ipynb")
    scores = autograde_class(tmp_path / "class", source=FIXTURE, timeout=30)
    after = (secret.read_bytes(), stat.S_IMODE(secret.stat().st_mode), (other / "01_demo.ipynb").read_bytes())
    assert after == before
    assert scores["other"].score == 5 and scores["attacker"].notebooks["01_demo"]["softmax_tests"].score == 0


def _descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid`` (Linux's /proc), with its command line."""
    children: dict[int, list[int]] = {}
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat_file.parent.name))
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            try:
                found[child] = (Path("/proc") / str(child) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            todo.append(child)
    return found


def _running(pid: int) -> bool:
    try:  # a zombie (ended, not yet reaped by whoever adopted it) runs nothing
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from Linux's /proc")
@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_a_stop_sent_to_the_grader_alone_ends_everything_it_started(demo_release, tmp_path, grader_account, stop):
    """SIGTERM (a scheduler's time limit, `kill`) reaches only the process it is sent to. Sent to the grading
    command while a student's cell sleeps, it used to end that command alone: nbgrader, the checker and the
    student's process ran on, orphaned, and the grading id stayed held. Now the stop is passed down the chain as
    Ctrl-C would be: the command says it was interrupted, and nothing it started is left running. SIGKILL,
    which no process can see, ends the rest all the same (each child is told when its parent dies)."""
    submission = tmp_path / "sleeps"
    submission.mkdir()
    nbformat.write(notebook(demo_release, "import time\ntime.sleep(900)\n" + STABLE_SOFTMAX),
                   submission / "01_demo.ipynb")
    command = subprocess.Popen([sys.executable, "-m", "minibert.grading", "autograde", str(submission), "--source",
                                str(FIXTURE), "--timeout", "600"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while not any("minibert.grading.runner" in line for line in _descendants(command.pid).values()):
        assert command.poll() is None, command.stdout.read().decode()[-3000:]
        assert time.monotonic() < deadline, "the student's process did not start"
        time.sleep(0.5)
    time.sleep(1)  # its cells started: the first one sleeps
    started = _descendants(command.pid)
    ids = {(Path("/proc") / str(pid)).stat().st_uid for pid, line in started.items() if "grading.runner" in line}
    command.send_signal(getattr(signal, stop))
    if stop == "SIGTERM":
        assert command.wait(60) == 130
        assert "grading interrupted: stopped by SIGTERM" in command.stdout.read().decode()
    command.wait(60)
    deadline = time.monotonic() + 60
    while (left := {pid: line for pid, line in started.items() if _running(pid)}) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"still running after the grader was stopped: {left}"
    for uid in ids - {os.getuid()}:  # graded as an id of its own: given back
        assert not (walls.IDS_HELD / str(uid)).exists()


FILLS_THE_DISK = STABLE_SOFTMAX + """
with open("big", "wb") as f:
    for _ in range(4096):
        f.write(b"x" * 2**20)  # 4 GB, if nothing stops it
"""


def test_a_submission_cannot_fill_the_graders_disk(demo_release, tmp_path, grader_account):
    """Its folder is a bounded scratch space of its own (bubblewrap) or bounded by the size of a file: the write
    fails in the student's cell, the grader's disk keeps its room, and the answer before it still counts."""
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    submission = tmp_path / "disk"
    submission.mkdir()
    nbformat.write(notebook(demo_release, FILLS_THE_DISK), submission / "01_demo.ipynb")
    scores = grading.autograde(submission, source=FIXTURE, timeout=120)
    assert scores.score == 5, scores.table()
    assert os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize > free - 2**30


SEES = """import os
_seen = [p for p in {paths!r} if os.path.exists(p)]
_secrets = [k for k in os.environ if k.startswith("MINIBERT_TEST_SECRET")]
assert not _seen and not _secrets and os.environ.get("TMPDIR", "/tmp") == "/tmp", (_seen, _secrets)
assert os.path.isabs(os.environ["HF_HOME"]), os.environ["HF_HOME"]  # the grader's model cache, named in full
print("x" * (12 * 2**20))  # 12 MiB of output
""" + STABLE_SOFTMAX


def test_the_students_process_sees_no_secret_no_other_copy_and_cannot_fill_the_log(demo_release, tmp_path,
                                                                                    grader_account, monkeypatch):
    """The grader's environment reaches the student's process only as the variables its Python needs (no token; the
    model cache named in full, where an empty HF_HOME would make it a relative folder);
    walled, the machine it sees is the operating system and what its Python reads, not the checkout around the
    library (another copy of the course's notebooks, with their solutions, would be one), and what it prints is
    kept up to a bound (a loop of prints cannot fill the grader's disk)."""
    monkeypatch.setenv("MINIBERT_TEST_SECRET_TOKEN", "hf_not_for_students")
    monkeypatch.delenv("HF_HOME", raising=False)  # the default cache: named for the student's Python, never ""
    checkout = Path(grading.__file__).resolve().parents[2]
    walled = grader_account is not None and not walls.bubblewrap_missing()
    paths = [str(checkout / name) for name in ("README.md", "pyproject.toml", "benchmarks")] if walled else []
    class_dir = tmp_path / "class"
    (class_dir / "ada").mkdir(parents=True)
    nbformat.write(notebook(demo_release, SEES.format(paths=paths)), class_dir / "ada" / "01_demo.ipynb")
    scores = autograde_class(class_dir, source=FIXTURE, timeout=120, course=tmp_path / "course")
    assert scores["ada"].score == 5, scores["ada"].table()
    log, = (tmp_path / "course").rglob("student-output.log")
    assert walls.KEPT_OUTPUT < log.stat().st_size < walls.KEPT_OUTPUT + 1000
    assert b"the rest of the output was not kept" in log.read_bytes()[-200:]


def test_the_library_used_for_an_answer_is_a_note_not_a_zero(tmp_path):
    """Integrity is for the person grading to judge: an answer that calls the library's own implementation keeps
    the points it earns, with a note beside them that names what it used."""
    source = tmp_path / "source"
    source.mkdir()
    nb = nbformat.read(FIXTURE / "01_demo.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "softmax_tests":
            cell.source = cell.source.replace("### END HIDDEN TESTS", (
                "from minibert.course.integrity import assert_by_hand, forbidden_calls\n"
                "assert_by_hand(softmax, ('scipy.special',))\n"
                "with forbidden_calls('scipy.special.softmax'):\n    softmax(np.zeros(3))\n### END HIDDEN TESTS"))
    nbformat.write(nb, source / "01_demo.ipynb")
    release = grading.release(source, tmp_path / "release")
    submission = tmp_path / "submission"
    submission.mkdir()
    answer = "import scipy.special\ndef softmax(x):\n    return scipy.special.softmax(x, axis=-1)"
    nbformat.write(notebook(release, answer), submission / "01_demo.ipynb")
    cell = grading.autograde(submission, source=source).notebooks["01_demo"]["softmax_tests"]
    assert cell.score == 2, cell
    assert any("scipy.special" in note for note in cell.notes), cell.notes
    assert "note: " in grading.autograde(submission, source=source).table()


def test_what_the_students_python_needs_is_seen_wherever_it_is(grader_account, tmp_path, demo_release, monkeypatch):
    """Bubblewrap lays a fresh /tmp over the machine's: a checkout or environment under /tmp used to vanish from
    the kernel's view, and every notebook of every student scored zero. What the student's Python reads (its
    environment, the checkout, the folders of PYTHONPATH, the model cache) is bound back wherever it is: here a
    module on PYTHONPATH under /tmp that the answer imports."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "helper_under_tmp.py").write_text("import numpy as np\n\n\n" + STABLE_SOFTMAX + "\n")
    for path in (tmp_path, lib, lib / "helper_under_tmp.py"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    monkeypatch.setenv("PYTHONPATH", str(lib))
    submission = tmp_path / "submission"
    submission.mkdir()
    nbformat.write(notebook(demo_release, "from helper_under_tmp import softmax"), submission / "01_demo.ipynb")
    scores = grading.autograde(submission, source=FIXTURE, timeout=60)
    assert scores.score == 5, scores.table()


# --- what crosses back is plain data (minibert.grading.plain, minibert.grading.remote) ----------------------

def _round_trip(value):
    import numpy as np

    from minibert.grading import plain

    blobs, handles = [], []

    def handle_of(obj):
        handles.append(obj)
        return {"t": "handle", "id": len(handles), "type": type(obj).__qualname__}

    encoded = plain.encode(value, blobs, handle_of)
    del np
    return plain.decode(encoded, blobs, lambda h: ("proxy", h["type"])), handles


def test_plain_data_comes_back_as_itself_and_nothing_else_crosses():
    import collections

    import numpy as np
    import torch

    value = {"n": 3, "x": 2.5, "nan": float("nan"), "big": 2**80, "s": "é", "none": None, "flag": True,
             "list": [1, (2, 3)], "set": {4}, "tensor": torch.arange(6).view(2, 3), "array": np.eye(2),
             "counts": collections.Counter("aab"), 7: b"bytes", "dtype": torch.long}
    back, handles = _round_trip(value)
    assert not handles
    assert torch.equal(back.pop("tensor"), value.pop("tensor")) and np.array_equal(back.pop("array"), value.pop("array"))
    nan = back.pop("nan")
    assert nan != nan and back == {**{k: v for k, v in value.items() if k != "nan"}, "counts": {"a": 2, "b": 1}}
    assert type(back["counts"]) is dict and type(back["list"][1]) is tuple

    class Always(int):  # an int "equal to everything", a tensor subclass, a function: proxies, never themselves
        def __eq__(self, other):
            return True

    class Yes(torch.Tensor):
        pass

    back, handles = _round_trip([Always(1), torch.ones(2).as_subclass(Yes), print])
    assert back == [1, ("proxy", "test_plain_data_comes_back_as_itself_and_nothing_else_crosses.<locals>.Yes"),
                    ("proxy", "builtin_function_or_method")]
    assert type(back[0]) is int  # its value, as a plain int: its __eq__ stays behind


def test_honest_answers_of_a_plain_types_subclass_come_back_as_their_values():
    """A namedtuple (equal to the tuple of its fields, read by field), a string taken from a numpy array, a str or
    int Enum member: a test compares their values, and a proxy would equal only itself."""
    import collections
    import enum

    import numpy as np

    Pair = collections.namedtuple("Pair", "tokens is_next")

    class Colour(str, enum.Enum):
        RED = "red"

    class Size(enum.IntEnum):
        LARGE = 3

    (pair, word, colour, size), handles = _round_trip([Pair(["a", "b"], True), np.array(["x", "yz"])[1], Colour.RED,
                                                       Size.LARGE])
    assert not handles
    assert pair == (["a", "b"], True) == Pair(["a", "b"], True) and pair.is_next and type(pair).__name__ == "Pair"
    tokens, is_next = pair
    assert tokens == ["a", "b"] and [pair] == [Pair(["a", "b"], True)]
    assert (word, colour, size) == ("yz", "red", 3) and (type(word), type(colour), type(size)) == (str, str, int)
    Odd = collections.namedtuple("Odd", ["def", "x"], rename=True)
    (odd,), _ = _round_trip([Odd(1, 2)])
    assert odd == (1, 2) and odd.x == 2
    from minibert.grading import plain  # a forged type name and fields that are not identifiers: renamed
    forged = plain.decode({"t": "namedtuple", "type": "class", "k": ["def", "x y", "ok"],
                           "v": [{"t": "v", "v": i} for i in range(3)]}, [], lambda h: h)
    assert forged == (0, 1, 2) and forged.ok == 2 and type(forged).__name__ == "Record"


def test_a_header_too_large_to_parse_safely_is_refused_before_it_is_parsed():
    """A JSON header costs ~25 times its size once parsed: one of millions of empty dicts would take the grader's
    memory before any other bound is checked."""
    import io
    import struct

    from minibert.grading import plain

    header = b"[" + b"{}," * (plain.MAX_HEADER // 3) + b"{}]"
    message = struct.pack("<I", 1) + struct.pack("<Q", len(header)) + header
    stream = io.BytesIO()
    stream.write(message)
    plain.send(stream, {"ok": [1, 2]}, [b"blob"])
    stream.seek(0)
    with pytest.raises(plain.WireError, match="a value too large to check") as refused:
        plain.receive(stream)
    assert refused.value.whole  # read to its end, never parsed: the next message is read as it was sent
    assert plain.receive(stream) == ({"ok": [1, 2]}, [b"blob"])


def test_a_process_that_stops_reading_cannot_hold_the_grader():
    """A request larger than the pipe holds, to a process that never reads: the write is given the time a call
    has, then the process is ended (it was the checker's hang, whatever --timeout said)."""
    from minibert.grading import remote

    requests_read, requests_write = os.pipe()
    answers_read, answers_write = os.pipe()
    process = subprocess.Popen(["sleep", "120"], pass_fds=(requests_read, answers_write))
    os.close(requests_read)
    os.close(answers_write)
    requests = os.fdopen(requests_write, "wb", buffering=1 << 20)
    connection = remote.Connection(process, requests, os.fdopen(answers_read, "rb", buffering=0), 1, None)
    started = time.monotonic()
    with pytest.raises(remote.StudentTimeout, match="stopped reading the grader's requests"):
        connection.send({"op": "call"}, [b"x" * 2**22])
    assert time.monotonic() - started < 30 and process.wait(10) is not None
    try:
        requests.close()
    except OSError:  # what was left unsent cannot go: the reader is gone
        pass


def test_a_value_that_cannot_be_fetched_fails_its_test_alone():
    """A value that cannot cross (here a RemoteError while it is fetched) fails the tests that read it, and only
    those: every test fetches all the names the solution cells so far define, and the others keep their scores."""
    from minibert.grading import check, remote
    from minibert.grading.runner import new_shell

    class Connection:
        notes: list = []

        def get(self, name):
            if name == "broken":
                raise remote.RemoteError("RecursionError: a list that holds itself")
            return 2

    shell = new_shell()
    shell.showtraceback = shell.showsyntaxerror = lambda *args, **kwargs: None
    failed = check.run_test(shell, "assert broken == 1", ["broken", "fine"], Connection())
    passed = check.run_test(shell, "assert fine == 2", ["broken", "fine"], Connection())  # it does not read broken
    assert not failed["passed"] and "RecursionError: a list that holds itself" in failed["error"]
    assert passed["passed"], passed


def test_what_is_not_plain_data_is_refused_when_read():
    from minibert.grading import plain

    for forged in [{"t": "pickle", "v": "gASV"}, {"t": "v", "v": [1]}, {"t": "tensor", "i": 0}, {"t": "dict", "k": [],
                   "v": [{"t": "v", "v": 1}]}, {"t": "float", "v": "1e999"}, "just a string", {"t": "bigint", "v": "1x"}]:
        with pytest.raises(plain.WireError):
            plain.decode(forged, [b"not safetensors"], lambda h: h)
    deep = {"t": "v", "v": 1}
    for _ in range(plain.MAX_DEPTH + 5):
        deep = {"t": "list", "v": [deep]}
    with pytest.raises(plain.WireError, match="too deep"):
        plain.decode(deep, [], lambda h: h)


def test_a_proxy_of_a_students_object_equals_only_itself_and_has_no_truth():
    from minibert.grading.remote import Remote

    proxy, other = Remote(None, 1, "x.Always", ""), Remote(None, 2, "x.Always", "")
    assert proxy == proxy and proxy != other and proxy != 1 and not (proxy == "anything")
    for check in (bool, float, int, lambda p: p > 0, lambda p: p + 1, lambda p: -p, abs, lambda p: p @ p):
        with pytest.raises(TypeError, match="an object of the student's"):
            check(proxy)
    assert {proxy: 1}[proxy] == 1  # hashable by identity


def test_an_in_place_change_is_seen_in_a_tensor_and_in_an_array():
    """What the student's process compares before and after a call, to note an argument changed in place."""
    import numpy as np
    import torch

    from minibert.grading.runner import _snapshot

    tensor, array = torch.zeros(3), np.zeros(3)
    before = _snapshot(tensor), _snapshot(array)
    assert (_snapshot(tensor), _snapshot(array)) == before  # nothing changed, nothing seen
    tensor.add_(1)
    array += 1
    assert _snapshot(tensor) != before[0] and _snapshot(array) != before[1]
    assert _snapshot([1.0]) is None and _snapshot("text") is None


def test_a_model_comes_back_in_the_modes_the_call_left_it_in():
    """An evaluation that leaves the test's model in evaluation mode is seen to (a test checks that the model is
    back in training mode); its weights, outside a training step, are not taken back."""
    import copy

    import torch

    from minibert.grading import remote, runner

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.1))
    students_copy = copy.deepcopy(model)
    students_copy.eval()
    with torch.no_grad():
        students_copy[0].weight.zero_()
    changed, _ = _round_trip(runner._changed((students_copy,), {}))
    remote._copy_back((model,), {}, changed)
    assert not model.training and not model[1].training and model[0].weight.abs().sum() > 0
    remote._copy_back((model,), {}, {"0": {"modes": [True]}})  # modes that do not fit the model: ignored
    assert not model.training


def test_a_tests_calls_share_one_timeout():
    """Calls each within --timeout, many of them, would hold the grader for calls × timeout: once a test's calls
    have taken --timeout together, the next one is refused."""
    from minibert.grading import remote

    process = subprocess.Popen(["sleep", "30"])
    try:
        connection = remote.Connection(process, None, None, 5, None)
        connection.spent = 5.2
        with pytest.raises(remote.StudentTimeout, match="this test's calls took 5 s together"):
            connection.ask({"op": "get", "name": "softmax"})
    finally:
        process.kill()
        process.wait()
