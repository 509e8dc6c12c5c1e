"""One training loop for pre-training and fine-tuning, from a laptop CPU to many GPUs.

The loop is nanoGPT's (karpathy/nanoGPT, train.py) with BERT's recipe (Devlin et al. 2018, §A.2):
AdamW without weight decay on biases and LayerNorm, learning-rate warmup then linear decay,
gradient clipping, and gradient accumulation when a batch does not fit in memory at once. On a
GPU it trains in bf16 autocast (fp16 with a gradient scaler as an option) with TF32 matmuls and
fused AdamW; under ``torchrun`` every process trains a replica through DistributedDataParallel,
which averages the gradients. A run stops at any step and resumes exactly (`checkpoint`).

    config = TrainConfig(max_steps=1000, batch_size=32, lr=1e-4, out_dir="runs/mlm", eval_every=100)
    history = Trainer(model, config, train_data, eval_data).fit(resume=True)
    history.plot()
"""
from __future__ import annotations

import logging
import math
import os
import signal
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors import SafetensorError
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler, default_collate
from tqdm.auto import tqdm

from ..hub import not_finite
from .batching import example_lengths, group_by_length, to_device, with_host_positions
from .checkpoint import (
    checkpoint_to_resume,
    find_checkpoints,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    seed_everything,
    set_aside,
    warn_about_changes,
)
from .config import TrainConfig
from .evaluate import evaluate
from .history import History
from .precision import AUTOCAST_DTYPES, flops_per_token, peak_flops, pick_device, pick_precision
from .schedule import make_optimizer, warmup_linear_decay

logger = logging.getLogger(__name__)

