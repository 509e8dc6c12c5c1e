"""A run's settings, written when it starts, so that resuming it can be checked against them.

A run stopped by Ctrl-C, a kill or a crash has checkpoints but never reached its end, where the full
record (recipe.json, results.json) is written. Were the settings written only there, ``--resume`` with
another corpus, task or seed would go on from those checkpoints unchecked and then describe the whole
run by the new settings. So the recipes write the settings that define a run first, and a resume
that differs in any of them is refused before anything is read or written.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..atomic import atomic_path
from ..config import read_json


def write_json(path: Path, record: dict) -> None:
    """``record`` as indented JSON, whole or not at all (a kill mid-write leaves the old file)."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(record, indent=2, default=str) + "\n")


def refuse_changes(record_file: Path, key: str, now: dict, defining: tuple[str, ...], out: Path) -> None:
    """Raise if ``now`` (the settings of this call) differs from ``record_file[key]`` (the run's) in a
    ``defining`` setting; a record that is missing says nothing (a run from before records, or none yet)."""
    recorded = _recorded(record_file, key)
    now = json.loads(json.dumps(now, default=str))  # as the record holds them: lists, strings
    changed = [f"--{name.replace('_', '-')} {now.get(name)!r} (the run: {recorded[name]!r})"
               for name in defining if name in recorded and recorded[name] != now.get(name)]
    if changed:
        raise ValueError(f"--resume with settings other than the run in {out}: " + "; ".join(changed) +
                         f". Resume with the run's own flags ({record_file.name} lists them), or start a new run "
                         "in another --out; nothing was written")


# What belongs to one call of a run, or to the machine it runs on, not to the run: never taken from its record.
PER_CALL = ("out", "resume", "time_budget", "device", "precision", "compile")


def with_recorded(given: dict, record_file: Path, key: str, names: set[str]) -> dict:
    """``given`` (the flags of a --resume command line) completed from the run's record: `minibert pretrain
    --out RUN --resume` goes on with the settings the run was started with, not the defaults."""
    recorded = _recorded(record_file, key)
    return {**{k: v for k, v in recorded.items() if k in names and k not in PER_CALL and k not in given}, **given}


def _recorded(record_file: Path, key: str) -> dict:
    """``record_file[key]``: the settings a run recorded; none where it has no record."""
    return read_json(record_file, "run's recorded settings").get(key, {}) if record_file.is_file() else {}
