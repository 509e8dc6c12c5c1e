"""Hidden-test guards that an exercise was solved by hand, not by calling the library's answer.

The course builds BERT piece by piece and the library holds every piece, so a WordPiece exercise
would pass with ``from minibert.tokenizer import wordpiece``. Two guards close that door:

- `assert_by_hand` reads the student's function (its bytecode, and recursively every function or
  class of the notebook it uses) and fails if any of it names a forbidden module or object. Names
  are resolved as Python will resolve them, so builtins, torch and the student's own helpers pass,
  and a local variable that happens to be called ``wordpiece`` is not the library's ``wordpiece``.
- `forbidden_calls` makes the library's answer raise while the student's code runs: for what no
  reading can see (a method of an argument, ``getattr`` with a computed name, an alias in a dict).

Run in a notebook, both raise an ``AssertionError`` written for the student. When grading, the student's code
runs in a process of its own (`minibert.grading.check`), and whether it used the library's answer is read
there: an integrity note beside the score for the person grading, never a zero (that process is the
student's, so what it reports is a hint, not a proof).
"""
import builtins
import contextvars
import dis
import importlib
import inspect
import re
import sys
from contextlib import contextmanager
from functools import partial
from types import CodeType, FunctionType, MethodType, ModuleType

DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")  # a string constant that may name a module
CHAINED = ("LOAD_ATTR", "LOAD_METHOD")  # attribute lookups (LOAD_METHOD before Python 3.12)
_MISSING = object()
GRADING = False  # set by the grader's process (`minibert.grading.check`): the student's code runs elsewhere
FORBIDDEN: contextvars.ContextVar[tuple] = contextvars.ContextVar("forbidden", default=())  # noted while grading


def uses(fn, forbidden) -> str | None:
    """What of ``forbidden`` ``fn``, or a function or class of the notebook that it uses, refers to, or None.

    ``forbidden`` holds dotted names: a module or package (``"minibert.tokenizer"``, ``"transformers"``)
    forbids everything defined in it, a class its methods too, a function itself
    (``"torch.nn.functional.scaled_dot_product_attention"``); objects may be given as they are.
    """
    names = tuple(f for f in forbidden if isinstance(f, str))
    objects = {id(o): (o, name) for o, name in [(f, _full_name(f)) for f in forbidden if not isinstance(f, str)] +
               [(_find(n, importing=False)[2], n) for n in names] if o is not None}
    inner = inspect.unwrap(fn)  # the notebook's globals, also behind a decorator, a partial or a method
    namespace = getattr(getattr(inner, "__func__", getattr(inner, "func", inner)), "__globals__", {})
    return _Checker(names, objects, namespace).visit(fn, None)


def assert_by_hand(fn, forbidden, message=""):
    """Fail if ``fn`` uses ``forbidden`` (`uses`); ``message`` is added to the error: what to do instead.

    When grading, ``fn`` is the student's (a `minibert.grading.remote.Remote`): what it uses is read in the
    student's process and becomes an integrity note beside the score, never a zero."""
    if _graded(fn):
        if found := type(fn)._uses(fn, [f for f in forbidden if isinstance(f, str)]):
            _note(fn, f"{found}, the library's answer to this exercise")
        return
    if found := uses(fn, forbidden):
        hint = f"\n{message}" if message else ""
        raise AssertionError(f"write it yourself: {found}, the library's answer to this exercise{hint}")


def assert_own_modules(model, message=""):
    """Fail if ``model`` holds a module that is neither torch's own (``torch.nn``) nor one of the notebook's: the
    library's BertLayer inside "your" BERT. When grading, the student's process names the types, and what it
    names is an integrity note beside the score."""
    foreign = [n for n in map(_type_name, model.modules()) if not n.startswith(("torch.nn.", "__main__."))]
    if not foreign:
        return
    found = f"{_type_name(model).rsplit('.', 1)[-1]} holds {foreign[0]}, not a module of torch's or of yours"
    if _graded(model):
        _note(model, found)
    else:
        raise AssertionError(f"write it yourself: {found}" + (f"\n{message}" if message else ""))


