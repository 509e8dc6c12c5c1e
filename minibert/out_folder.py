"""The one rule for every command that writes a folder (pretrain, finetune, export, slides).

``--out`` must be a new folder, an empty one, or one a minibert command wrote: never a folder of the
user's own, whatever name is typed (``.``, the project, a model being fine-tuned, ``""``). A folder
gets a mark when a command claims it, so that the same command may write there again (resume a run,
rebuild the slides). A folder written before marks existed is recognised by what it holds: only what
minibert commands write, and at least one thing that only they write. A user's folder that merely
*contains* a ``checkpoints/`` or a ``results.json`` (a project root does) is not one of ours; nor is
one that holds ``*.slides.html`` pages, which ``jupyter nbconvert --to slides`` writes too.

Inside a folder of ours a command still replaces or deletes only what a minibert command wrote there:
the mark lists those names (`written`), and a file of the same name that the user put there is
refused, never replaced. And one command writes a folder at a time (`writing`): it holds an
advisory lock (``fcntl.flock``) on ``.minibert-lock`` in the folder, the operating system releases it
when the process ends however it ends, and a second command is refused at once instead of both
writing the same checkpoints and both reporting success.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
from fnmatch import fnmatch
from pathlib import Path
from typing import Iterator

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; the folder rules still hold
    fcntl = None  # type: ignore[assignment]

MARK = ".minibert-output"
LOCK = ".minibert-lock"
BOOKKEEPING = (MARK, LOCK)  # ours, but evidence of nothing: a folder holding only these is empty
# For folders written before the mark existed: what only a minibert command leaves in its folder, and
# what else it writes there (a model folder's files).
MADE_BY_MINIBERT = ("recipe.json", "results.json", "held_out.json", "checkpoints", "tokenizer", "run.json",
                    "trainer_state.json", "history.json", "predictions.json")
ALSO_WRITTEN = ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
                "special_tokens_map.json")
# Names a user's own folder has as often as ours: ours only beside what makes them ours (a model card
# beside a model's config).
ONLY_WITH = {"README.md": lambda names: "config.json" in names}
# What a command wrote in a folder it marked before marks listed names (then: its slides and assets).
MARKED_BEFORE_LISTS = {"minibert slides": ("assets", "*.slides.html")}


def _ours(name: str) -> bool:
    """Only a minibert command writes an entry of this name (a checkpoint step)."""
    return name in MADE_BY_MINIBERT or name.startswith("step-")


def _minibert_name(name: str, names: list[str]) -> bool:
    return _ours(name) or name in ALSO_WRITTEN or (name in ONLY_WITH and ONLY_WITH[name](names))


def _entries(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name not in BOOKKEEPING)


def _shown(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def written(out: Path) -> list[str]:
    """The names (or patterns, ``step-*``) in ``out`` that minibert commands wrote and may replace: the mark's
    list; for a folder marked before marks listed names, what minibert commands write that is there; for a
    folder recognised without a mark, everything in it (`claimable` found nothing else)."""
    mark = out / MARK
    if not mark.is_file():
        return _entries(out) if out.is_dir() else []
    text = mark.read_text(encoding="utf-8", errors="replace")
    try:
        listed = json.loads(text)["written"]
        if isinstance(listed, list) and all(isinstance(name, str) for name in listed):
            return listed
    except (ValueError, KeyError, TypeError):
        pass
    entries = _entries(out)
    legacy = [pattern for command, patterns in MARKED_BEFORE_LISTS.items() if f"`{command}`" in text
              for pattern in patterns]
    return [name for name in entries if _minibert_name(name, entries) or any(fnmatch(name, p) for p in legacy)]


def claimable(out: str | os.PathLike, command: str, writes: tuple[str, ...] = ()) -> Path:
    """``out`` as a Path if ``command`` may write there, else a ValueError that names the folder, what is
    in it, and what to do. ``writes``: the names (or patterns) the command writes or replaces in it; one
    that is there and that no minibert command wrote is refused. Nothing is written (see `claim`)."""
    if not str(out).strip():
        raise ValueError(f"{command}: --out is empty; name a new folder for what it writes")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{command}: --out {out} is a file, not a folder; name a new folder")
    if not out.is_dir():
        return out
    entries = _entries(out)
    if not (out / MARK).is_file():
        foreign = [name for name in entries if not _minibert_name(name, entries)]
        if entries and not (any(_ours(name) for name in entries) and not foreign):
            foreign = foreign if any(_ours(name) for name in entries) else entries  # what makes it the user's
            raise ValueError(f"{command}: --out {out} is a folder that minibert did not write, and it holds "
                             f"{_shown(foreign)}; nothing was written there. Name a new folder (it is made for you)")
    ours = written(out)
    theirs = [name for name in entries if any(fnmatch(name, pattern) for pattern in writes)
              and not any(fnmatch(name, pattern) for pattern in ours)]
    if theirs:
        raise ValueError(f"{command}: --out {out} holds {_shown(theirs)}, which minibert did not write there and "
                         f"this command would replace; nothing was written. Move {'it' if len(theirs) == 1 else 'them'} "
                         "out of the folder, or name another --out")
    return out


def claim(out: str | os.PathLike, command: str, writes: tuple[str, ...] = ()) -> Path:
    """Check ``out`` (`claimable`), make it if needed, and mark it as written by ``command``, listing ``writes``
    (before they are written: a command killed half-way may replace them when it is run again)."""
    out = claimable(out, command, writes)
    out.mkdir(parents=True, exist_ok=True)
    ours = written(out)
    if not (out / MARK).is_file() or any(name not in ours for name in writes):
        listed = [*ours, *(name for name in writes if name not in ours)]
        record = {"note": "minibert commands wrote the names below in this folder and may replace them; "
                          "nothing else in it is ever touched", "last_command": command, "written": listed}
        tmp = out / f"{MARK}.{os.getpid()}.part"
        tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, out / MARK)
    return out


@contextlib.contextmanager
def writing(out: str | os.PathLike, command: str, writes: tuple[str, ...] = (), *,
            staged: bool = False) -> Iterator[Path]:
    """Claim ``out`` (`claim`) and hold its lock while the block writes it; yields the folder to write.

    A second command on the same folder is refused at once with a ValueError that names it. When the block
    fails, a folder this call made is removed if nothing was written into it. ``staged``: the block writes
    a hidden sibling folder (``.NAME.partial``) that becomes ``out`` by one rename when the block ends
    (``out`` must then be new or empty): an interrupted command never leaves a folder that looks complete,
    and the stage a killed one left is cleared by the next. Under ``torchrun`` only process 0 writes, so
    only it claims and locks.
    """
    if os.environ.get("RANK", "0") != "0":
        yield Path(out)
        return
    target = claimable(out, command, writes)
    folder = stage_of(target) if staged else target
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder, target, command):
        try:
            if staged:  # a stage left by a killed command: incomplete by definition
                for path in folder.iterdir():
                    if path.name != LOCK:
                        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
            claim(folder, command, writes)
            yield folder
            if staged:
                _move_into_place(folder, target, command)
        except BaseException:
            if staged:
                shutil.rmtree(folder, ignore_errors=True)
            elif made and folder.is_dir() and not _entries(folder):
                shutil.rmtree(folder, ignore_errors=True)
            raise


def stage_of(out: Path) -> Path:
    """The hidden sibling a staged command writes before it becomes ``out`` (`writing`)."""
    return out.with_name(f".{out.name}.partial")


@contextlib.contextmanager
def _locked(folder: Path, target: Path, command: str):
    """Hold the folder's lock (``folder/.minibert-lock``, kept: removing a lock file races with its next taker)."""
    with _flock(folder / LOCK, command, f"{command}: another minibert command is writing in {target}",
                "name another --out"):
        yield


