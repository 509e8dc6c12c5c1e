"""The rules `minibert.course.review` reads a submission's own code by: what it may import, name, set and
define (the module docstring there says why each exists), and the syntax helpers they need."""
from __future__ import annotations

import ast
import builtins
import re
import symtable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .review import Student, Trusted

ALLOWED_MODULES = {"numpy", "torch", "math", "cmath", "random", "statistics", "collections", "itertools",
                   "functools", "heapq", "bisect", "copy", "dataclasses", "typing", "enum", "string", "re",
                   "textwrap", "unicodedata", "json", "time", "warnings", "abc", "numbers", "fractions",
                   "decimal", "pprint", "pathlib", "matplotlib", "tqdm", "minibert", "transformers", "tokenizers",
                   "safetensors", "IPython.display"}
DENIED_MODULE_PARTS = {"library", "hub", "package", "multiprocessing", "distributed", "jit", "overrides",
                       "cpp_extension", "ops", "classes", "ctypeslib", "course", "cli", "serialization"}
FORBIDDEN_NAMES = {"get_ipython", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "getattr",
                   "setattr", "delattr", "open", "breakpoint", "input", "exit", "quit", "help", "memoryview"}
ESCAPE_ATTRIBUTES = DENIED_MODULE_PARTS | {
    "load_library", "register", "ma", "as_strided", "save", "savetxt", "savez", "savez_compressed", "tofile",
    "open", "write_text", "write_bytes", "system", "popen", "set_default_tensor_type", "saved_tensors_hooks"}
UNSAFE_KEYWORDS = {("weights_only", False), ("allow_pickle", True), ("trust_remote_code", True)}  # pickles, remote code
ALLOWED_DUNDER_METHODS = {"__init__", "__post_init__", "__len__", "__getitem__", "__iter__", "__next__",
                          "__repr__", "__str__", "__call__"}
CONTAINER_MUTATORS = {"update", "setdefault", "pop", "popitem", "clear", "append", "extend", "insert", "remove",
                      "add", "discard", "sort", "reverse", "load_state_dict", "fill", "resize", "partition",
                      "itemset", "setfield", "setflags"}  # numpy's in-place methods have no trailing _
IN_PLACE_FUNCTIONS = {"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis", "shuffle"}
SAFE_BASES = {"object", "Module", "Function", "Dataset", "IterableDataset", "Exception", "ValueError",
              "TypeError", "RuntimeError", "NamedTuple", "Enum"}  # what a student's class may derive from
CLASS = "<class body>"  # on the stack of enclosing `self` names: directly inside a class statement
NOT_ALLOWED = ("which answers may not import: they may use the course's libraries and Python's maths and data "
               "modules (ALLOWED_MODULES in minibert/course/review_rules.py)")
BUILTINS = set(dir(builtins))
DUNDER = re.compile(r"^__\w+__$")


