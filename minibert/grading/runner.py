"""Step 2, run walled (inside): the student's process runs a submission's cells and answers as data.

Started by `minibert.grading.walls` with two pipes (`minibert.grading.plain`). The first request carries the
cells in order: code to run and, where a test cell stood, a *stop*. At a stop it answers the grader until
told to go on:

    get NAME                 the value of a name in the notebook (plain data, or a handle)
    getattr / getitem / len / iter / next / contains / isinstance / setattr   on a handle
    call HANDLE ARGS         call it on pickled arguments; generators, and a training step's model and
                             optimizer, go back as the call left them
    uses HANDLE NAMES        which of NAMES (the library's answers) the object's code refers to: a note
    backward GRAPH           back-propagate through a differentiable result of a call
    continue                 run on to the next stop

No test code runs here, and the grader reads what comes from here as untrusted data. Each cell and each
answer runs under an alarm (``timeout``); the grader also watches the clock.
"""
from __future__ import annotations

import os
import pickle
import signal
import sys
import traceback
from collections import OrderedDict

from . import plain


def new_shell():
    """An IPython shell without a terminal or a kernel: magics work as in Jupyter (``%time``, ``%%capture``);
    ``%matplotlib inline`` keeps Agg and each cell's figures are closed undrawn: nobody looks while grading."""
    from IPython.core.interactiveshell import InteractiveShell

    class Shell(InteractiveShell):
        enable_gui = enable_matplotlib = lambda self, gui=None: ("agg", "agg")

    shell = Shell.instance(colors="NoColor")
    shell.events.register("post_run_cell", lambda result: "matplotlib.pyplot" in sys.modules and
                          sys.modules["matplotlib.pyplot"].close("all"))
    return shell


class Stopped(BaseException):
    """The cell or call ran past its time: raised by the alarm."""


def _alarm(signum, frame):
    raise Stopped()


