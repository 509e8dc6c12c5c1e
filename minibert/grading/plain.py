"""Step 3, hand back data (the wire): what crosses from a student's process to the grader is plain data.

JSON for numbers, strings, lists and dicts, safetensors for arrays and tensors, both read by loaders that build
nothing but those types; anything else stays on the student's side as a *handle* (`minibert.grading.remote`).
The other way, the grader sends a call's arguments pickled with cloudpickle: trusted data going to the
untrusted side, where unpickling harms nothing that side could not do already.
A message is a JSON header and binary blobs: ``count (4 bytes) | length (8) | bytes | length | bytes ...``.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import json
import keyword
import math
import struct
import sys

MAX_MESSAGE = 2**30  # bytes in one message: BERT-base's state dict (440 MB) with room to spare, and a bound
# bytes of a message's JSON header: parsed into Python objects before any other bound can be checked, at up to
# ~25 times its size in memory, so it gets a bound of its own. Bulk data (tensors, arrays, bytes) travels in blobs.
MAX_HEADER = 32 * 2**20
MAX_DEPTH = 64  # nesting of a value: deeper is not a test's answer, and would exhaust the reader
MAX_ITEMS = 5_000_000  # numbers, strings and containers in one value (tensors count as one)


class WireError(RuntimeError):
    """The other side sent something that is not a message of this protocol. ``whole``: the message was read to
    its end (refused, not cut off), so the next one can be read; otherwise the stream is out of step."""

    def __init__(self, message: str, whole: bool = False):
        super().__init__(message)
        self.whole = whole


HANDLES: dict[int, object] = {}  # on the student's side: the objects the grader holds proxies of, by handle


def handle(number: int):
    """The object behind a handle: what a proxy the grader sends back unpickles to, on the student's side."""
    return HANDLES[number]


# --- framing ---------------------------------------------------------------------------------------------

def send(stream, header: dict, blobs: list[bytes] = ()) -> None:
    parts = [json.dumps(header).encode(), *blobs]
    stream.write(struct.pack("<I", len(parts)))
    for part in parts:
        stream.write(struct.pack("<Q", len(part)))
        stream.write(part)
    stream.flush()


