"""The package's layers, checked from outside: what each entry point imports, the import graph read
from the source, and the size of each module.

The library (the model, its tokenizer, data, training, the analyses) sits at the bottom; recipes and
experiments are built from it; the command line and the course tools (grading, slides, release zip)
sit on top. Nothing below imports from above, so a student can read the model without the course's
tooling, and an instructor can grade or build slides without importing torch.
"""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minibert"
# Built on the library; the library imports none of them.
TOP = ("minibert.cli", "minibert.recipes", "minibert.experiments", "minibert.course", "minibert.grading")
NOTEBOOK_TOOLING = ("nbgrader", "nbconvert", "bertviz", "ipywidgets", "matplotlib", "jupyter", "IPython")
ARGPARSE_ALLOWED = ("minibert.cli", "minibert.course", "minibert.grading")  # the commands and `python -m` entry points
ARGPARSE_ALLOWED_MODULES = {"minibert.data", "minibert.data.__main__"}  # `python -m minibert.data`
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def within(module: str, prefixes) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def imported_after(code: str) -> set[str]:
    """The modules in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(result.stdout.splitlines()[-1]))


def runtime_nodes(node):
    """Every node under ``node`` except those in ``if TYPE_CHECKING:`` blocks, which never run."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            yield from (n for orelse in child.orelse for n in [orelse, *runtime_nodes(orelse)])
            continue
        yield child
        yield from runtime_nodes(child)


def imports(module: str) -> set[str]:
    """The minibert modules that ``module`` imports when it runs, at the top or inside functions;
    ``from .x import y`` counts as an import of ``x.y`` when that is a module, otherwise of ``x``
    (the package's lazily loaded names count as imports of the module that defines them)."""
    import minibert
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = ".".join(base[:len(base) - node.level + 1]) if node.level else ""
            target = ".".join(filter(None, [base, node.module]))
            for alias in node.names:
                if f"{target}.{alias.name}" in MODULES:
                    found.add(f"{target}.{alias.name}")
                elif target == "minibert" and alias.name in minibert._LAZY:
                    found.add(minibert._LAZY[alias.name])
                else:
                    found.add(target)
    return {name for name in found if name in MODULES and name != module}


GRAPH = {module: imports(module) for module in MODULES}


def test_the_model_imports_no_notebook_tooling():
    loaded = imported_after("import minibert\nminibert.BertModel\nimport minibert.tokenizer")
    assert "minibert.model" in loaded
    tooling = sorted(name for name in loaded if name.split(".")[0].startswith(NOTEBOOK_TOOLING))
    assert not tooling, f"import minibert pulls in {tooling}"


def test_the_course_tools_import_no_torch():
    loaded = imported_after("import minibert.grading, minibert.course.slides, minibert.course.release_zip")
    assert "minibert.grading.commands" in loaded
    heavy = sorted(name for name in loaded if name.split(".")[0] == "torch" or name == "minibert.model")
    assert not heavy, f"the course tools pull in {heavy[:5]}"


def test_the_package_has_its_public_names_and_version():
    loaded = imported_after("import minibert\nassert minibert.__version__\n"
                            "assert set(minibert.__all__) <= set(dir(minibert))")
    assert "torch" not in loaded  # nothing loads until a name is used
    import minibert
    for name in minibert.__all__:
        assert getattr(minibert, name) is not None
    assert minibert.BertModel.__module__ == "minibert.model"
    with pytest.raises(AttributeError):
        minibert.NoSuchThing  # noqa: B018


def test_no_import_cycles():
    state, cycles = {}, []  # module -> "visiting" or "done"; each cycle found by a depth-first search

    def visit(module, path):
        state[module] = "visiting"
        for target in sorted(GRAPH[module]):
            if state.get(target) == "visiting":
                cycles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_library_imports_nothing_built_on_it():
    upward = {module: sorted(t for t in targets if within(t, TOP))
              for module, targets in GRAPH.items() if not within(module, TOP)}
    assert not {m: t for m, t in upward.items() if t}, "the library imports from recipes/experiments/cli/course"


CORE = {f"minibert.{name}" for name in ("config", "inputs", "tokenizer", "tokenizer_files", "vocabulary", "embeddings",
                                         "attention", "add_norm", "unpadding", "model", "heads", "outputs", "hub",
                                         "atomic", "user_files")}


def test_the_model_core_stands_alone():
    """BERT itself (config, tokenizer, layers, heads, checkpoints) needs nothing of data, training or tasks."""
    outward = {m: sorted(t for t in GRAPH[m] if t.startswith("minibert.") and t not in CORE) for m in CORE}
    assert not {m: t for m, t in outward.items() if t}, "the model core imports from the rest of the library"



def test_modernbert_sits_on_the_core_and_the_core_knows_nothing_of_it():
    """ModernBERT reuses BERT's loading, checks and attention kernel (the core) and nothing else; BERT's own
    modules never import it, so no BERT class grows a ModernBERT flag."""
    modern = {m for m in GRAPH if within(m, ("minibert.modernbert",))}
    assert modern, "minibert.modernbert is missing"
    outward = {m: sorted(t for t in GRAPH[m] if t.startswith("minibert.") and t not in CORE and t not in modern)
               for m in modern}
    assert not {m: t for m, t in outward.items() if t}, "ModernBERT imports beyond the model core"
    inward = {m: sorted(t for t in GRAPH[m] if t in modern) for m in CORE}
    assert not {m: t for m, t in inward.items() if t}, "BERT's core imports ModernBERT"

def test_only_entry_points_parse_arguments():
    def uses_argparse(path):
        for node in runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
                return True
            if isinstance(node, ast.ImportFrom) and node.module == "argparse":
                return True
        return False

    parsing = sorted(m for m, path in MODULES.items() if not within(m, ARGPARSE_ALLOWED)
                     and m not in ARGPARSE_ALLOWED_MODULES and uses_argparse(path))
    assert not parsing, f"command-line parsing belongs in minibert.cli: {parsing}"


def test_modules_stay_short():
    long = {m: n for m, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by idea): {long}"