def import_bindings(tree: ast.AST) -> dict[str, str]:
    """Each name an import statement binds -> the dotted path of what it is bound to."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module or ''}.{alias.name}"
    return bound


def top_level_bindings(tree: ast.Module) -> set[str]:
    """Names a cell binds in the notebook's namespace: at its top level, or declared ``global``."""
    names = {n for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names}

    def collect(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return  # what is inside binds its own locals
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(import_bindings(node))
        for child in ast.iter_child_nodes(node):
            collect(child)

    collect(tree)
    return names


def global_reads(tree: ast.Module) -> set[str]:
    """The notebook's names a cell reads: in its top level, or from inside its functions, classes, lambdas and
    comprehensions where Python's own scope analysis (`symtable`) says the name is a global, not theirs."""
    reads, tables = set(), [symtable.symtable(ast.unparse(tree), "cell", "exec")]
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        top = table.get_type() == "module"
        reads |= {s.get_name() for s in table.get_symbols() if s.is_referenced() and (top or s.is_global())}
    return reads


def local_names(function: ast.AST) -> set[str]:
    """A function's parameters and the names its body binds (nested functions' included: on the safe side)."""
    names = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    return names | {a.arg for n in ast.walk(function) if isinstance(n, ast.arguments)
                    for a in n.posonlyargs + n.args + n.kwonlyargs + [n.vararg, n.kwarg] if a}


def allowed_module(path: str) -> bool:
    parts = path.split(".")
    return (any(path == m or path.startswith(m + ".") for m in ALLOWED_MODULES)
            and not any(p.startswith("_") or p in DENIED_MODULE_PARTS for p in parts[1:]))


def root_name(node: ast.AST) -> str | None:
    """The name an expression like ``a.b[c].d(e).f`` starts from."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def pure_chain(node: ast.AST) -> bool:
    """``a.b.c`` or ``a.b["c"]``: an object reached from a name without calling anything."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return isinstance(node, ast.Name)


def dotted(node: ast.AST, imports: dict[str, str]) -> str:
    """``a.b.c`` with ``a`` replaced by what an import bound it to (``nn.Module`` -> ``torch.nn.Module``)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ast.unparse(node)
    return ".".join([imports.get(node.id, node.id), *reversed(parts)])


class Reader(ast.NodeVisitor):
    def __init__(self, tree: ast.Module, trusted: Trusted, student: Student):
        self.trusted, self.student = trusted, student
        self.findings: list[tuple[int, str]] = []
        self.selves: list[str | None] = []  # CLASS, or the `self` of each enclosing function (None: not a method)
        self.scopes: list[set[str]] = []  # the local names of each enclosing function
        self.chained = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}

    def flag(self, node: ast.AST, why: str) -> None:
        self.findings.append((getattr(node, "lineno", 1), why))

    def own(self, name: str | None) -> bool:
        """A name this code binds, where it is read: a local of an enclosing function, or a global of its own."""
        return name in self.student.globals or any(name in scope for scope in self.scopes)

    def foreign(self, name: str | None) -> bool:
        """An object this code did not make: a library's, or one of the notebook's own cells'."""
        return name is None or name in self.student.library or not self.own(name)

    # reaching into the kernel or the interpreter
    def visit_Name(self, node):
        if node.id in FORBIDDEN_NAMES:
            self.flag(node, f"`{node.id}` reaches into the kernel that runs the hidden tests")
        elif DUNDER.match(node.id) and node.id != "__name__":
            self.flag(node, f"`{node.id}` is a piece of the interpreter's machinery")
        elif (node.id in self.trusted.imports and not self.own(node.id)
              and not allowed_module(self.trusted.imports[node.id])):
            self.flag(node, f"`{node.id}` is the notebook's `{self.trusted.imports[node.id]}`, which answers may not use")
        elif node.id in self.student.modules and isinstance(node.ctx, ast.Load) and id(node) not in self.chained:
            self.flag(node, f"passes the module `{node.id}` around: code that gets it can change what the tests use")

    def visit_Attribute(self, node):
        if node.attr.startswith("_") and node.attr != "__init__":
            self.flag(node, f"`.{node.attr}` is private machinery of the object it belongs to")
        elif node.attr in ESCAPE_ATTRIBUTES or node.attr.startswith("register_module_"):
            self.flag(node, f"`.{node.attr}` loads, registers or writes outside the answer's own objects")
        if isinstance(node.ctx, (ast.Store, ast.Del)) and not (self.selves and self.selves[-1] not in (None, CLASS)
                                                                and root_name(node) == self.selves[-1]):
            self.flag(node, f"changes `{ast.unparse(node)}`: only `self.` attributes may be set, in a class's methods")
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if isinstance(node.ctx, (ast.Store, ast.Del)) and self.foreign(root_name(node)):
            self.flag(node, f"writes into `{ast.unparse(node.value)}`, an object the answer did not make")
        self.generic_visit(node)

    def visit_Constant(self, node):
        if isinstance(node.value, str) and DUNDER.match(node.value) and node.value != "__main__":
            self.flag(node, f"the string {node.value!r} names a piece of the interpreter's machinery")

    def visit_Import(self, node):
        for alias in node.names:
            if not allowed_module(alias.name):
                self.flag(node, f"imports `{alias.name}`, {NOT_ALLOWED}")

    def visit_ImportFrom(self, node):
        path = node.module or ""
        if node.level or not allowed_module(path) or any(
                a.name == "*" or a.name.startswith("_") or a.name in ESCAPE_ATTRIBUTES | FORBIDDEN_NAMES
                for a in node.names):
            self.flag(node, f"imports from `{'.' * node.level}{path}` a module, `*` or a way out that answers "
                            f"may not use ({NOT_ALLOWED})")

    # changing what the tests use
    def visit_Call(self, node):
        if ast.unparse(node.func) == "get_ipython().run_line_magic" and [
                type(a.value) if isinstance(a, ast.Constant) else None for a in node.args] == [str, str] and \
                node.args[0].value == "matplotlib":
            return  # `%matplotlib inline`: names a plotting backend, runs no code of the student's
        if isinstance(node.func, ast.Name) and node.func.id == "type" and len(node.args) == 3:
            self.flag(node, "`type(name, bases, dict)` makes a class whose methods this review cannot see")
        for keyword in node.keywords:
            if isinstance(keyword.value, ast.Constant) and (keyword.arg, keyword.value.value) in UNSAFE_KEYWORDS:
                self.flag(node, f"`{keyword.arg}={keyword.value.value}` runs code from a file or the Hub")
        if isinstance(node.func, ast.Attribute):
            method, receiver = node.func.attr, root_name(node.func.value)
            in_place = method.endswith("_") and not method.endswith("__")  # torch's `x.add_()`, not `__init__`
            if receiver in self.student.library and (in_place or method in IN_PLACE_FUNCTIONS):
                for arg in node.args[:1]:  # torch.nn.init.normal_(x), np.copyto(x, ...): x is changed
                    if self.foreign(root_name(arg)):
                        self.flag(node, f"changes `{ast.unparse(arg)}` in place, an object the answer did not make")
            elif receiver in self.student.library and (method in CONTAINER_MUTATORS or method.startswith("register")):
                self.flag(node, f"changes `{ast.unparse(node.func.value)}` (`.{method}`), a library's own object")
            elif self.foreign(receiver) and receiver not in self.student.library and (
                    in_place or method in CONTAINER_MUTATORS or method.startswith("register")):
                self.flag(node, f"changes `{ast.unparse(node.func.value)}` (`.{method}`), an object of the "
                                "notebook's the answer did not make")
        self.generic_visit(node)

    def visit_ClassDef(self, node):
        for base in node.bases:
            path = dotted(base, self.student.imports)  # through imports: `from torch import Tensor as Module`
            own = isinstance(base, ast.Name) and base.id in self.student.classes and base.id not in self.student.imports
            if not (own or path.split(".")[-1] in SAFE_BASES or (
                    path.startswith("torch.nn.") and path.split(".")[-1] not in {"Parameter", "Buffer"})):
                self.flag(node, f"subclasses `{ast.unparse(base)}`: objects of it could answer the tests' own "
                                "checks; answers may subclass models (nn.*), Dataset, Function or exceptions")
        for keyword in node.keywords:
            self.flag(node, f"`{keyword.arg}=` in a class statement changes how the class itself behaves")
        self.selves.append(CLASS)
        self.generic_visit(node)
        self.selves.pop()

    def visit_FunctionDef(self, node):
        if DUNDER.match(node.name) and node.name not in ALLOWED_DUNDER_METHODS:
            self.flag(node, f"defines `{node.name}`, which Python calls on its own (in comparisons, conversions, "
                            "lookups): answers may define only " + ", ".join(sorted(ALLOWED_DUNDER_METHODS)))
        in_method = bool(self.selves) and self.selves[-1] == CLASS and node.args.args
        outer = self.selves[-1] if self.selves and self.selves[-1] != CLASS else None
        self.selves.append(node.args.args[0].arg if in_method else outer)  # a closure in a method keeps its self
        self.scopes.append(local_names(node))
        self.generic_visit(node)
        self.scopes.pop()
        self.selves.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self.scopes.append(local_names(node))
        self.generic_visit(node)
        self.scopes.pop()


def review_cell(tree: ast.Module, trusted: Trusted, student: Student) -> list[tuple[int, str]]:
    """(line, why) of what one cell of a submission's own code may not do."""
    reader = Reader(tree, trusted, student)
    reader.visit(tree)
    for name in sorted(top_level_bindings(tree)):
        if name in BUILTINS:
            reader.flag(_binding(tree, name), f"rebinds the builtin `{name}`, which the tests use")
        elif (name in trusted.reads and name not in trusted.answer_names
              and import_bindings(tree).get(name, None) != trusted.imports.get(name, "")):
            reader.flag(_binding(tree, name), f"rebinds `{name}`, which the notebook's own cells read")
    return sorted(set(reader.findings))


def _binding(tree: ast.Module, name: str) -> ast.AST:
    """The first statement of ``tree`` that binds ``name`` (for the line a finding points at)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return node
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Global)) and name in (
                node.names if isinstance(node, ast.Global) else import_bindings(node)):
            return node
    return tree