def _graded(obj) -> bool:
    """Whether ``obj`` is a student's object seen from the grader's process (a `minibert.grading.remote.Remote`)."""
    return GRADING and hasattr(type(obj), "_uses")


def _note(proxy, text: str) -> None:
    proxy._connection.notes.append(text[:300])  # an integrity note beside this test's score


def _type_name(obj) -> str:
    """``module.qualname`` of an object's class; of a student's object while grading, as its process names it."""
    return obj._type if _graded(obj) else f"{type(obj).__module__}.{type(obj).__qualname__}"


@contextmanager
def forbidden_calls(*targets, message=""):
    """Within the block, calling any of ``targets`` (dotted names of functions or methods; name
    ``Class.__init__`` to refuse building one) raises "write it yourself: <name> is the library's answer".

    The attribute is replaced where it is defined, and a plain Python function's code is swapped as
    well, so that an alias taken before the block (``from m import f as g``) refuses too. Everything
    is restored on leaving the block, also when it raises.

    When grading, the student's code runs in another process: there, calls of ``targets`` made by the
    student's functions called inside the block are noted (`recording_calls`), and nothing is refused.
    """
    if GRADING:
        token = FORBIDDEN.set(FORBIDDEN.get() + tuple(targets))
        try:
            yield
        finally:
            FORBIDDEN.reset(token)
        return
    with _replaced(targets, lambda target, current: _refusal(target, message), swap_code=True):
        yield


@contextmanager
def recording_calls(targets):
    """Within the block, a call of any of ``targets`` still runs, and is noted: the list yielded collects
    "called <name>, the library's answer" once per target (the student's side of `forbidden_calls`)."""
    notes = []

    def recorder(target, current):
        def record(*args, **kwargs):
            note = f"called {target}, the library's answer"
            if note not in notes:
                notes.append(note)
            return current(*args, **kwargs)
        return record

    with _replaced([t for t in targets if isinstance(t, str)][:100], recorder, swap_code=False, strict=False):
        yield notes


def _refusal(target, message):
    text = f"write it yourself: {target} is the library's answer" + (f"\n{message}" if message else "")
    namespace = {}  # a refusal that needs no variable but builtins, so its code fits in any function
    exec(f"def refuse(*args, **kwargs):\n    raise AssertionError({text!r})", namespace)
    return namespace["refuse"]


@contextmanager
def _replaced(targets, replacement, swap_code: bool, strict: bool = True):
    undo = []  # undone in reverse, so that a target named twice still ends as it began
    try:
        for target in targets:
            owner, attribute, current = _find(target, importing=True)
            if owner is None:
                if strict:
                    raise ValueError(f"cannot find {target}")
                continue
            new = replacement(target, current)
            function = inspect.unwrap(getattr(current, "__func__", current))
            if swap_code and isinstance(function, FunctionType) and not function.__code__.co_freevars:
                undo.append((setattr, function, "__code__", function.__code__))
                function.__code__ = new.__code__
            original = vars(owner).get(attribute, _MISSING)
            undo.append((delattr, owner, attribute) if original is _MISSING else (setattr, owner, attribute, original))
            setattr(owner, attribute, new)
        yield
    finally:
        for action, *args in reversed(undo):
            action(*args)


def _find(dotted: str, importing: bool):
    """(owner, attribute name, object) for a dotted name, or Nones. Without ``importing``, only modules
    imported already are looked in: the student cannot hold an object of a module nobody imported
    (and an import in their code is caught by its name)."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        prefix = ".".join(parts[:split])
        try:
            module = importlib.import_module(prefix) if importing else sys.modules[prefix]
        except (ImportError, KeyError):
            continue
        owner, obj = None, module
        for part in parts[split:]:
            owner, obj = obj, getattr(obj, part, _MISSING)
        if owner is not None and obj is not _MISSING:
            return owner, parts[-1], obj
        if not importing:
            return None, None, module if split == len(parts) else None
    return None, None, None


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # not assigned yet
        return None


def _full_name(obj) -> str:
    """``module.qualname`` of a module, class or function, or of an object's class."""
    if isinstance(obj, ModuleType):
        return obj.__name__
    if not isinstance(getattr(obj, "__qualname__", None), str):
        obj = type(obj)
    module = getattr(obj, "__module__", None)
    return f"{module if isinstance(module, str) else type(obj).__module__}.{obj.__qualname__}"


