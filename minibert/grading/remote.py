"""Step 3, hand back data (the grader's side): the student's names as values and `Remote` proxies.

A proxy forwards what a test does with a student's object (attribute, call, index, iteration) and gets data
back; it equals only itself and has no truth value, order, arithmetic or conversion, so an object "equal to
everything" stays on the student's side. A call works on pickled copies of its arguments, so it cannot change
what the test compares against, except where the change is the answer (`_copy_back`); it starts from the
test's global random states, and a differentiable result can be back-propagated through (`_differentiable`).
"""
from __future__ import annotations

import builtins
import subprocess
import sys
import time
from collections import OrderedDict

from ..course import integrity
from . import plain


class StudentTimeout(Exception):
    """The student's code ran past its time: the process was stopped."""


class StudentProcessError(Exception):
    """The student's process ended, or sent something the grader cannot read."""


class RemoteError(Exception):
    """The student's code raised an exception whose class is not one of Python's own."""


class Connection:
    """The pipes to one student process, and what the grader noticed while talking to it."""

    def __init__(self, process: subprocess.Popen, requests, answers, timeout: int, exchange=None):
        self.process, self.requests, self.answers, self.timeout = process, requests, answers, timeout
        self.exchange = exchange
        self.notes: list[str] = []
        self.sent: OrderedDict = OrderedDict()  # digests of the arguments the student's side holds
        self.spent = 0.0  # seconds the calls of the current test have taken together (`check.run_test` resets it)

    def ask(self, header: dict, blobs=()) -> tuple[dict, list[bytes]]:
        """One request and its answer. A test's calls share one --timeout between them: many slow calls, each
        within the limit, would otherwise hold the grader for calls × timeout."""
        self.share()
        if self.process.poll() is not None:
            raise StudentProcessError(f"the notebook's process had ended (exit status {self.process.returncode})")
        if self.spent >= self.timeout:
            raise StudentTimeout(f"this test's calls took {self.spent:.0f} s together, more than the grader's "
                                 f"--timeout ({self.timeout} s)")
        started = time.monotonic()
        try:
            self.send(header, list(blobs))
            answer, blobs = self.receive(self.timeout - self.spent + 10)
        except plain.WireError as e:
            if e.whole:  # one answer refused, read to its end: the process goes on
                raise RemoteError(str(e)) from None
            self.process.kill()  # out of step with the pipe: what is read next would be the middle of a message
            raise StudentProcessError(f"the notebook's process sent what the grader cannot read ({e})") from None
        except (BrokenPipeError, EOFError) as e:
            raise StudentProcessError(f"the notebook's process stopped answering ({e})") from None
        finally:
            self.spent += time.monotonic() - started
        if answer.get("timeout"):
            raise StudentTimeout(f"did not finish in {self.timeout} s (the grader's --timeout): it was stopped")
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            name, message = str(error.get("type", "Exception"))[:100], str(error.get("message", ""))[:2000]
            cls = getattr(builtins, name, None)
            if error.get("builtin") and isinstance(cls, type) and issubclass(cls, Exception) and \
                    cls.__module__ == "builtins" and not issubclass(cls, (StopIteration, StopAsyncIteration)):
                raise cls(message)  # the test may expect a ValueError: give it one of Python's own
            raise RemoteError(f"{name}: {message}")
        return answer, blobs

    def send(self, header: dict, blobs=()) -> None:
        """A request, written within the time a call has: a process that stops reading its requests (a full pipe)
        would otherwise hold the grader forever. Past that the process is ended and StudentTimeout raised."""
        try:
            _within(self.timeout + 10, plain.send, self.requests, header, list(blobs))
        except StudentTimeout:
            self.process.kill()
            raise StudentTimeout(f"stopped reading the grader's requests for {self.timeout + 10} s: it was "
                                 "stopped") from None

    def share(self) -> None:
        """Let the student's process read what the test wrote in its temporary folder (`check.main`): a test's
        ``tempfile`` folders are made private, and the student's loader is called on them."""
        import os

        if self.exchange is None:
            return
        for here, folders, files in os.walk(self.exchange):
            for name in folders:
                os.chmod(os.path.join(here, name), 0o755)
            for name in files:
                os.chmod(os.path.join(here, name), 0o644)

    def receive(self, seconds: float) -> tuple[dict, list[bytes]]:
        """The next message, waiting at most ``seconds``; past that the process is ended (its alarm was caught
        or blocked) and StudentTimeout raised."""
        import select

        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.process.kill()
                raise StudentTimeout(f"did not finish in {self.timeout} s (the grader's --timeout): it was stopped")
            ready, _, _ = select.select([self.answers], [], [], min(left, 1.0))
            if ready:  # the rest of the message must follow in time too: a sender that stalls is cut off
                return _within(max(left, 1.0), plain.receive, self.answers)
            if self.process.poll() is not None:
                raise EOFError(f"exit status {self.process.returncode}")

    def value(self, header: dict, blobs: list[bytes]):
        return plain.decode(header.get("value"), blobs,
                            lambda h: Remote(self, h["id"], h["type"][:200], (h.get("name") or "")[:200]))

    def get(self, name: str):
        """The student's ``name``: a value or a Remote; NameError if the notebook does not define it."""
        answer, blobs = self.ask({"op": "get", "name": name})
        if answer.get("missing"):
            raise NameError(f"name {name!r} is not defined")
        return self.value(answer, blobs)

    def call_arguments(self, args: tuple, kwargs: dict) -> tuple[dict, list[bytes]]:
        """The call's arguments pickled together (so an optimizer still holds the very parameters of the model
        beside it); bytes the student's side already has (a vocabulary passed on every call) are named by their
        digest instead of sent again. Each call unpickles a fresh copy, as each test call builds its own."""
        import hashlib

        blob = plain.pickled((args, kwargs))
        digest = hashlib.blake2b(blob, digest_size=16).hexdigest()
        blobs = [] if remember(self.sent, digest) else [blob]
        header = {"arguments": digest, "sent": bool(blobs), "generators": len(blobs)}
        return header, [*blobs, plain.pickled(global_generators())]


