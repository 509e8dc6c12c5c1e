"""The one rule for every command that writes a folder (pretrain, finetune, export, slides).

``--out`` must be a new folder, an empty one, or one a minibert command wrote: never a folder of the
user's own, whatever name is typed (``.``, the project, a model being fine-tuned, ``""``). A folder
gets a mark when a command claims it, so that the same command may write there again (resume a run,
rebuild the slides); folders written before marks existed are recognised by what they hold.
"""
from __future__ import annotations

import os
from pathlib import Path

MARK = ".minibert-output"
# What a minibert command leaves in its folder, for folders written before the mark existed.
MADE_BY_MINIBERT = ("recipe.json", "results.json", "held_out.json", "checkpoints", "tokenizer")


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
    if not entries or any(name in MADE_BY_MINIBERT or name.startswith("step-") or name.endswith(".slides.html")
                          for name in entries):
        return out
    shown = ", ".join(entries[:4]) + (f" and {len(entries) - 4} more" if len(entries) > 4 else "")
    raise ValueError(f"{command}: --out {out} is a folder that minibert did not write, and it holds {shown}; "
                     "nothing was written there. Name a new folder (it is made for you)")


def claim(out: str | os.PathLike, command: str) -> Path:
    """Check ``out`` (`claimable`), make it if needed and mark it as written by ``command``."""
    out = claimable(out, command)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / MARK).is_file():
        (out / MARK).write_text(f"written by `{command}`: minibert commands may write in this folder again\n")
    return out
