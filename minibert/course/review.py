"""Read a submission's own code before its hidden tests run, outside the kernel that runs them.

Student code and the tests after it share one Python process, so a submission can change how the tests
run: an IPython input transformer that strips their asserts or keeps only the line printing the grader's
token (`minibert.course.canary`), a patched ``np.allclose``, an object whose ``__eq__`` says yes, a name
the tests read bound to something else. Nothing inside that process can rule this out, so the grader reads
the code first, here, as text, and a notebook whose own code does any of the following is not scored
automatically: each finding names its cell, line and reason, and a person decides (`grading.autograde`'s
``reviewed``).

- **reaching into the kernel or the interpreter**: ``get_ipython`` and magics, ``exec``/``eval``/
  ``compile``/``getattr``/``setattr``/``globals``/``open`` and their kin, any ``__dunder__`` name,
  attribute or string, private attributes (``_x``), modules outside `review_rules.ALLOWED_MODULES`, names the notebook
  bound to such modules (``sys``, ...), and the libraries' own ways out (`review_rules.ESCAPE_ATTRIBUTES`:
  loading pickles or compiled code, registering global hooks or model classes, writing files);
- **changing what the tests use**: assigning or deleting attributes of anything but ``self`` in a method,
  writing into or calling in-place methods on a module's objects or the notebook's own, passing a module
  around, and subclassing anything but a model or an exception (a ``torch.Tensor`` subclass can answer
  the tests' own ``(a == b).all()``);
- **rebinding a name the tests read**: a builtin, or a global the instructor's cells read, other than the
  exercise's own names and the notebook's own imports.

The rules are written against the ways in that are known, not proved complete: the cases they were
tested on are in tests/test_review.py. One way they do not see: a library's object reached without a call
(a registry dict, say), handed to the student's own function and changed there through its parameter;
INSTRUCTORS.md says what a grader should still read by eye.
Honest answers in the course never trip them (tested on every solution); one that does is held, not
zeroed silently, and its finding says why.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .review_rules import global_reads, import_bindings, pure_chain, review_cell, root_name, top_level_bindings

MAX_DEPTH = 100  # of a cell's syntax tree: an answer nests a few dozen deep; the reader follows 100 with room to spare


@dataclass(frozen=True)
class Finding:
    cell: int  # 1-based position among the notebook's cells, as Jupyter's cell list shows them
    line: int
    code: str  # the line itself
    why: str

    def __str__(self) -> str:
        return f"cell {self.cell}, line {self.line}: `{self.code}`: {self.why}"


def python_of(cell_source: str) -> ast.Module | None:
    """The Python a kernel runs for a cell (magics and ``!`` commands become ``get_ipython()`` calls, as
    IPython itself rewrites them), parsed; None if it is not Python (it will fail in the kernel too)."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(TransformerManager().transform_cell(cell_source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # Python's own parser fails on it the same way
        return None


@dataclass
class Trusted:
    """What the instructor's notebook says about itself: the code cells that are its own (everything but
    the answers), the names they read from outside a cell, the names each import of theirs binds, and the
    names an answer is expected to bind."""

    texts: set[str]
    locked_ids: set[str]
    reads: set[str]
    imports: dict[str, str]  # name -> what it is bound to ("numpy", "pathlib.Path")
    answer_names: set[str]

    @classmethod
    def of(cls, source_notebook: Path) -> Trusted:
        texts, locked, reads, imports, answers = set(), set(), set(), {}, set()
        for cell in nbformat.read(source_notebook, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code":
                continue
            tree = python_of(cell.source)
            if meta.get("solution"):
                answers |= top_level_bindings(tree) if tree else set()
                continue
            texts.add(cell.source.strip())
            if meta.get("grade_id") and (meta.get("locked") or meta.get("grade")):
                locked.add(meta["grade_id"])
            if tree:
                bound = top_level_bindings(tree)
                reads |= global_reads(tree) - bound
                imports.update(import_bindings(tree))
        return cls(texts, locked, reads, imports, answers)


def depth(tree: ast.AST) -> int:
    """How deep ``tree`` nests, counted without recursion: the reader below recurses, and Python itself compiles
    expressions nested deeper than a recursive reader can follow."""
    deepest, todo = 0, [(tree, 1)]
    while todo:
        node, level = todo.pop()
        deepest = max(deepest, level)
        todo.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return deepest


@dataclass
class Student:
    """What a submission's own cells bind, read together: its globals and classes, every import of the
    notebook (its own and the instructor's), the names that hold a library's objects (imports, and names
    bound to ``a.b.c`` of one without a call), and of those the ones that hold modules."""

    globals: set[str]
    classes: set[str]
    imports: dict[str, str]
    library: set[str]
    modules: set[str]

    @classmethod
    def of(cls, trees: list[ast.Module], trusted: Trusted) -> Student:
        imports = {**trusted.imports}
        for tree in trees:
            imports.update(import_bindings(tree))
        library = set(imports)
        for _ in range(3):  # `reg = transformers.x.REGISTRY`, then `r = reg`: a library's object, by another name
            library |= {t.id for tree in trees for node in ast.walk(tree) if isinstance(node, ast.Assign)
                        and pure_chain(node.value) and root_name(node.value) in library
                        for t in node.targets if isinstance(t, ast.Name)}
        modules = {name for name, path in imports.items() if "." not in path or path.split(".")[-1] in
                   {"nn", "functional", "init", "linalg", "fft", "random", "utils", "data", "optim"}}
        return cls(set().union(*map(top_level_bindings, trees)),
                   {n.name for tree in trees for n in ast.walk(tree) if isinstance(n, ast.ClassDef)},
                   imports, library, modules)


def student_code(submitted: Path, trusted: Trusted) -> list[tuple[int, str, ast.Module]]:
    """(1-based cell position, source, parsed) of each code cell of ``submitted`` whose code is the
    student's: not a cell nbgrader restores from the instructor's copy, not verbatim one of the instructor's."""
    cells = []
    for i, cell in enumerate(nbformat.read(submitted, as_version=4).cells, start=1):
        if cell.cell_type != "code" or cell.metadata.get("nbgrader", {}).get("grade_id") in trusted.locked_ids:
            continue
        if cell.source.strip() in trusted.texts:
            continue
        tree = python_of(cell.source)
        if tree is not None:
            cells.append((i, cell.source, tree))
    return cells


def review(submitted: Path, source_notebook: Path) -> list[Finding]:
    """What of ``submitted``'s own code may not run before hidden tests (module docstring): empty if nothing."""
    trusted = Trusted.of(source_notebook)
    cells = [(position, source, tree, depth(tree) <= MAX_DEPTH) for position, source, tree in student_code(submitted, trusted)]
    student = Student.of([tree for _, _, tree, readable in cells if readable], trusted)
    findings = []
    for position, source, tree, readable in cells:
        lines = source.splitlines() or [""]
        found = review_cell(tree, trusted, student) if readable else [
            (1, f"nested more than {MAX_DEPTH} deep, too deep for the review to read (Python runs it): a person must")]
        for line, why in found:
            code = lines[min(line, len(lines)) - 1].strip()
            findings.append(Finding(position, line, code[:80] + ("…" if len(code) > 80 else ""), why))
    return findings