class _Checker:
    def __init__(self, names, objects, namespace):
        self.names, self.objects, self.namespace = names, objects, namespace
        self.seen = {}

    def banned(self, name: str) -> bool:
        return any(name == n or name.startswith(n + ".") for n in self.names)

    def first(self, objects, where):
        return next(filter(None, (self.visit(o, where) for o in objects)), None)

    def visit(self, obj, where: str | None) -> str | None:
        """What ``obj``, used by ``where`` (a path of notebook functions), uses that is forbidden, or None."""
        if id(obj) in self.seen:
            return None
        self.seen[id(obj)] = obj  # kept alive, so that its id is not reused by another object
        label = self.objects[id(obj)][1] if id(obj) in self.objects else _full_name(obj)
        if id(obj) in self.objects or self.banned(label):
            return f"{where} uses {label}" if where else f"{getattr(obj, '__name__', 'it')} is {label}"
        linked = [] if isinstance(obj, ModuleType) else [getattr(obj, "__wrapped__", None)]  # decorators
        if isinstance(obj, partial):
            linked += [obj.func, *obj.args, *obj.keywords.values()]
        elif isinstance(obj, MethodType) or type(obj).__name__ == "builtin_function_or_method":
            linked += [getattr(obj, "__func__", None), obj.__self__]
        if found := self.first([o for o in linked if o is not None and not isinstance(o, ModuleType)], where):
            return found
        home, inside = obj if isinstance(obj, type) else type(obj), f"{where} → " if where else ""
        if isinstance(obj, FunctionType) and obj.__globals__ is self.namespace:  # a function of the notebook
            used = [*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values(),
                    *map(_contents, obj.__closure__ or ())]
            return self.code(obj.__code__, inside + obj.__name__) or self.first(used, inside + obj.__name__)
        if home.__module__ == self.namespace.get("__name__", "__main__"):  # a class of the notebook, or its object
            members = [inspect.unwrap(getattr(m, "__func__", getattr(m, "fget", m))) for m in vars(home).values()]
            return self.first([*home.__mro__[1:], *members], inside + home.__name__)
        return None

    def code(self, code: CodeType, where: str) -> str | None:
        """Follow global names and their attribute chains (``F.gelu``), imports, and module names
        written as strings; nested functions, lambdas and classes are read too."""
        instructions = list(dis.get_instructions(code))
        imported, chain = [], _MISSING
        for ins in instructions:
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                chain = self.namespace.get(ins.argval, getattr(builtins, ins.argval, _MISSING))
            elif ins.opname in CHAINED and isinstance(chain, (ModuleType, type)):
                chain = getattr(chain, ins.argval, _MISSING)
            else:
                chain = _MISSING
            if chain is not _MISSING and (found := self.visit(chain, where)):
                return found
            if ins.opname == "IMPORT_NAME":
                imported.append(module := ins.argval)
            elif ins.opname == "IMPORT_FROM":
                imported.append(f"{module}.{ins.argval}")
            elif ins.opname == "LOAD_CONST" and isinstance(ins.argval, str) and DOTTED.fullmatch(ins.argval):
                imported.append(ins.argval)  # importlib.import_module("..."), __import__("...")
        if banned := [m for m in imported if self.banned(m)]:
            return f"{where} imports {banned[0]}"
        attributes = sorted({i.argval for i in instructions if i.opname in CHAINED})
        # `import torch.nn.functional as G` in the body: G is a local, so look its attributes up in the module
        modules = [m for m in (_find(i, importing=False)[2] for i in imported) if isinstance(m, ModuleType)]
        found = self.first([getattr(m, a) for m in modules for a in attributes if hasattr(m, a)], where)
        nested = (self.code(c, where) for c in code.co_consts if isinstance(c, CodeType))
        return found or next(filter(None, nested), None)