@contextlib.contextmanager
def _flock(lock_file: Path, command: str, busy: str, instead: str):
    """An exclusive advisory lock on ``lock_file``, or at once a ValueError: ``busy``, who holds it, what to do."""
    if fcntl is None:
        yield
        return
    with open(lock_file, "a+", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # BlockingIOError: another process holds it (or another open file of this one)
            lock.seek(0)
            holder = lock.read().strip()
            raise ValueError(f"{busy} ({holder or 'it holds ' + str(lock_file)}); wait until it ends, or "
                             f"{instead}. Nothing was written") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"process {os.getpid()}, `{command}`\n")
        lock.flush()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _move_into_place(stage: Path, target: Path, command: str) -> None:
    """Rename the complete stage to ``target`` in one step; ``target`` may be missing or hold nothing of note."""
    if target.is_dir():
        if _entries(target):
            raise ValueError(f"{command}: --out {target} was filled while this command ran ({_shown(_entries(target))}); "
                             "nothing was written there. Name a new folder")
        for name in BOOKKEEPING:
            (target / name).unlink(missing_ok=True)
    os.replace(stage, target)  # a directory onto an empty one: one atomic rename on POSIX


@contextlib.contextmanager
def locked_file(path: str | os.PathLike, command: str) -> Iterator[Path]:
    """Hold the lock of a results file (``.NAME.lock`` beside it) while a command rewrites it: two grids on one
    file would each rewrite it, and the runs of one would be lost."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _flock(path.with_name(f".{path.name}.lock"), command, f"{command}: another minibert command is writing "
                f"{path}", "name another --out file"):
        yield path