class Runner:
    def __init__(self, requests, answers, timeout: int):
        self.requests, self.answers, self.timeout = requests, answers, timeout
        self.handles = plain.HANDLES
        self.graphs: dict[int, tuple] = {}  # differentiable results the grader may call backward on
        self.arguments: OrderedDict = OrderedDict()  # the calls' pickled arguments by digest (`remote.remember`)
        self.ids: dict[int, int] = {}  # id(obj) -> handle, so one object keeps one handle
        self.shell = new_shell()
        self.namespace = self.shell.user_ns

    # -- talking ------------------------------------------------------------------------------------------
    def tell(self, header: dict, blobs=()) -> None:
        plain.send(self.answers, header, list(blobs))

    def handle_of(self, obj) -> dict:
        key = id(obj)
        if key not in self.ids:
            self.ids[key] = len(self.handles) + 1
            self.handles[self.ids[key]] = obj
        kind = type(obj)
        name = getattr(obj, "__qualname__", None) if callable(obj) else None
        return {"t": "handle", "id": self.ids[key], "type": f"{kind.__module__}.{kind.__qualname__}",
                "name": name if isinstance(name, str) else None}

    def value(self, obj) -> tuple[dict, list[bytes]]:
        blobs: list[bytes] = []
        return plain.encode(obj, blobs, self.handle_of), blobs

    # -- running the notebook -----------------------------------------------------------------------------
    def timed(self, fn, *args):
        signal.setitimer(signal.ITIMER_REAL, self.timeout)
        try:
            return fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def run_cell(self, index: int, source: str) -> None:
        self.tell({"event": "cell", "index": index})
        try:
            result = self.timed(lambda: self.shell.run_cell(source, store_history=True))
            error = result.error_before_exec or result.error_in_exec
            if isinstance(error, Stopped):
                raise error
            if error is not None:
                self.tell({"event": "cell-error", "index": index,
                           "error": f"{type(error).__name__}: {error}"[:500]})
        except Stopped:
            self.tell({"event": "cell-timeout", "index": index})

    def serve(self, grade_id: str) -> None:
        self.tell({"event": "stop", "grade_id": grade_id})
        while True:
            header, blobs = plain.receive(self.requests)
            if header.get("op") == "continue":
                return
            try:
                answer, out_blobs = self.timed(self.answer, header, blobs)
            except Stopped:
                answer, out_blobs = {"timeout": True}, []
            except BaseException as e:  # the student's code raised: the grader learns its type and message
                answer, out_blobs = {"error": {"type": type(e).__name__, "message": str(e)[:2000],
                                               "builtin": type(e).__module__ == "builtins"}}, []
            self.tell(answer, out_blobs)

    def answer(self, request: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
        op = request.get("op")
        if op == "get":
            if request["name"] not in self.namespace:
                return {"missing": True}, []
            value, out = self.value(self.namespace[request["name"]])
            return {"value": value}, out
        if op == "backward":  # the grader's backward through a result of ours: gradients of its arguments
            result, inputs = self.graphs.pop(request["graph"])
            result.backward(pickle.loads(blobs[0]))
            encoded, out = self.value([t.grad for t in inputs])
            return {"value": encoded}, out
        target = self.handles[request["handle"]]
        if op == "call":
            from .remote import remember
            remember(self.arguments, request["arguments"], blobs[0] if request.get("sent") else None)
            args, kwargs = pickle.loads(self.arguments[request["arguments"]])
            if "generators" in request:
                use_global_generators(pickle.loads(blobs[request["generators"]]))
            from ..course.integrity import recording_calls
            before = {k: _snapshot(v) for k, v in _arguments(args, kwargs)}
            with recording_calls(request.get("forbidden") or ()) as notes:
                result = target(*args, **kwargs)
            name = getattr(target, "__qualname__", "a call")  # an in-place change the test cannot see: a note
            notes += [f"{name} changed its argument {k} in place" for k, v in _arguments(args, kwargs)
                      if before[k] is not None and _snapshot(v) != before[k]]
            value, out = self.value((result, _changed(args, kwargs)))
            answer = {"value": value, "notes": notes}
            if getattr(result, "requires_grad", False) and type(result).__module__.startswith("torch"):
                # a differentiable result: its graph stays here, for the grader's backward (`remote.Bridge`)
                self.graphs[id(result)] = (result, [v for _, v in _arguments(args, kwargs)
                                                    if getattr(v, "requires_grad", False)])
                answer["graph"] = id(result)
            return answer, out
        if op == "getattr":
            value = getattr(target, request["name"])
        elif op == "setattr":
            setattr(target, request["name"], pickle.loads(blobs[0]))
            value = None
        elif op == "getitem":
            value = target[pickle.loads(blobs[0])]
        elif op == "len":
            value = len(target)
        elif op == "iter":
            value = iter(target)
        elif op == "next":
            try:
                value = next(target)
            except StopIteration:
                return {"stop": True}, []
        elif op == "contains":
            value = pickle.loads(blobs[0]) in target
        elif op == "isinstance":
            value = isinstance(target, self.handles[request["of"]])
        elif op == "uses":
            from ..course.integrity import uses
            value = uses(target, request["names"])
        else:
            raise ValueError(f"unknown request {op!r}")
        encoded, out = self.value(value)
        return {"value": encoded}, out


def _snapshot(value):
    """What an in-place change alters: a tensor's version counter, an array's bytes; None for anything else."""
    kind = type(value).__name__
    return value._version if kind == "Tensor" else value.tobytes() if kind == "ndarray" else None


def _arguments(args, kwargs):
    """A call's arguments by position or keyword."""
    return list(enumerate(args)) + list(kwargs.items())


def _generator_state(value):
    """The state of a random generator the grader passed (Python's, numpy's or torch's), as plain data; None
    for anything else. A test that hands its generator to the student's function sees it advance."""
    import random

    np, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    if isinstance(value, random.Random):
        return value.getstate()
    if np is not None and isinstance(value, np.random.Generator):
        return value.bit_generator.state
    if np is not None and isinstance(value, np.random.RandomState):
        return value.get_state(legacy=False)
    if torch is not None and isinstance(value, torch.Generator):
        return value.get_state()
    return None


def use_global_generators(states) -> None:
    """Start the call from the grader's global random states (Python's, numpy's, torch's CPU generator), as
    if it ran in the grader's process: dropout masks or an initialisation drawn after the test's
    ``torch.manual_seed`` are the ones the test expects. They are not sent back."""
    import random

    python, numpy_state, torch_state = states
    random.setstate(python)
    if numpy_state is not None:
        import numpy as np
        np.random.set_state(numpy_state)
    if torch_state is not None:
        import torch
        torch.set_rng_state(torch_state)


def _changed(args, kwargs) -> dict:
    """{position or keyword: state} of what a call may change that the grader takes back
    (`minibert.grading.remote._copy_back`): every random generator it was given, each model's training or
    evaluation modes, and in a training step (a call given an optimizer) its models' weights and its optimizers."""
    torch = sys.modules.get("torch")
    training = torch is not None and any(isinstance(v, torch.optim.Optimizer) for _, v in _arguments(args, kwargs))
    changed = {}
    for key, value in _arguments(args, kwargs):
        if (generator := _generator_state(value)) is not None:
            changed[str(key)] = {"generator": generator}
        elif torch is not None and isinstance(value, torch.nn.Module):  # its modes; in a training step its weights
            changed[str(key)] = {"modes": [m.training for m in value.modules()]}
            if training:
                changed[str(key)] |= {"state": dict(value.state_dict()), "grads": {
                    n: p.grad for n, p in value.named_parameters() if p.grad is not None}}
        elif training and isinstance(value, torch.optim.Optimizer):
            changed[str(key)] = {"optimizer": value.state_dict()}
    return changed


def main() -> int:
    requests = os.fdopen(int(os.environ.pop("MINIBERT_REQUESTS_FD")), "rb", buffering=0)
    answers = os.fdopen(int(os.environ.pop("MINIBERT_ANSWERS_FD")), "wb", buffering=1 << 20)
    signal.signal(signal.SIGALRM, _alarm)
    start, blobs = plain.receive(requests)
    os.environ.setdefault("MPLBACKEND", "Agg")
    for path, blob in zip(start.get("files", []), blobs):  # the submission's other files, into this folder
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "xb") as f:
            f.write(blob)
    runner = Runner(requests, answers, int(start["timeout"]))
    for index, cell in enumerate(start["cells"]):
        if cell.get("stop"):
            runner.serve(cell["stop"])
        elif index not in start.get("skip", ()):
            runner.run_cell(index, cell["source"])
    runner.tell({"event": "end"})
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except EOFError:  # the grader went away
        sys.exit(0)
    except BaseException:
        traceback.print_exc()
        sys.exit(1)
