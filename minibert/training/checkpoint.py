"""Checkpoints that resume a run exactly, and the random generators they carry.

A run can stop at any step and go on exactly where it was: a checkpoint holds the weights (the
Hugging Face layout of ``save_pretrained``), the optimizer, the random generators and the position
in the data, so a resumed run ends with bit-identical weights: on a CPU (tests/test_train.py), and on
a GPU under ``torch.use_deterministic_algorithms(True)`` with ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` set
before CUDA starts (tests/test_gpu.py). Without those, some GPU kernels (attention's backward among
them) add partial sums in an order that varies from run to run, and two runs, resumed or not, end
close rather than bitwise.
Checkpoints are safetensors + JSON, so loading one never runs code, and each appears whole or not at all.
"""
from __future__ import annotations

import json
import logging
import os
import random
import shutil
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from ..atomic import DiskFullError, disk_full
from ..config import read_json
from ..hub import refuse_not_finite, tied_aliases
from ..user_files import regular_file
from .config import RESUME_SAFE_FIELDS
from .history import History

logger = logging.getLogger("minibert")


# --- random generators: saved in checkpoints, so dropout and dynamic masking resume where they were ---
def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # CPU and every GPU


def rng_state(device: torch.device) -> tuple[dict[str, Tensor], dict]:
    """Every generator a step may draw from (torch, the GPU's, numpy's, Python's) as tensors + JSON-able values."""
    np_kind, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    py_version, py_keys, py_gauss = random.getstate()
    tensors = {"torch": torch.get_rng_state(), "numpy": torch.from_numpy(np_keys.astype(np.int64)),
               "python": torch.tensor(py_keys, dtype=torch.int64)}
    if device.type in ("cuda", "mps"):
        tensors[device.type] = getattr(torch, device.type).get_rng_state()
    return tensors, {"numpy": [np_kind, np_pos, np_has_gauss, np_gauss], "python": [py_version, py_gauss]}


