"""Batches of examples of different lengths: padding, batches of similar lengths (less padding), the device."""
from __future__ import annotations

import inspect
import random
from functools import partial

import torch
from torch import Tensor

from ..config import BertConfig
from ..heads import masked_lm_positions
from ..inputs import check_inputs
from ..padding import pad, pad_with_mask  # noqa: F401 (also training's names: `from minibert.training import pad`)
from ..unpadding import packed_positions


def batches_by_length(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indices in batches of ``batch_size``, longest first: inference pads each batch little, and a batch
    too long for memory shows up at once. Training shuffles instead (`group_by_length`)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable: ties keep their order
    return [order[k:k + batch_size] for k in range(0, len(order), batch_size)]


def group_by_length(indices: list[int], lengths: list[int], batch_size: int, seed: int = 0,
                    batches_per_group: int = 50) -> list[int]:
    """Shuffled ``indices`` reordered so that each batch holds examples of similar length.

    Dynamic padding pads a batch to its longest example; with random batches of short and long
    sentences much of the compute goes to padding (SST-2 at batch 32: three times the real tokens).
    As transformers' ``group_by_length`` does, each run of ``batches_per_group`` batches is sorted by
    length and cut into batches; here the batches of a group then go in an order drawn with ``seed``,
    so training does not meet long batches at regular intervals. A pure function of its inputs, so a
    resumed run sees the same batches.
    """
    group, rng, out = batch_size * batches_per_group, random.Random(seed), []
    for k in range(0, len(indices), group):
        ordered = sorted(indices[k:k + group], key=lambda i: -lengths[i])  # stable: ties keep the shuffled order
        batches = [ordered[b:b + batch_size] for b in range(0, len(ordered), batch_size)]
        full = [b for b in batches if len(b) == batch_size]
        rng.shuffle(full)
        out += [i for b in full + [b for b in batches if len(b) < batch_size] for i in b]  # a short batch stays last
    return out


def example_lengths(data) -> list[int]:
    """Tokens in each example (its ``input_ids``) of a dataset, reading one column where there is one."""
    if hasattr(data, "column_names") and "input_ids" in data.column_names:  # a datasets.Dataset: one column
        ids = data["input_ids"]
    elif isinstance(getattr(data, "input_ids", None), list):               # e.g. SquadFeatures
        ids = data.input_ids
    elif hasattr(getattr(data, "examples", None), "lengths"):              # pre-training spans: from their ends
        return data.examples.lengths().tolist()
    else:
        ids = (data[i]["input_ids"] for i in range(len(data)))
    return [len(x) for x in ids]


def to_device(batch, device: torch.device, config=None) -> dict:
    """A batch (a dict: the model's keyword arguments and labels) with its tensors on ``device``.

    Given the model's ``config`` and a device other than the CPU, the ids are checked first, on the CPU
    where reading them is free (`minibert.inputs.check_inputs`): the model itself skips that check on a
    GPU, where it would wait for the device at every forward pass, and makes it on the CPU.
    """
    if not isinstance(batch, dict):
        raise TypeError(f"a batch must be a dict of tensors (the model's keyword arguments and labels), got "
                        f"{type(batch).__name__}; return dicts from the dataset or from collate_fn")
    if device.type != "cpu" and isinstance(config, BertConfig) and isinstance(batch.get("input_ids"), Tensor):
        check_inputs(config, batch["input_ids"], batch.get("attention_mask"), batch.get("token_type_ids"),
                     batch.get("position_ids"))
    return {k: v.to(device, non_blocking=True) if isinstance(v, Tensor) else v for k, v in batch.items()}


def with_host_positions(collate_fn, model, model_kwargs: dict | None):
    """``collate_fn``, and each batch's positions that the model would otherwise find on the device:
    ``masked_positions`` (`minibert.heads.masked_lm_positions` of the labels) when ``model_kwargs`` ask for
    masked-only decoding, ``packed_positions`` (`minibert.unpadding.packed_positions` of the attention mask)
    when they ask for ``unpadded`` or the model always unpads (a forward that takes ``packed_positions`` and
    has no ``unpadded`` switch: ModernBERT), each where the model's forward takes them.

    The DataLoader runs it on the host, where reading the labels and the mask is free, and pins the
    positions with the rest of the batch. Found on a GPU instead, N_masked and N would be sizes known only
    once the device has computed them: a host-device sync at every step.
    """
    takes = inspect.signature(model.forward).parameters
    kwargs = model_kwargs or {}
    masked = "masked_positions" in takes and bool(kwargs.get("masked_only"))
    packed = "packed_positions" in takes and ("unpadded" not in takes or bool(kwargs.get("unpadded")))
    if not (masked or packed):
        return collate_fn
    # a partial, not a closure: worker processes pickle it
    return partial(_collate_with_host_positions, collate_fn, masked, packed)


def _collate_with_host_positions(collate_fn, masked: bool, packed: bool, examples: list) -> dict:
    batch = collate_fn(examples)
    if masked and "labels" in batch:
        batch["masked_positions"] = masked_lm_positions(batch["labels"])
    if packed and "attention_mask" in batch:
        batch["packed_positions"] = packed_positions(batch["attention_mask"])
    return batch
