"""What makes the host wait for a GPU, found without one.

On a GPU the host queues kernels and runs ahead; an operation whose result the host must read (a
scalar: ``.item()``, ``if tensor:``; or a size that depends on the values: ``nonzero``, a boolean
mask as an index, ``unique``) stops it until the device has caught up. `DataDependentOps` records
such operations as PyTorch dispatches them, on any device, so a CPU test can hold a training step
to what ``torch.cuda.set_sync_debug_mode("error")`` checks on a GPU (tests/test_gpu.py).
"""
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import minibert.model
import minibert.modernbert.model
from minibert.training import Trainer

aten = torch.ops.aten
# The host reads a value (_local_scalar_dense is .item(), bool(), float(), ...) or learns a size from the values.
READS_VALUES = {aten._local_scalar_dense, aten.is_nonzero, aten.equal, aten.nonzero, aten.masked_select,
                aten.unique_consecutive, aten.unique_dim, aten.unique_dim_consecutive, aten._unique, aten._unique2,
                aten.bincount, aten.histc}
INDEXING = {aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_}  # data-dependent with a boolean index


class DataDependentOps(TorchDispatchMode):
    """Records each dispatched operation that would make the host wait for a GPU, as ``"aten.nonzero.default"``."""

    def __init__(self):
        super().__init__()
        self.seen, self.watched, self.paused = [], 0, False  # watched: operations looked at

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.paused:
            self.watched += 1
            if func.overloadpacket in READS_VALUES or (func.overloadpacket in INDEXING and any(
                    i is not None and i.dtype in (torch.bool, torch.uint8) for i in args[1])):
                self.seen.append(str(func))
        return func(*args, **(kwargs or {}))

    @contextmanager
    def pause(self):
        self.paused = True
        try:
            yield
        finally:
            self.paused = False


@contextmanager
def cuda_sync_errors():
    """Every host-device synchronisation raises (``torch.cuda.set_sync_debug_mode("error")``)."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def watch_steps_after_the_first(monkeypatch, watch):
    """Run the Trainer's training steps, all but the first, inside ``watch()``: the micro-batches'
    forward and backward (`Trainer._accumulate_gradients`) and the update (`Trainer._optimizer_step`).
    The first is a warm-up (lazy initialisation, the optimizer's state); logging is outside a step."""
    for name in ("_accumulate_gradients", "_optimizer_step"):
        def watched(self, *args, _original=getattr(Trainer, name)):  # noqa: B008 (bound now, on purpose)
            if self.step == 0:
                return _original(self, *args)
            with watch():
                return _original(self, *args)
        monkeypatch.setattr(Trainer, name, watched)


def record_device_work_of_steps(monkeypatch) -> DataDependentOps:
    """A `DataDependentOps` that sees the Trainer's steps after the first, less what runs on the host
    on a GPU too: making the next batch (collate_fn, the masked positions, the checks of `to_device`)
    and the models' own check of the ids, which reads them only on the CPU (`minibert.inputs.check_inputs`)."""
    recorder = DataDependentOps()

    def paused(original):
        def run(*args, **kwargs):
            with recorder.pause():
                return original(*args, **kwargs)
        return run

    monkeypatch.setattr(Trainer, "_next_batch", paused(Trainer._next_batch))
    for module in (minibert.model, minibert.modernbert.model):
        monkeypatch.setattr(module, "check_inputs", paused(module.check_inputs))
    watch_steps_after_the_first(monkeypatch, lambda: recorder)
    return recorder


def fuse_the_optimizer(trainer: Trainer) -> None:
    """Fused AdamW, the Trainer's optimizer on CUDA (`minibert.training.make_optimizer`). On a CPU the
    Trainer takes the unfused one, whose step reads each step count with ``.item()``: free there."""
    groups = [{k: v for k, v in group.items() if k != "fused"} for group in trainer.optimizer.param_groups]
    trainer.optimizer = torch.optim.AdamW(groups, fused=True)


def sentence_pairs(n: int, vocab_size: int, length: int, seed: int = 0, num_labels: int = 2,
                   cls_id: int = 101, sep_id: int = 102) -> list[dict]:
    """``[CLS] A [SEP] B [SEP]`` of random ids and random lengths (from a third of ``length`` up), padded
    to ``length`` with 0 so that batches hold padding, and a class label each (``labels``)."""
    g = torch.Generator().manual_seed(seed)
    examples, positions = [], torch.arange(length)
    for _ in range(n):
        real = int(torch.randint(length // 3 + 2, length + 1, (), generator=g))
        ids = torch.randint(5, vocab_size, (length,), generator=g)
        ids[0], ids[real // 2], ids[real - 1], ids[real:] = cls_id, sep_id, sep_id, 0
        examples.append({"input_ids": ids, "attention_mask": (positions < real).long(),
                         "token_type_ids": ((positions > real // 2) & (positions < real)).long(),
                         "labels": int(torch.randint(0, num_labels, (), generator=g))})
    return examples