# What stops a run from outside: each saves a checkpoint first (`Trainer._deferred_interrupt`).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class Trainer:
    """Trains ``model`` (any minibert model: ``model(**batch).loss`` given labels) on a map-style Dataset.

    Batches are dicts of tensors: the model's keyword arguments, labels included (``collate_fn``
    makes them from a list of examples; default: stack the examples' tensors). Each epoch visits
    the examples in a permutation seeded by (seed, epoch), so the position in the data is
    (epoch, batches done) and a resumed run skips what it used without loading it. ``collate_fn``
    may draw from torch / numpy / Python random (dynamic masking): checkpoints save those
    generators. With num_workers > 0 it runs in worker processes whose generators are seeded per
    epoch and not saved: runs stay reproducible from scratch, but a resumed run draws other masks.

    ``metrics_fn(outputs, batch) -> {"accuracy": 0.9}`` adds numbers to each evaluation (`evaluate`).
    ``model_kwargs`` go to every training forward, ``eval_model_kwargs`` to evaluation's, e.g.
    ``{"masked_only": True}``: pre-training's MLM head then decodes the masked positions only (for a
    30k vocabulary most of the work of the full logits), and `pretraining_metrics` reads those.
    ``{"unpadded": True}`` runs BERT's encoder on the real tokens only (`minibert.unpadding`).
    The DataLoader finds those positions from the labels and the mask, on the host (`with_host_positions`), so
    that on a GPU no step waits for the device: the loss and gradient norm are read (``.item()``) at log
    steps only, batches move from pinned memory without blocking, AdamW is fused, and fp16's
    gradient scaler hands its overflow flag to fused AdamW on the device (tests/test_no_sync.py
    checks a CPU step for anything that would wait, tests/test_gpu.py a CUDA step).
    Under ``torchrun`` the Trainer joins the process group (nccl on GPUs, gloo on CPUs), each process
    reads its share of every batch, and process 0 writes checkpoints, which must be on a file system
    all nodes see to resume a multi-node run; fit() leaves the process group when it is done.
    """

    def __init__(self, model: nn.Module, config: TrainConfig, train_data: Dataset, eval_data: Dataset | None = None,
                 collate_fn=None, metrics_fn=None, model_kwargs: dict | None = None,
                 eval_model_kwargs: dict | None = None):
        config.validate()
        self.config, self.train_data, self.eval_data = config, train_data, eval_data
        self.collate_fn, self.metrics_fn = collate_fn or default_collate, metrics_fn
        self.model_kwargs, self.eval_model_kwargs = dict(model_kwargs or {}), dict(eval_model_kwargs or {})
        self.rank, self.world_size = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
        self.is_main = self.rank == 0
        self.device = pick_device(config.device, int(os.environ.get("LOCAL_RANK", 0)))
        self.precision = pick_precision(config.precision, self.device)
        self.batches_per_epoch = len(train_data) // self.world_size // config.batch_size
        if self.batches_per_epoch == 0:
            raise ValueError(f"train_data has {len(train_data)} examples, fewer than one batch of "
                             f"{config.batch_size} for each of {self.world_size} process(es); lower batch_size")
        if eval_data is not None and len(eval_data) == 0:
            raise ValueError("eval_data is empty; pass eval_data=None to train without evaluation")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # this process's GPU: where NCCL and torch.cuda.* calls go
        self.owns_process_group = self.world_size > 1 and not dist.is_initialized()
        if self.owns_process_group:
            dist.init_process_group(backend="nccl" if self.device.type == "cuda" else "gloo")

        self.model = model.to(self.device)
        self.optimizer = make_optimizer(self.model, config, self.device)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")  # a no-op unless fp16
        self.autocast = (nullcontext() if self.precision == "fp32"
                         else torch.autocast(self.device.type, dtype=AUTOCAST_DTYPES[self.precision]))
        if self.device.type == "cuda":
            torch.set_float32_matmul_precision("high")  # TF32 tensor cores for the matmuls left in fp32
        self.peak_flops = (peak_flops(torch.cuda.get_device_name(self.device))
                           if self.device.type == "cuda" and self.precision != "fp32" else None)
        self.forward_model = torch.compile(self.model) if config.compile else self.model
        if self.world_size > 1:
            self.forward_model = DistributedDataParallel(
                self.forward_model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        self.step = self.epoch = self.batch_in_epoch = 0  # updates made; where the data stands
        self.history = History()
        self._paused_window: tuple | None = None  # the log window a fit(until=...) left open

    def lr_at(self, step: int) -> float:
        return warmup_linear_decay(step, self.config.lr, self.config.num_warmup_steps, self.config.max_steps)

    # --- data -------------------------------------------------------------------------------------------
    def _micro_batches(self):
        """Micro-batches forever, epoch after epoch; (epoch, batch_in_epoch) is the position a checkpoint keeps."""
        cfg = self.config
        lengths = example_lengths(self.train_data) if cfg.group_by_length else None
        collate = with_host_positions(self.collate_fn, self.model, self.model_kwargs)
        while True:
            sampler = DistributedSampler(self.train_data, self.world_size, self.rank, shuffle=True,
                                         seed=cfg.seed, drop_last=True)
            sampler.set_epoch(self.epoch)  # permutation seeded by seed + epoch; process r takes every r-th index
            indices = list(sampler)
            if lengths is not None:
                indices = group_by_length(indices, lengths, cfg.batch_size, cfg.seed + self.epoch)
            skipped = self.batch_in_epoch * cfg.batch_size
            # The loader's own generator: without one, every new DataLoader iterator draws from the global
            # torch generator, so a resumed run would draw one number more than an uninterrupted one.
            loader = DataLoader(self.train_data, cfg.batch_size, sampler=indices[skipped:], collate_fn=collate,
                                drop_last=True, num_workers=cfg.num_workers, pin_memory=self.device.type == "cuda",
                                generator=torch.Generator().manual_seed(cfg.seed + self.epoch))
            for batch in loader:
                self.batch_in_epoch += 1
                yield batch
            self.epoch, self.batch_in_epoch = self.epoch + 1, 0

    # --- training ---------------------------------------------------------------------------------------
    def fit(self, resume: bool | str | os.PathLike = False, until: int | None = None) -> History:
        """Train up to max_steps (or the time budget); ``resume=True`` goes on from the latest checkpoint in
        out_dir if there is one, ``resume=path`` from that checkpoint. ``until``: pause after that step and
        return (saving a checkpoint if out_dir); the schedule still runs to max_steps, and the next fit()
        goes on with the same batches and draws as one uninterrupted run, so a caller can measure the model
        along the way (leaving the random generators as it found them). The time budget counts per call."""
        cfg = self.config
        if until is not None and (not isinstance(until, int) or until < 0):
            raise ValueError(f"until must be a step number >= 0, got {until!r}")
        target = cfg.max_steps if until is None else min(until, cfg.max_steps)
        checkpoint = checkpoint_to_resume(resume, cfg.out_dir, fresh=self.step == 0, is_main=self.is_main)
        if checkpoint is not None:
            self._paused_window = None
            self._load_latest_readable(checkpoint, find_checkpoints(cfg.out_dir) if resume is True else [checkpoint])
        elif self.step == 0:
            seed_everything(cfg.seed + self.rank)  # processes drop out different units
        bar = tqdm(total=cfg.max_steps, initial=self.step, desc="training", dynamic_ncols=True,
                   disable=not (self.is_main and cfg.progress))
        start = time.perf_counter()
        window_start, window_cpu, window_tokens, window_loss, window_steps = start, time.process_time(), 0, 0.0, 0
        if self._paused_window is not None:  # the log window a pause cut goes on, its time without the pause's
            wall, cpu, window_tokens, window_loss, window_steps = self._paused_window
            window_start, window_cpu, self._paused_window = start - wall, window_cpu - cpu, None
        batches = self._micro_batches()
        self.model.train()
        paused = False  # by ``until``: the process group stays for the next fit()
        with self._deferred_interrupt() as interrupted:
            try:
                while self.step < target:
                    lr = self.lr_at(self.step)
                    for group in self.optimizer.param_groups:
                        group["lr"] = lr
                    loss, tokens, seq_len = self._accumulate_gradients(batches)
                    grad_norm = self._optimizer_step()
                    self.step += 1
                    bar.update()
                    window_tokens, window_loss = window_tokens + tokens, window_loss + loss
                    window_steps += 1
                    stopping = interrupted()  # Ctrl-C: end with this update, save, then stop
                    finished = self.step == cfg.max_steps or self._out_of_time(start) or stopping
                    done = finished or self.step == target  # finished, or paused where the caller asked
                    if self.step % cfg.log_every == 0 or finished:
                        seconds = time.perf_counter() - window_start
                        record = {"loss": (window_loss / window_steps).item(), "lr": lr,  # .item() waits for the GPU
                                  "tokens_per_s": window_tokens * self.world_size / seconds,
                                  # CPU time of this process (all its threads): a CPU budget that other jobs do not skew
                                  "cpu_s_per_step": (time.process_time() - window_cpu) / window_steps}
                        if grad_norm is not None:
                            record["grad_norm"] = grad_norm.item()
                        if self.peak_flops and hasattr(self.model, "config"):  # model FLOPs utilisation, per GPU
                            flops_per_s = flops_per_token(self.model, seq_len) * window_tokens / seconds
                            record["mfu"] = flops_per_s / self.peak_flops
                        if not math.isfinite(record["loss"]):
                            raise FloatingPointError(f"the loss is {record['loss']} at step {self.step}: lower lr "
                                                     f"(now {lr:.2e}), keep grad_clip on, or train in bf16/fp32 "
                                                     "rather than fp16")
                        self.history.append(self.step, **record)
                        bar.set_postfix({k: f"{v:.3g}" for k, v in record.items()})
                    if self.eval_data is not None and not stopping and (
                            finished or cfg.eval_every and self.step % cfg.eval_every == 0):
                        metrics = self.evaluate()
                        self.history.append(self.step, **metrics)
                        self._say(bar, f"step {self.step}: " + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
                    if cfg.out_dir and (done or cfg.save_every and self.step % cfg.save_every == 0):
                        self.save_checkpoint()
                    if done:
                        paused = not finished
                        if paused and self.step % cfg.log_every:  # a window not logged yet: the next fit() goes on with it
                            self._paused_window = (time.perf_counter() - window_start, time.process_time() - window_cpu,
                                                   window_tokens, window_loss, window_steps)
                        if finished and self.step < cfg.max_steps:
                            then = "fit(resume=True) goes on from here" if cfg.out_dir else "no out_dir: nothing saved"
                            why = "interrupted" if stopping else f"time budget of {cfg.time_budget_s}s used up"
                            self._say(bar, f"{why} at step {self.step}; {then}")
                        if stopping:
                            raise KeyboardInterrupt(f"stopped at step {self.step}"
                                                    + (f", saved in {cfg.out_dir}" if cfg.out_dir else ""))
                        break
                    if self.step % cfg.log_every == 0:  # a new window; evaluation and saving just now do not count
                        window_start, window_cpu, window_tokens, window_loss, window_steps = (
                            time.perf_counter(), time.process_time(), 0, 0.0, 0)
            finally:
                bar.close()
                if self.owns_process_group and not paused:
                    dist.destroy_process_group()
        return self.history

    @contextmanager
    def _deferred_interrupt(self):
        """Ctrl-C (or a notebook's interrupt) during training ends the update under way, saves a checkpoint
        (when there is an out_dir), then raises KeyboardInterrupt: nothing is lost, and resuming is exact,
        because a checkpoint is only ever taken between two updates. SIGTERM (what `docker stop`, SLURM,
        systemd and `kill` send) and SIGHUP (a closed terminal) do the same. A second signal stops at once.
        Yields a function that says whether an interrupt is waiting."""
        if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
            yield lambda: False
            return
        asked = []

        def on_interrupt(signum, frame):
            if asked:
                raise KeyboardInterrupt
            asked.append(signum)
        previous = {number: signal.signal(number, on_interrupt) for number in STOP_SIGNALS}
        try:
            yield lambda: bool(asked)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def _load_latest_readable(self, checkpoint: Path, kept: list[Path]) -> None:
        """Load ``checkpoint``; if it is damaged (a disk that filled up, a file cut off, weights that had
        diverged), fall back to the kept checkpoints before it, newest first, and say so. Those that failed
        are renamed step-N.damaged once another one loads: pruning must not delete the good checkpoint and
        keep a damaged one, and the next resume must not try it again."""
        candidates = [checkpoint] + [p for p in reversed(kept) if p != checkpoint and p.name < checkpoint.name]
        for k, path in enumerate(candidates):
            try:
                self.load_checkpoint(path)
                break
            except (ValueError, KeyError, OSError, SafetensorError) as e:
                if k == len(candidates) - 1:
                    raise ValueError(f"{path} cannot be resumed from ({e}), and no earlier checkpoint is kept: "
                                     "start a new run in another out_dir") from None
                logger.warning("%s cannot be resumed from (%s); resuming from %s instead", path, e,
                               candidates[k + 1])
        if self.is_main and len(kept) > 1:  # resume=True: the damaged ones are this run's own checkpoints
            for damaged in candidates[:k]:
                if damaged.is_dir():
                    logger.warning("%s set aside as %s", damaged, set_aside(damaged).name)

    def _say(self, bar: tqdm, message: str) -> None:
        if not bar.disable:  # tqdm.write prints above the bar, whichever process calls it
            bar.write(message)

    def _accumulate_gradients(self, batches) -> tuple[Tensor, int, int]:
        """Forward and backward over grad_accum_steps micro-batches; returns (mean loss, tokens, sequence length)."""
        accum = self.config.grad_accum_steps
        total_loss, tokens = torch.zeros((), device=self.device), 0
        for micro_step in range(accum):
            batch = self._next_batch(batches)
            tokens += batch["input_ids"].numel()
            # DDP averages gradients across processes during backward(); once per update is enough.
            last = micro_step == accum - 1
            with nullcontext() if self.world_size == 1 or last else self.forward_model.no_sync():
                with self.autocast:
                    loss = self.forward_model(**batch, **self.model_kwargs).loss
                if loss is None:
                    raise ValueError(f"the model returned no loss: a batch needs its labels (it has {sorted(batch)})")
                loss = loss / accum  # the gradient of the mean over the whole batch, not a sum of means
                self.scaler.scale(loss).backward()
            total_loss += loss.detach()
        return total_loss, tokens, batch["input_ids"].shape[-1]

    def _next_batch(self, batches) -> dict:
        """The next micro-batch on the device. Everything that reads its values (collate_fn, the masked
        positions, `to_device`'s check of the ids) ran on the host; the copy does not wait for the GPU."""
        batch = to_device(next(batches), self.device, getattr(self.model, "config", None))
        for name in ("masked_positions", "packed_positions"):  # N_masked, N vary: one graph for every count
            if self.config.compile and name in batch:
                torch._dynamo.maybe_mark_dynamic(batch[name], 0)
        return batch

    def _optimizer_step(self) -> Tensor | None:
        """Clip, update, clear; returns the gradient norm before clipping."""
        grad_norm = None
        if self.config.grad_clip is not None:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients, not fp16's scaled ones
            grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.scaler.step(self.optimizer)  # fp16: skipped when a gradient overflowed, and the scale shrinks
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm

    def _out_of_time(self, start: float) -> bool:
        if self.config.time_budget_s is None:
            return False
        over = time.perf_counter() - start > self.config.time_budget_s
        if self.world_size > 1:  # process 0 decides: all stop at the same step, or the others would wait forever
            flag = torch.tensor(float(over), device=self.device)
            dist.broadcast(flag, src=0)
            over = bool(flag)
        return over

    def evaluate(self) -> dict[str, float]:
        """`evaluate` on eval_data with this run's settings, the names prefixed ``eval_`` as in the history."""
        cfg = self.config
        metrics = evaluate(self.model, self.eval_data, batch_size=cfg.batch_size, collate_fn=self.collate_fn,
                           metrics_fn=self.metrics_fn, device=self.device, max_batches=cfg.eval_batches,
                           seed=cfg.seed, autocast=self.autocast, rank=self.rank, world_size=self.world_size,
                           num_workers=cfg.num_workers, model_kwargs=self.eval_model_kwargs)
        return {f"eval_{name}": value for name, value in metrics.items()}

    # --- checkpoints ------------------------------------------------------------------------------------
    def save_checkpoint(self) -> Path | None:
        """Write out_dir/step-NNNNNN whole or not at all, keep the last keep_last; every process must call it."""
        rng = [rng_state(self.device)]
        if self.world_size > 1:  # process 0 writes every process's generators
            rng = [None] * self.world_size
            dist.all_gather_object(rng, rng_state(self.device))
        if not self.is_main:
            return None
        broken = not_finite(dict(self.model.named_parameters()))
        if broken:  # never replace a good checkpoint with a diverged one (resume would only fail later)
            raise FloatingPointError(
                f"the weights are not finite numbers (NaN or inf) at step {self.step} ({', '.join(broken[:3])}): "
                f"not saved, so {self.config.out_dir} keeps its last good checkpoint. Resume from it with a lower "
                "lr, keep grad_clip on, or train in bf16/fp32 rather than fp16")
        run = {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
               "world_size": self.world_size, "config": asdict(self.config)}
        return save_checkpoint(self.config.out_dir, self.model, self.optimizer, self.scaler, rng, run, self.history,
                               self.config.keep_last)

    def load_checkpoint(self, path: str | os.PathLike) -> None:
        """Restore weights, optimizer, scaler, generators, data position and history (safetensors + JSON only)."""
        state = load_checkpoint(path, self.model, self.optimizer, self.scaler, self.device, self.rank, self.config.seed)
        if self.is_main:
            warn_about_changes(state, asdict(self.config), self.world_size)
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.history = History(state["history"])