def global_generators() -> tuple:
    """The grader's global random states (Python's, and numpy's and torch's where a test imported them), which
    a call of the student's code starts from (`minibert.grading.runner.use_global_generators`)."""
    import random

    numpy, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    return (random.getstate(), numpy.random.get_state() if numpy else None,
            torch.get_rng_state() if torch else None)


HELD = 32  # calls' arguments each side keeps: both forget the same ones, in the same order


def remember(held: OrderedDict, digest: str, value=True) -> bool:
    """Note ``digest`` as held (the most recent); whether it was held already. Past `HELD`, the oldest goes."""
    known = digest in held
    if known:
        held.move_to_end(digest)
    else:
        held[digest] = value
        while len(held) > HELD:
            held.popitem(last=False)
    return known


def _within(seconds: float, fn, *args):
    """``fn(*args)``, ended by StudentTimeout after ``seconds`` (an alarm: this process's only thread waits)."""
    import signal

    def expired(signum, frame):
        raise StudentTimeout("stopped sending in the middle of a message")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _forbid(name):
    def refuse(self, *args, **kwargs):
        raise TypeError(f"{self!r} is an object of the student's: {name} of it cannot be checked here; compare "
                        "data that it returns (a number, a tensor, a list)")
    return refuse


class Remote:
    """A proxy of an object in the student's process (module docstring)."""

    __slots__ = ("_connection", "_id", "_type", "_name")

    def __init__(self, connection: Connection, id_: int, type_name: str, name: str):
        object.__setattr__(self, "_connection", connection)
        object.__setattr__(self, "_id", id_)
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_name", name)

    def _ask(self, op: str, *value, **fields):
        blobs = [plain.pickled(value[0])] if value else []
        return self._connection.ask({"op": op, "handle": self._id, **fields}, blobs)

    def __reduce__(self):  # sent back to the student's side, a proxy is the object it stands for there
        return plain.handle, (self._id,)

    def __repr__(self):
        what = self._name or self._type.rsplit(".", 1)[-1]
        return f"<the student's {what}>"

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):  # numpy's and torch's protocol probes: none here
            raise AttributeError(name)
        answer, blobs = self._ask("getattr", name=name)
        return self._connection.value(answer, blobs)

    def __setattr__(self, name, value):
        self._ask("setattr", value, name=name)

    def __call__(self, *args, **kwargs):
        connection = self._connection
        forbidden = integrity.FORBIDDEN.get()
        header, out = connection.call_arguments(args, kwargs)
        answer, blobs = connection.ask({"op": "call", "handle": self._id, "forbidden": list(forbidden), **header}, out)
        for note in answer.get("notes", [])[:20]:
            if isinstance(note, str):
                connection.notes.append(note[:300])
        both = connection.value(answer, blobs)  # (the result, the arguments the call changed)
        if type(both) is not tuple or len(both) != 2:
            raise StudentProcessError("the notebook's process answered a call with something else")
        value, changed = both
        _copy_back(args, kwargs, changed)
        if type(answer.get("graph")) is int and type(value).__name__ == "Tensor":
            value = _differentiable(value, connection, answer["graph"], [*args, *kwargs.values()])
        return value

    def __getitem__(self, key):
        answer, blobs = self._ask("getitem", key)
        return self._connection.value(answer, blobs)

    def __len__(self):
        answer, blobs = self._ask("len")
        n = self._connection.value(answer, blobs)
        if type(n) is not int or n < 0:
            raise TypeError(f"len() of {self!r} is not a count")
        return n

    def __iter__(self):
        answer, blobs = self._ask("iter")
        iterator = self._connection.value(answer, blobs)
        if type(iterator) is not Remote:
            yield from iterator
            return
        while True:
            answer, blobs = iterator._ask("next")
            if answer.get("stop"):
                return
            yield self._connection.value(answer, blobs)

    def __contains__(self, item):
        answer, blobs = self._ask("contains", item)
        return self._connection.value(answer, blobs) is True

    def __instancecheck__(self, instance):
        if type(instance) is not Remote:
            return False  # a value of the grader's is no object of a student's class
        answer, blobs = instance._ask("isinstance", of=self._id)
        return self._connection.value(answer, blobs) is True

    def _uses(self, names) -> str | None:
        """What of ``names`` this object's code refers to, as its process reads it: an integrity note's text."""
        answer, blobs = self._ask("uses", names=list(names))
        found = self._connection.value(answer, blobs)
        return found[:300] if isinstance(found, str) else None

    # equal only to itself (object's identity); everything else a check might lean on is refused
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__
    __bool__ = _forbid("the truth")
    for _name in ("lt", "le", "gt", "ge", "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv",
                  "floordiv", "mod", "pow", "neg", "pos", "abs", "invert", "and", "or", "xor", "matmul", "rmatmul",
                  "float", "int", "index", "complex", "round"):
        locals()[f"__{_name}__"] = _forbid(f"__{_name}__")
    del _name


