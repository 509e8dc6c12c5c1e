"""Evaluation as a function of (model, data): mean loss and metrics, the same numbers every time."""
from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler, default_collate
from tqdm.auto import tqdm

from ..modes import eval_mode
from .batching import to_device, with_host_positions
from .checkpoint import isolated_rng


@torch.no_grad()
def evaluate(model: nn.Module, data: Dataset, *, batch_size: int = 32, collate_fn=None, metrics_fn=None,
             device: torch.device | str | None = None, max_batches: int | None = None, seed: int = 0,
             autocast: AbstractContextManager | None = None, rank: int = 0, world_size: int = 1,
             num_workers: int = 0, model_kwargs: dict | None = None, progress: str | None = None) -> dict[str, float]:
    """Mean ``loss`` and ``metrics_fn(outputs, batch)``'s numbers over ``data``, weighted by examples, dropout off.

    ``data`` and ``collate_fn`` are the Trainer's kind: batches are dicts of the model's keyword
    arguments and labels. Evaluation draws (e.g. MLM masks in ``collate_fn``) from generators seeded
    with ``seed`` every time, so two evaluations see the same masks and their numbers compare; the
    caller's generators and the model's train/eval mode are left as they were. ``max_batches``: the
    first batches only. Under DistributedDataParallel (``world_size`` > 1) each process reads its
    share and the sums are added up, so every process returns the same numbers. ``model_kwargs`` go to
    every forward (e.g. ``{"masked_only": True}``; the masked positions are then found on the host,
    `with_host_positions`). ``progress``: the label of a progress bar (shown on a terminal).
    """
    if len(data) == 0:
        raise ValueError("evaluation data is empty")
    device = torch.device(device) if device is not None else next(model.parameters()).device
    sampler = DistributedSampler(data, world_size, rank, shuffle=False)
    # The loader's own generator: without one, a new DataLoader iterator draws from the global torch generator.
    collate_fn = with_host_positions(collate_fn or default_collate, model, model_kwargs)
    loader = DataLoader(data, batch_size, sampler=list(sampler), collate_fn=collate_fn,
                        num_workers=num_workers, pin_memory=device.type == "cuda",
                        generator=torch.Generator().manual_seed(seed))
    totals, examples = {}, 0
    with eval_mode(model):
        with isolated_rng(seed + rank, device):
            for i, batch in enumerate(tqdm(loader, desc=progress, disable=None if progress else True, leave=False)):
                if max_batches is not None and i == max_batches:
                    break
                batch = to_device(batch, device, getattr(model, "config", None))
                with autocast or nullcontext():
                    outputs = model(**batch, **(model_kwargs or {}))
                n = len(batch["input_ids"])
                values = {"loss": outputs.loss, **(metrics_fn(outputs, batch) if metrics_fn else {})}
                for name, value in values.items():
                    if value is not None:  # no loss without every label (MLM+NSP model, MLM-only data)
                        totals[name] = totals.get(name, 0.0) + float(value) * n
                examples += n
    sums = torch.tensor([examples, *totals.values()], dtype=torch.float64, device=device)
    if world_size > 1:
        dist.all_reduce(sums)
    return {name: (total / sums[0]).item() for name, total in zip(totals, sums[1:])}
