"""The review that reads a submission's own code before its hidden tests run (minibert.course.review).

Each tampering below changes how the hidden tests after it run, and was tried in the kernel first: the
three the audit of issue #24 used to get a wrong softmax full marks (an input transformer that strips
asserts, one that keeps only the grader's token line, a patched ``np.allclose``) and the kin of each. The
review must name every one, and nothing in an honest answer: every solution of the course and a set of
answers written the ways students write them. End to end, through nbgrader, in test_grading.py.
"""
from pathlib import Path

import nbformat
import pytest

from minibert.course import review

FIXTURE = Path(__file__).parent / "fixtures" / "grading" / "01_demo.ipynb"
COURSE = Path(__file__).resolve().parents[1] / "notebooks"
SOFTMAX = "def softmax(x):\n    z = np.exp(x - x.max(axis=-1, keepdims=True))\n    return z / z.sum(axis=-1, keepdims=True)\n"


def findings(tmp_path, answer: str, extra_cell: str | None = None) -> list[review.Finding]:
    """The review of the fixture notebook with ``answer`` in its softmax solution cell (and a cell of the
    student's own after it)."""
    nb = nbformat.read(FIXTURE, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
    cell.source = answer
    if extra_cell is not None:
        nb.cells.insert(nb.cells.index(cell) + 1, nbformat.v4.new_code_cell(extra_cell))
    nbformat.write(nb, tmp_path / "01_demo.ipynb")
    return review.review(tmp_path / "01_demo.ipynb", FIXTURE)


TAMPERING = {
    # the audit's three
    "transformer that strips asserts": "get_ipython().input_transformers_post.append(\n"
                                       "    lambda lines: [l for l in lines if 'assert' not in l])",
    "transformer that keeps the token line": "get_ipython().input_transformers_cleanup.append(\n"
                                             "    lambda lines: [l for l in lines if 'minibert-grader' in l])",
    "patched np.allclose": "np.allclose = lambda *a, **k: True",
    # the kernel and the interpreter
    "ast transformer via an alias": "ip = get_ipython()\nip.ast_transformers.append(object())",
    "cell magic": "%%capture\nprint('hidden from the review')",
    "line magic": "%config IPCompleter.greedy = True",
    "code inside a line magic": "%time np.allclose = print",
    "shell command": "!rm -rf .",
    "exec": "exec('import numpy as np; np.allclose = lambda *a, **k: True')",
    "eval": "eval('1')",
    "compile": "code = compile('x = 1', 'x', 'exec')",
    "getattr on a module": "f = getattr(np, 'all' + 'close')",
    "setattr on a module": "setattr(np, 'allclose', lambda *a, **k: True)",
    "globals": "globals()['np'] = None",
    "builtins module": "import builtins\nbuiltins.all = lambda x: True",
    "__builtins__": "__builtins__.all = lambda x: True",
    "sys.modules": "import sys\nsys.modules['numpy'].allclose = print",
    "settrace": "import sys\nsys.settrace(None)",
    "os": "import os\nos.kill(os.getppid(), 9)",
    "from-import of os": "from os import system",
    "subprocess": "import subprocess",
    "ctypes": "import ctypes",
    "ctypes through numpy": "lib = np.ctypeslib",
    "importlib": "import importlib",
    "inspect frames": "import inspect",
    "threads": "import threading",
    "signals": "import signal",
    "gc": "import gc\ngc.get_objects()",
    "the grader's own modules": "from minibert.course import canary",
    "dunder attribute": "np.__dict__['allclose'] = print",
    "dunder in a string": "name = '__eq__'",
    "private attribute": "import torch\ntorch.nn.Module._call_impl = None",
    "torch.library": "import torch\nlib = torch.library.Library('aten', 'IMPL')",
    "global forward hook": "import torch\ntorch.nn.modules.module.register_module_forward_hook(print)",
    "a library-wide gradient hook": "import torch\ntorch.autograd.graph.register_multi_grad_hook((), print)",
    "hooks on saved tensors": "import torch\nctx = torch.autograd.graph.saved_tensors_hooks(print, print)",
    "registering a model class": "import transformers\ntransformers.AutoModel.register(int, float)",
    "pickle through torch.load": "import torch\nstate = torch.load('x.pt', weights_only=False)",
    "pickle through np.load": "a = np.load('x.npy', allow_pickle=True)",
    "remote code": "import transformers\nm = transformers.AutoModel.from_pretrained('x', trust_remote_code=True)",
    "writing a module the tests may import": "with open('scipy.py', 'w') as f:\n    f.write('')",
    "writing through numpy": "np.savetxt('scipy.py', [])",
    "memory views": "v = np.lib.stride_tricks.as_strided(np.zeros(1), (10**6,), (8,))",
    "wildcard import": "from numpy import *",
    "relative import": "from . import something",
    # what the tests use
    "patched through an alias": "n = np\nn.allclose = print",
    "module passed to a function": "def patch(m):\n    m.allclose = print\npatch(np)",
    "module attribute deleted": "del np.allclose",
    "numpy.testing patched": "np.testing.assert_allclose = print",
    "class attribute patched": "import torch\ntorch.Tensor.allclose = lambda *a, **k: True",
    "library registry written": "import transformers\n"
                                "reg = transformers.models.bert.modeling_bert.BERT_SELF_ATTENTION_CLASSES\n"
                                "reg['eager'] = None",
    "library registry updated": "import transformers\n"
                                "transformers.models.bert.modeling_bert.BERT_SELF_ATTENTION_CLASSES.update(eager=None)",
    "__eq__ that says yes": "class Yes:\n    def __eq__(self, other):\n        return True",
    "__bool__": "class T:\n    def __bool__(self):\n        return True",
    "__array__": "class A:\n    def __array__(self):\n        return np.ones(2)",
    "__getattr__": "class A:\n    def __getattr__(self, name):\n        return 1",
    "__del__ that runs later": "class A:\n    def __del__(self):\n        pass",
    "dunder by assignment in a class": "class A:\n    __eq__ = lambda self, other: True",
    "type() with a dict": "A = type('A', (), {})",
    "metaclass": "class M:\n    pass\nclass A(metaclass=M):\n    pass",
    "Tensor subclass": "import torch\nclass Liar(torch.Tensor):\n    def all(self):\n        return True",
    "ndarray subclass": "class Liar(np.ndarray):\n    def all(self):\n        return True",
    "Tensor subclass under a model's name": "from torch import Tensor as Module\nclass Liar(Module):\n    pass",
    "str subclass": "class S(str):\n    def startswith(self, p):\n        return True",
    # names the tests read
    "np rebound": "class Fake:\n    pass\nnp = Fake()",
    "np rebound from a function": "def softmax(x):\n    global np\n    np = None\n    return x",
    "np rebound by another import": "import torch as np",
    "builtin rebound": "all = lambda x: True",
    "isinstance rebound": "def isinstance(a, b):\n    return True",
    "builtin rebound in a loop": "for abs in [print]:\n    pass",
}


@pytest.mark.parametrize("name", TAMPERING)
def test_every_known_way_to_change_how_the_tests_run_is_held(tmp_path, name):
    found = findings(tmp_path, SOFTMAX + TAMPERING[name])
    assert found, f"the review missed: {name}"
    assert all(f.cell == 4 and f.why for f in found)


@pytest.mark.parametrize("name", ["patched np.allclose", "exec", "__eq__ that says yes"])
def test_tampering_in_a_cell_of_the_students_own_is_held_too(tmp_path, name):
    found = findings(tmp_path, SOFTMAX, extra_cell=TAMPERING[name])
    assert found and {f.cell for f in found} == {5}


def test_a_finding_names_the_cell_the_line_and_why(tmp_path):
    [found] = findings(tmp_path, SOFTMAX + "\nnp.allclose = lambda *a, **k: True")
    assert (found.cell, found.line, found.code) == (4, 5, "np.allclose = lambda *a, **k: True")
    assert str(found) == ("cell 4, line 5: `np.allclose = lambda *a, **k: True`: changes `np.allclose`: "
                          "only `self.` attributes may be set, in a class's methods")


HONEST = {
    "the stable softmax": SOFTMAX,
    "the naive softmax": "def softmax(x):\n    return np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)",
    "helpers and a check": "import math\nfrom collections import Counter\n\ndef _shift(x):\n    return x - x.max()\n\n"
                           "def softmax(x):\n    z = np.exp(_shift(x))\n    return z / z.sum()\n\n"
                           "print(softmax(np.array([1.0, 2.0])), math.pi, Counter('ab'))",
    "a warning": "import warnings\n\ndef softmax(x):\n    warnings.warn('slow')\n    return x",
    "torch, in place on its own tensors": "import torch\nimport torch.nn.functional as F\n\n"
                                          "def softmax(x):\n    t = torch.as_tensor(x).clone()\n    t[t < -1e9] = -1e9\n"
                                          "    t.sub_(t.max())\n    out = F.softmax(t, dim=-1)\n    return out.numpy()",
    "a model class": "import torch\nfrom torch import nn\n\nclass Head(nn.Module):\n    def __init__(self, d):\n"
                     "        super().__init__()\n        self.proj = nn.Linear(d, 2)\n        nn.init.normal_(self.proj.weight)\n"
                     "        self.register_buffer('scale', torch.ones(1))\n\n    def forward(self, x):\n"
                     "        def inner(y):\n            self.last = y\n            return self.proj(y)\n        return inner(x)\n\n"
                     "    def __repr__(self):\n        return 'Head'\n",
    "a dataset and its own dict": "import torch\n\nclass Pairs(torch.utils.data.Dataset):\n    def __init__(self):\n"
                                  "        self.rows = {}\n        self.rows.update(a=1)\n\n    def __len__(self):\n"
                                  "        return len(self.rows)\n\n    def __getitem__(self, i):\n        return self.rows['a']\n",
    "numpy's own import again": "import numpy as np\n" + SOFTMAX,
    "reading json and a path": "import json\nfrom pathlib import Path\n\ncard = json.loads(Path('x.json').read_text()"
                               " if Path('x.json').exists() else '{}')\n" + SOFTMAX,
    "an exercise's main guard": "if __name__ == '__main__':\n    print(softmax)\n" + SOFTMAX,
    "a syntax error (fails in the kernel, changes nothing)": "def softmax(x)\n    return x",
    "a name the test cell binds itself before reading it": "p = None\n" + SOFTMAX,
    "a plotting backend": "%matplotlib inline\n" + SOFTMAX,
}


@pytest.mark.parametrize("name", HONEST)
def test_honest_answers_are_not_held(tmp_path, name):
    assert findings(tmp_path, HONEST[name]) == []


@pytest.mark.parametrize("notebook", sorted(p.name for p in COURSE.glob("[0-9][0-9]*_*.ipynb")))
def test_no_solution_of_the_course_is_held(notebook):
    """The instructor's own answers, reviewed as if a student had written them."""
    assert review.review(COURSE / notebook, COURSE / notebook) == []


def test_the_untouched_release_is_not_held_and_restored_cells_are_not_read(tmp_path):
    """Test cells nbgrader restores from the instructor's copy run as the instructor wrote them, whatever
    the submission has in them; cells the instructor wrote run as written."""
    nb = nbformat.read(FIXTURE, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.source = "get_ipython()  # restored by nbgrader before it runs"
    nbformat.write(nb, tmp_path / "01_demo.ipynb")
    assert review.review(tmp_path / "01_demo.ipynb", FIXTURE) == []
    nb.cells[1].source = nb.cells[1].source + "\nnp.allclose = print"  # the instructor's import cell, edited
    nbformat.write(nb, tmp_path / "01_demo.ipynb")
    assert [f.cell for f in review.review(tmp_path / "01_demo.ipynb", FIXTURE)] == [2]


EXPECTED = "expected = np.array([0.5, 0.5])  # the instructor's reference, read by the hidden test"


@pytest.mark.parametrize("code", ["expected[:] = 0.5", "expected.fill(0.5)", "np.copyto(expected, 0.5)",
                                  "import torch\ntorch.from_numpy(expected).copy_(torch.ones(2))",
                                  "e = expected\nexpected = e", "del expected"])
def test_the_notebooks_own_objects_are_not_the_answers_to_change(tmp_path, code):
    """A reference value an instructor cell computes and a hidden test reads: written into, changed in place or
    rebound, and the wrong answer would compare equal to it."""
    nb = nbformat.read(FIXTURE, as_version=4)
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax_tests")
    test.source = test.source.replace("[0.5, 0.5]", "expected")
    nb.cells.insert(nb.cells.index(test) - 1, nbformat.v4.new_code_cell(EXPECTED))
    nbformat.write(nb, tmp_path / "source.ipynb")
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
    cell.source = SOFTMAX + code
    nbformat.write(nb, tmp_path / "submitted.ipynb")
    assert review.review(tmp_path / "submitted.ipynb", tmp_path / "source.ipynb")
    cell.source = SOFTMAX + "mine = expected.copy()\nmine[:] = 0"  # a copy of its own is the answer's
    nbformat.write(nb, tmp_path / "submitted.ipynb")
    assert review.review(tmp_path / "submitted.ipynb", tmp_path / "source.ipynb") == []


def test_code_nested_deeper_than_the_review_reads_is_held(tmp_path):
    """Python compiles an expression of 2,000 terms; a recursive reader would crash on it (and a crash would
    either stop the class's grading or let whatever the cell hides through)."""
    deep = "x = " + " + ".join(["1"] * 2000) + "\nnp.allclose = print"
    compile(deep, "cell", "exec")
    [found] = findings(tmp_path, SOFTMAX + deep)
    assert found.cell == 4 and "too deep for the review to read" in found.why


def test_a_scratch_cell_is_held_only_for_a_name_the_notebook_reads_as_its_own(tmp_path):
    """Students add cells to try things. Names the instructor's cells use only inside their own loops,
    comprehensions and functions are free to reuse (Python's own scope analysis says which are globals); a
    global the notebook's cells read is not."""
    nb = nbformat.read(COURSE / "02_attention.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("i = 0\nfor k in range(3):\n    print(k, i)\nrows = [j for j in range(3)]"))
    nbformat.write(nb, tmp_path / "02_attention.ipynb")
    assert review.review(tmp_path / "02_attention.ipynb", COURSE / "02_attention.ipynb") == []
    nb.cells[-1].source = "x = 0  # the notebook's own input to the attention cells"
    nbformat.write(nb, tmp_path / "02_attention.ipynb")
    [found] = review.review(tmp_path / "02_attention.ipynb", COURSE / "02_attention.ipynb")
    assert found.why == "rebinds `x`, which the notebook's own cells read"