def _differentiable(value, connection: Connection, graph: int, arguments: list):
    """A result of the student's code that autograd can go back through: its ``backward`` runs the student's
    graph in the student's process with the incoming gradient (filling the student's own parameters'
    ``.grad``), and brings back, as data, the gradients of the test's tensors that were its arguments."""
    import torch

    inputs = [a for a in arguments if isinstance(a, torch.Tensor) and a.requires_grad]

    class Bridge(torch.autograd.Function):
        @staticmethod
        def forward(ctx, anchor, *tensors):
            return value.clone()

        @staticmethod
        def backward(ctx, grad_output):
            answer, blobs = connection.ask({"op": "backward", "graph": graph}, [plain.pickled(grad_output)])
            grads = connection.value(answer, blobs)
            grads = grads if isinstance(grads, list) and len(grads) == len(inputs) else [None] * len(inputs)
            return (None, *[g if isinstance(g, torch.Tensor) and g.shape == t.shape else None
                            for g, t in zip(grads, inputs)])

    anchor = torch.zeros((), requires_grad=True)  # so the result needs a gradient even if no argument does
    return Bridge.apply(anchor, *inputs)


def _copy_back(args, kwargs, changed: dict) -> None:
    """Apply to the grader's arguments what the call did to the student's copies of them, where that is the
    answer: a random generator the test handed over advances, a model is left in the training or evaluation
    modes the call left it in, and a training step (a call given an optimizer) updates the test's model and
    optimizer. Nothing else: a call cannot change what the test compares against afterwards (zero the weights
    of the layer it was given, add pieces to the vocabulary)."""
    torch = sys.modules.get("torch")
    if not isinstance(changed, dict):
        return
    arguments = {**{str(i): a for i, a in enumerate(args)}, **kwargs}
    training = torch is not None and any(isinstance(a, torch.optim.Optimizer) for a in arguments.values())
    for key, state in changed.items():
        original = arguments.get(key)
        if not isinstance(state, dict) or original is None:
            continue
        if "generator" in state:
            _set_generator(original, state["generator"])
        elif torch is not None and isinstance(original, torch.nn.Module):
            _set_modes(original, state.get("modes"))
            if training and isinstance(state.get("state"), dict):
                with torch.no_grad():
                    original.load_state_dict(state["state"], strict=False)
                grads = state.get("grads") if isinstance(state.get("grads"), dict) else {}
                for name, p in original.named_parameters():
                    grad = grads.get(name)
                    p.grad = grad.to(p.dtype) if isinstance(grad, torch.Tensor) and grad.shape == p.shape else None
        elif training and isinstance(original, torch.optim.Optimizer) and isinstance(state.get("optimizer"), dict):
            try:
                original.load_state_dict(state["optimizer"])
            except (ValueError, KeyError, TypeError):
                pass


def _set_modes(module, modes) -> None:
    """Training or evaluation mode, as the call left each of the test's module's submodules (a function that
    evaluates a model should put it back in training mode: a test checks that); modes that do not fit are ignored."""
    submodules = list(module.modules())
    if type(modes) is list and len(modes) == len(submodules) and all(type(m) is bool for m in modes):
        for submodule, mode in zip(submodules, modes):
            submodule.training = mode


def _set_generator(generator, state) -> None:
    """Advance the test's generator as the student's call advanced its copy (a state that does not fit is
    ignored: the generator stays as it was)."""
    import random

    np, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    try:
        if isinstance(generator, random.Random):
            generator.setstate((state[0], tuple(state[1]), state[2]))
        elif np is not None and isinstance(generator, np.random.Generator):
            generator.bit_generator.state = state
        elif np is not None and isinstance(generator, np.random.RandomState):
            generator.set_state(state)
        elif torch is not None and isinstance(generator, torch.Generator) and isinstance(state, torch.Tensor):
            generator.set_state(state)
    except (TypeError, ValueError, KeyError, IndexError, RuntimeError):
        pass