def set_rng_state(tensors: dict[str, Tensor], values: dict, device: torch.device) -> None:
    torch.set_rng_state(tensors["torch"])
    if device.type in tensors:
        getattr(torch, device.type).set_rng_state(tensors[device.type])
    kind, pos, has_gauss, gauss = values["numpy"]
    np.random.set_state((kind, tensors["numpy"].numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, gauss_next = values["python"]
    random.setstate((version, tuple(tensors["python"].tolist()), gauss_next))


@contextmanager
def isolated_rng(seed: int, device: torch.device):
    """Draw from freshly seeded generators, then put training's back as they were."""
    saved = rng_state(device)
    seed_everything(seed)
    try:
        yield
    finally:
        set_rng_state(*saved, device)


# --- checkpoint folders: out_dir/step-NNNNNN ---------------------------------------------------------
def find_checkpoints(out_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints, oldest first: a folder step-N only ever appears fully written."""
    folders = [p for p in Path(out_dir).glob("step-*") if p.is_dir() and p.name[5:].isdigit()]
    return sorted(folders, key=lambda p: int(p.name[5:]))


def checkpoint_to_resume(resume: bool | str | os.PathLike, out_dir: str | None, fresh: bool,
                         is_main: bool = True) -> Path | None:
    """The checkpoint ``fit(resume)`` starts from: None (from scratch), the latest in out_dir, or the one named.

    A ``fresh`` run (no step made yet) that is not resuming refuses an out_dir that holds checkpoints:
    its own would mix with the old run's.
    """
    if resume is False:
        if out_dir and fresh and find_checkpoints(out_dir):
            raise ValueError(f"{out_dir} already holds checkpoints of a run; fit(resume=True) continues it, "
                             "or choose another out_dir (or delete the old one) to start afresh")
        return None
    if resume is True:
        if not out_dir:
            raise ValueError("fit(resume=True) looks for checkpoints in config.out_dir, which is None")
        checkpoints = find_checkpoints(out_dir)
        if not checkpoints and is_main:
            logger.warning("resume: %s holds no checkpoint to resume from, so training starts at step 0", out_dir)
        return checkpoints[-1] if checkpoints else None
    if not (Path(resume) / "trainer_state.json").exists():
        raise FileNotFoundError(f"{resume} is not a checkpoint folder (a step-NNNNNN folder that fit() wrote)")
    return Path(resume)


def save_checkpoint(out_dir: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer,
                    scaler: torch.amp.GradScaler, rng: list[tuple[dict, dict]], run: dict, history: History,
                    keep_last: int) -> Path:
    """Write out_dir/step-NNNNNN whole or not at all, and keep the last ``keep_last``.

    ``rng``: every process's `rng_state`; ``run``: step, epoch, batch_in_epoch, world_size and config
    as JSON-able values. Tensors go to safetensors, the rest to JSON.
    """
    out_dir = Path(out_dir)
    final = out_dir / f"step-{run['step']:06d}"
    for stale in out_dir.glob(".step-*.tmp"):  # what a killed process left half-written
        shutil.rmtree(stale)
    tmp = out_dir / f".{final.name}.tmp"  # hidden, and not a step-N: never taken for a checkpoint
    try:
        model.save_pretrained(tmp)
        optimizer_state = optimizer.state_dict()
        tensors = {f"optimizer.{index}.{name}": value.detach().cpu()
                   for index, state in optimizer_state["state"].items() for name, value in state.items()}
        tensors |= {f"rng.{rank}.{name}": t for rank, (rank_tensors, _) in enumerate(rng)
                    for name, t in rank_tensors.items()}
        save_file(tensors, tmp / "trainer_state.safetensors")
        state = {**run, "optimizer_param_groups": optimizer_state["param_groups"], "scaler": scaler.state_dict(),
                 "rng": [values for _, values in rng], "history": history.records}
        (tmp / "trainer_state.json").write_text(json.dumps(state, indent=1) + "\n")
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)  # one atomic rename: the checkpoint appears complete
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if disk_full(e):  # named as the checkpoint, not as the hidden folder it was being written in
            previous = find_checkpoints(out_dir)
            raise DiskFullError(final, f"the previous checkpoint {previous[-1]} is intact" if previous else
                                "no checkpoint of this run had been saved yet", disk_full(e)) from e
        raise
    for old in find_checkpoints(out_dir)[:-keep_last]:
        shutil.rmtree(old)
    history.to_json(out_dir / "history.json")
    return final


def load_checkpoint(path: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer,
                    scaler: torch.amp.GradScaler, device: torch.device, rank: int, seed: int) -> dict:
    """Restore weights, optimizer, scaler and this process's generators (safetensors + JSON only).

    Returns the checkpoint's JSON state (step, epoch, batch_in_epoch, world_size, config, history).
    A process the checkpoint has no generators for (a run resumed on more processes) is seeded
    from ``seed``, its rank and the step.
    """
    path = Path(path)
    state = read_json(path / "trainer_state.json", "checkpoint's trainer state")
    tensors = load_file(regular_file(path / "trainer_state.safetensors"))
    weights = load_file(regular_file(path / "model.safetensors"))
    for file, stored in (("model.safetensors", weights), ("trainer_state.safetensors", tensors)):
        refuse_not_finite(stored, path / file, "the run had diverged when it was saved")
    missing, unexpected = model.load_state_dict(weights, strict=False)
    missing = set(missing) - set(tied_aliases(model))  # the tied MLM decoder is stored once
    if missing or unexpected:
        raise ValueError(f"{path} holds another model's weights: missing {sorted(missing)}, "
                         f"unexpected {sorted(unexpected)}")
    optimizer_state = {}
    for key, value in tensors.items():
        if key.startswith("optimizer."):
            _, index, name = key.split(".", 2)
            optimizer_state.setdefault(int(index), {})[name] = value
    groups = [{**group, "betas": tuple(group["betas"])} for group in state["optimizer_param_groups"]]
    optimizer.load_state_dict({"state": optimizer_state, "param_groups": groups})
    scaler.load_state_dict(state["scaler"])
    prefix = f"rng.{rank}."
    mine = {k.removeprefix(prefix): v for k, v in tensors.items() if k.startswith(prefix)}
    if mine:
        set_rng_state(mine, state["rng"][rank], device)
    else:
        seed_everything(seed + rank + state["step"])
    return state


def set_aside(checkpoint: Path) -> Path:
    """Rename a checkpoint that cannot be resumed from to step-N.damaged (then .damaged-2, ...): kept for a
    look, never again taken for a checkpoint (`find_checkpoints`) nor pruned in place of a good one."""
    for k in range(1, 1000):
        aside = checkpoint.with_name(checkpoint.name + (".damaged" if k == 1 else f".damaged-{k}"))
        if not aside.exists():
            os.replace(checkpoint, aside)
            return aside
    raise FileExistsError(f"too many {checkpoint}.damaged* folders: remove some")


def warn_about_changes(state: dict, config: dict, world_size: int) -> None:
    """Say when a resumed run will not match an uninterrupted one: other processes, or other settings."""
    if state["world_size"] != world_size:
        logger.warning("resuming a %d-process run on %d processes: the data order and random draws "
                       "differ from an uninterrupted run", state["world_size"], world_size)
    now = json.loads(json.dumps(config))
    changed = [k for k, v in state["config"].items() if k not in RESUME_SAFE_FIELDS and now.get(k) != v]
    if changed:
        logger.warning("resuming with changed %s: the run will differ from an uninterrupted one",
                       ", ".join(f"{k} ({state['config'][k]} -> {now.get(k)})" for k in changed))
