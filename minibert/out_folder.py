"""The one rule for every command that writes a folder (pretrain, finetune, export, slides).

``--out`` must be a new folder, an empty one, or one a minibert command wrote: never a folder of the
user's own, whatever name is typed (``.``, the project, a model being fine-tuned, ``""``). A folder
gets a mark when a command claims it, so that the same command may write there again (resume a run,
rebuild the slides). A folder written before marks existed is recognised by what it holds: only what
minibert commands write, and at least one thing that only they write. A user's folder that merely
*contains* a ``checkpoints/`` or a ``results.json`` (a project root does) is not one of ours.
"""
from __future__ import annotations

import os
from pathlib import Path

MARK = ".minibert-output"
# For folders written before the mark existed: what only a minibert command leaves in its folder, and
# what else it writes there (a model folder's files, the slides' assets).
MADE_BY_MINIBERT = ("recipe.json", "results.json", "held_out.json", "checkpoints", "tokenizer", "run.json",
                    "trainer_state.json", "history.json", "predictions.json")
ALSO_WRITTEN = ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
                "special_tokens_map.json")
# Names a user's own folder has as often as ours: ours only beside what makes them ours (a model card
# beside a model's config, the slides' assets beside a slides page).
ONLY_WITH = {"README.md": lambda names: "config.json" in names,
             "assets": lambda names: any(name.endswith(".slides.html") for name in names)}


def _ours(name: str) -> bool:
    """Only a minibert command writes an entry of this name (a checkpoint step, a slides page)."""
    return name in MADE_BY_MINIBERT or name.startswith("step-") or name.endswith(".slides.html")


def claimable(out: str | os.PathLike, command: str) -> Path:
    """``out`` as a Path if ``command`` may write there, else a ValueError that names the folder, what is
    in it, and what to do. Nothing is written (see `claim`)."""
    if not str(out).strip():
        raise ValueError(f"{command}: --out is empty; name a new folder for what it writes")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{command}: --out {out} is a file, not a folder; name a new folder")
    if not out.is_dir() or (out / MARK).is_file():
        return out
    entries = sorted(p.name for p in out.iterdir())
    foreign = [name for name in entries if not (_ours(name) or name in ALSO_WRITTEN
                                                or (name in ONLY_WITH and ONLY_WITH[name](entries)))]
    if not entries or (any(_ours(name) for name in entries) and not foreign):
        return out
    foreign = foreign if any(_ours(name) for name in entries) else entries  # what makes it the user's
    shown = ", ".join(foreign[:4]) + (f" and {len(foreign) - 4} more" if len(foreign) > 4 else "")
    raise ValueError(f"{command}: --out {out} is a folder that minibert did not write, and it holds {shown}; "
                     "nothing was written there. Name a new folder (it is made for you)")


def claim(out: str | os.PathLike, command: str) -> Path:
    """Check ``out`` (`claimable`), make it if needed and mark it as written by ``command``."""
    out = claimable(out, command)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / MARK).is_file():
        (out / MARK).write_text(f"written by `{command}`: minibert commands may write in this folder again\n")
    return out