def _read_exactly(stream, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(min(left, 1 << 24))
        if not chunk:
            raise EOFError("the other process closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _skip(stream, n: int) -> None:
    while n:
        n -= len(_read_exactly(stream, min(n, 1 << 24)))


def receive(stream) -> tuple[dict, list[bytes]]:
    (count,) = struct.unpack("<I", _read_exactly(stream, 4))
    if not 1 <= count <= 1_000_000:
        raise WireError(f"a message of {count} parts")
    parts, total, refused = [], 0, None
    for i in range(count):
        (length,) = struct.unpack("<Q", _read_exactly(stream, 8))
        total += length
        if total > MAX_MESSAGE:
            raise WireError(f"a message of more than {MAX_MESSAGE:,} bytes")
        if i == 0 and length > MAX_HEADER:  # read past, never parsed: the stream stays in step for the next message
            refused = (f"a value too large to check (its plain part is {length:,} bytes, more than {MAX_HEADER:,}: "
                       "millions of numbers or strings; a tensor or an array of them crosses)")
        if refused:
            _skip(stream, length)
        else:
            parts.append(_read_exactly(stream, length))
    if refused:
        raise WireError(refused, whole=True)
    try:
        header = json.loads(parts[0])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise WireError(f"a header that is not JSON ({e})", whole=True) from None
    if not isinstance(header, dict):
        raise WireError("a header that is not a JSON object", whole=True)
    return header, parts[1:]


# --- values: encoded on the student's side --------------------------------------------------------------

def encode(value, blobs: list[bytes], handle_of) -> object:
    """``value`` as JSON-able plain data, tensors and arrays appended to ``blobs`` as safetensors; anything
    else becomes ``{"t": "handle", ...}`` through ``handle_of(obj) -> dict``. torch and numpy are looked at
    only where the student's code imported them (no value can be theirs otherwise)."""
    torch, np = sys.modules.get("torch"), sys.modules.get("numpy")

    def walk(v, depth):
        if depth > MAX_DEPTH:
            raise ValueError(f"a value nested more than {MAX_DEPTH} deep")
        if v is None or type(v) in (bool, str):
            return {"t": "v", "v": v}
        if type(v) is int:
            return {"t": "v", "v": v} if abs(v) < 2**63 else {"t": "bigint", "v": str(v)}
        if type(v) is float:
            return {"t": "v", "v": v} if math.isfinite(v) else {"t": "float", "v": repr(v)}
        if type(v) in (list, tuple, set, frozenset):
            return {"t": type(v).__name__, "v": [walk(x, depth + 1) for x in v]}
        if type(v) in (dict, collections.OrderedDict, collections.defaultdict, collections.Counter):
            return {"t": "dict", "k": [walk(k, depth + 1) for k in v], "v": [walk(x, depth + 1) for x in v.values()]}
        if type(v) is bytes:
            blobs.append(v)
            return {"t": "bytes", "i": len(blobs) - 1}
        if torch is not None and type(v) in (torch.Tensor, torch.nn.Parameter):
            from safetensors.torch import save
            tensors = {"t": v.detach().cpu().contiguous().clone()}
            if v.grad is not None:  # a parameter's gradient comes with it: a test checks that backward reached it
                tensors["grad"] = v.grad.detach().cpu().contiguous().clone()
            blobs.append(save(tensors))
            return {"t": "tensor", "i": len(blobs) - 1}
        if np is not None and type(v) is np.ndarray and v.dtype.kind in "biuf":
            from safetensors.numpy import save
            blobs.append(save({"t": np.ascontiguousarray(v)}))
            return {"t": "ndarray", "i": len(blobs) - 1}
        if np is not None and isinstance(v, np.generic) and type(v).__module__ == "numpy" and v.dtype.kind in "biufUS":
            return walk(v.item(), depth)  # a number, or a string (np.str_) or bytes taken from an array
        if torch is not None and type(v) is torch.Size:
            return {"t": "tuple", "v": [walk(int(x), depth + 1) for x in v]}
        if torch is not None and type(v) is torch.dtype:
            return {"t": "dtype", "v": str(v).removeprefix("torch.")}
        if isinstance(v, tuple) and hasattr(type(v), "_fields") and type(v).__module__ in ("torch.return_types",):
            return {"t": "record", "type": type(v).__name__, "k": list(type(v)._fields),
                    "v": [walk(x, depth + 1) for x in v], "tuple": True}
        if _is_model_output(v):  # transformers' and minibert's outputs: a dict with attribute access
            return {"t": "record", "type": type(v).__name__, "k": list(v.keys()),
                    "v": [walk(x, depth + 1) for x in v.values()], "tuple": False}
        if _is_namedtuple(v):  # the student's own record type: its fields, rebuilt as a namedtuple on the grader's side
            return {"t": "namedtuple", "type": type(v).__name__, "k": list(type(v)._fields),
                    "v": [walk(x, depth + 1) for x in tuple.__iter__(v)]}
        for base in (str, int, float, bytes):  # a str or int Enum member, np.str_...: the value a test compares
            if isinstance(v, base):
                return walk(base(v) if base is not str else str.__str__(v), depth)
        return handle_of(v)

    return walk(value, 0)


def _is_namedtuple(v) -> bool:
    fields = getattr(type(v), "_fields", None)
    return (isinstance(v, tuple) and type(fields) is tuple and len(fields) == tuple.__len__(v) <= 1000
            and all(type(f) is str for f in fields))


def _is_model_output(v) -> bool:
    module = type(v).__module__ or ""
    if not (module.startswith("transformers.") or module.startswith("minibert.")):
        return False
    return dataclasses.is_dataclass(v) and not isinstance(v, type)


# --- values: decoded on the grader's side ---------------------------------------------------------------

class Record(dict):
    """A model output that came back as data: its fields by key (``out["logits"]``) or by attribute
    (``out.logits``), and by position when it came from a tuple (``values, indices = x.max(0)``)."""

    def __init__(self, type_name: str, keys, values, as_tuple: bool):
        super().__init__(zip(keys, values))
        self._type, self._tuple = type_name, as_tuple

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{self._type} has no field {name!r}") from None

    def __getitem__(self, key):
        if isinstance(key, (int, slice)):
            return list(self.values())[key] if self._tuple else [v for v in self.values() if v is not None][key]
        return super().__getitem__(key)

    def __iter__(self):
        return iter(self.values()) if self._tuple else super().__iter__()

    def to_tuple(self):
        return tuple(v for v in self.values() if v is not None)

    def __repr__(self):
        return f"{self._type}({', '.join(f'{k}={v!r}' for k, v in self.items())})"


def decode(data, blobs: list[bytes], make_handle):
    """The plain value ``data`` stands for; ``make_handle(dict)`` turns a handle into the grader's proxy.
    Anything that is not of this format raises WireError: it was not made by `encode`."""
    count = [0]

    def blob(i):
        if type(i) is not int or not 0 <= i < len(blobs):
            raise WireError(f"no blob {i!r}")
        return blobs[i]

    def walk(d, depth):
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > MAX_ITEMS:
            raise WireError("a value too deep or too large")
        if not isinstance(d, dict) or not isinstance(d.get("t"), str):
            raise WireError(f"not a value: {str(d)[:80]}")
        t, v = d["t"], d.get("v")
        if t == "v":
            if v is None or type(v) in (bool, int, float, str):
                return v
            raise WireError("a plain value that is not one")
        if t in ("list", "tuple", "set", "frozenset"):
            if type(v) is not list:
                raise WireError(f"a {t} without items")
            items = [walk(x, depth + 1) for x in v]
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[t](items)
        if t == "dict":
            keys, values = d.get("k"), v
            if type(keys) is not list or type(values) is not list or len(keys) != len(values):
                raise WireError("a dict whose keys and values do not pair")
            return {walk(k, depth + 1): walk(x, depth + 1) for k, x in zip(keys, values)}
        if t == "bigint" and type(v) is str and v.lstrip("-").isdigit() and len(v) < 10_000:
            return int(v)
        if t == "float" and v in ("nan", "inf", "-inf"):
            return float(v)
        if t == "bytes":
            return bytes(blob(d.get("i")))
        if t == "tensor":
            from safetensors.torch import load
            try:
                tensors = load(blob(d.get("i")))
                tensor = tensors["t"]
                if "grad" in tensors and tensors["grad"].shape == tensor.shape and tensor.is_floating_point():
                    tensor.grad = tensors["grad"].to(tensor.dtype)
                return tensor
            except Exception as e:
                raise WireError(f"a tensor that safetensors cannot read ({e})") from None
        if t == "ndarray":
            from safetensors.numpy import load
            try:
                return load(blob(d.get("i")))["t"]
            except Exception as e:
                raise WireError(f"an array that safetensors cannot read ({e})") from None
        if t == "dtype" and type(v) is str:
            import torch
            if isinstance(getattr(torch, v, None), torch.dtype):
                return getattr(torch, v)
        if t == "record":
            keys = d.get("k")
            if type(keys) is not list or type(v) is not list or len(keys) != len(v) or \
                    not all(type(k) is str for k in keys) or type(d.get("type")) is not str:
                raise WireError("a record whose fields do not pair")
            return Record(d["type"][:100], keys, [walk(x, depth + 1) for x in v], d.get("tuple") is True)
        if t == "namedtuple":
            keys = d.get("k")
            if type(keys) is not list or type(v) is not list or len(keys) != len(v) or len(keys) > 1000 or \
                    not all(type(k) is str and len(k) < 200 for k in keys) or type(d.get("type")) is not str:
                raise WireError("a namedtuple whose fields do not pair")
            return _namedtuple_class(d["type"][:100], tuple(keys))(*[walk(x, depth + 1) for x in v])
        if t == "handle":
            if type(d.get("id")) is not int or type(d.get("type")) is not str:
                raise WireError("a handle without an id")
            return make_handle(d)
        raise WireError(f"a value of unknown kind {t!r}")

    return walk(data, 0)


@functools.lru_cache(maxsize=256)
def _namedtuple_class(name: str, fields: tuple[str, ...]):
    """A namedtuple class of the student's type name and fields (names that are not identifiers renamed, as
    ``collections.namedtuple(rename=True)`` does): equal to any tuple of the same values, fields by attribute."""
    name = name if name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_") else "Record"
    return collections.namedtuple(name, fields, rename=True)


def pickled(obj) -> bytes:
    """``obj`` pickled for the student's side: functions and classes of the test by value (cloudpickle);
    proxies of the student's own objects pickle as references to them (`minibert.grading.remote.Remote`)."""
    import cloudpickle

    return cloudpickle.dumps(obj, protocol=5)
