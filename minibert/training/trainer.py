"""One training loop for pre-training and fine-tuning, from a laptop CPU to many GPUs.

The loop is nanoGPT's (karpathy/nanoGPT, train.py) with BERT's recipe (Devlin et al. 2018, §A.2):
AdamW without weight decay on biases and LayerNorm, learning-rate warmup then linear decay,
gradient clipping, and gradient accumulation when a batch does not fit in memory at once. On a
GPU it trains in bf16 autocast (fp16 with a gradient scaler as an option) with TF32 matmuls and
fused AdamW; under ``torchrun`` every process trains a replica through DistributedDataParallel,
which averages the gradients.

A run can stop at any step and go on exactly where it was: a checkpoint holds the weights (the
Hugging Face layout of ``save_pretrained``), the optimizer, the random generators and the position
in the data, so a resumed run ends with bit-identical weights (tested on CPU; on a GPU, kernels that
add in a varying order, such as the embeddings' backward, make it close rather than bitwise).
Checkpoints are safetensors + JSON, so loading one never runs code, and each appears whole or not at all.

    config = TrainConfig(max_steps=1000, batch_size=32, lr=1e-4, out_dir="runs/mlm", eval_every=100)
    history = Trainer(model, config, train_data, eval_data).fit(resume=True)
    history.plot()
"""
from __future__ import annotations

import json
import logging
import math
import os
import random
import shutil
import time
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler, default_collate
from tqdm.auto import tqdm

from ..atomic import atomic_path
from ..hub import tied_aliases

logger = logging.getLogger("minibert")

PRECISIONS = ("auto", "bf16", "fp16", "fp32")
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# Dense bf16/fp16 tensor-core peak per GPU, from the vendors' data sheets; first matching name wins.
PEAK_FLOPS = {"H100 PCIe": 756e12, "H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12,
              "L4": 121e12, "V100": 125e12, "T4": 65e12}
# Config fields that may change between a run and its resumption without changing the result.
RESUME_SAFE_FIELDS = {"out_dir", "time_budget_s", "progress", "device", "num_workers", "keep_last",
                      "save_every", "log_every", "eval_every", "eval_batches", "compile"}


@dataclass
class TrainConfig:
    """How to train, as plain data. One update sees batch_size × grad_accum_steps × processes examples."""
    max_steps: int = 1000                 # optimizer updates
    batch_size: int = 32                  # examples per micro-batch and process
    grad_accum_steps: int = 1             # micro-batches whose gradients add up to one update
    lr: float = 1e-4                      # peak learning rate: BERT pre-training 1e-4, fine-tuning 2e-5 to 5e-5
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-6                     # BERT's Adam epsilon
    warmup_steps: int | None = None       # linear warmup; None: warmup_ratio × max_steps
    warmup_ratio: float = 0.1
    grad_clip: float | None = 1.0         # largest global gradient norm; None: no clipping
    precision: str = "auto"               # auto: bf16 on CUDA (fp16 on GPUs without bf16), fp32 elsewhere
    compile: bool = False                 # torch.compile: faster steps on a GPU after a minute of compiling
    device: str = "auto"                  # auto: CUDA, then Apple's MPS, then CPU
    num_workers: int = 0                  # DataLoader worker processes (see Trainer on what >0 implies)
    group_by_length: bool = False         # batches of similar lengths: less padding (fine-tuning on a CPU)
    eval_every: int | None = None         # None: evaluate once, at the end
    eval_batches: int | None = None       # None: the whole eval set
    log_every: int = 10
    progress: bool = True                 # a tqdm bar (a widget in notebooks, text in terminals)
    out_dir: str | None = None            # None: no checkpoints
    save_every: int | None = None         # None: save at the end (and when the time budget runs out)
    keep_last: int = 2                    # checkpoints kept; older ones are deleted
    time_budget_s: float | None = None    # stop (and save) after this many seconds of fit()
    seed: int = 0

    def __post_init__(self):
        # Plain JSON-able values (a checkpoint stores the config): Path -> str, torch.device -> str, list -> tuple.
        self.out_dir = None if self.out_dir is None else os.fspath(self.out_dir)
        self.device, self.betas = str(self.device), tuple(self.betas)
        self.validate()

    @property
    def num_warmup_steps(self) -> int:
        return self.warmup_steps if self.warmup_steps is not None else round(self.warmup_ratio * self.max_steps)

    def validate(self) -> None:
        """Fail before the first step, with the fix in the message."""
        def check(ok: bool, message: str):
            if not ok:
                raise ValueError(f"TrainConfig: {message}")
        for name in ("max_steps", "batch_size", "grad_accum_steps", "log_every", "keep_last"):
            value = getattr(self, name)
            check(isinstance(value, int) and value >= 1, f"{name} must be a positive integer, got {value!r}")
        for name in ("eval_every", "eval_batches", "save_every"):
            value = getattr(self, name)
            check(value is None or (isinstance(value, int) and value >= 1),
                  f"{name} must be a positive integer or None (never / all), got {value!r}")
        check(self.lr > 0, f"lr must be positive, got {self.lr} (BERT: 1e-4 to pre-train, 2e-5 to 5e-5 to fine-tune)")
        check(self.weight_decay >= 0, f"weight_decay must be >= 0, got {self.weight_decay}")
        check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
              f"betas must be two numbers in [0, 1), got {self.betas} (the usual: (0.9, 0.999))")
        check(self.eps > 0, f"eps must be positive, got {self.eps}")
        check(0 <= self.warmup_ratio < 1, f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        check(self.warmup_steps is None or 0 <= self.warmup_steps <= self.max_steps,
              f"warmup_steps must be between 0 and max_steps ({self.max_steps}), got {self.warmup_steps}")
        check(self.grad_clip is None or self.grad_clip > 0,
              f"grad_clip must be positive, or None for no clipping, got {self.grad_clip}")
        check(self.precision in PRECISIONS, f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        check(self.device == "auto" or self.device.split(":")[0] in ("cpu", "cuda", "mps"),
              f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps', got {self.device!r}")
        check(self.num_workers >= 0, f"num_workers must be >= 0, got {self.num_workers}")
        check(self.time_budget_s is None or self.time_budget_s > 0,
              f"time_budget_s must be positive seconds, or None for no limit, got {self.time_budget_s}")


def learning_rate(step: int, peak: float, warmup: int, total: int) -> float:
    """BERT's schedule: linear warmup to ``peak`` over ``warmup`` updates, then linear decay to 0 at ``total``.

    ``step`` counts the updates already made, so the first update uses peak / warmup, not 0.
    """
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * max(total - step, 0) / max(total - warmup, 1)


def make_optimizer(model: nn.Module, config: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW that decays matrices only: biases and LayerNorm gains (the 1-D tensors) keep weight_decay 0, as in BERT.

    Fused AdamW (one kernel for all parameters) where it is supported and fast: CUDA.
    """
    params = [p for p in model.parameters() if p.requires_grad]  # tied weights appear once
    if not params:
        raise ValueError("the model has no trainable parameters (every requires_grad is False)")
    groups = [{"name": "decay", "params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
              {"name": "no_decay", "params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.lr, betas=config.betas, eps=config.eps, fused=device.type == "cuda")


def pick_device(choice: str = "auto", local_rank: int = 0) -> torch.device:
    if choice == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", local_rank)
        return torch.device("mps" if torch.backends.mps.is_available() else "cpu")
    device = torch.device(choice)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={choice!r} but PyTorch sees no CUDA GPU; use device='auto' or 'cpu'")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device={choice!r} but Apple's MPS is not available here; use device='auto' or 'cpu'")
    return torch.device("cuda", local_rank) if device.type == "cuda" and device.index is None else device


def pick_precision(choice: str, device: torch.device) -> str:
    """auto: bf16 on CUDA GPUs that have it, fp16 + gradient scaler on older ones, fp32 elsewhere (CPU bf16
    is slow on most laptops, but can be asked for); fp16 only on CUDA, where its gradient scaler belongs."""
    if choice == "auto":
        if device.type != "cuda":
            return "fp32"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if choice == "fp16" and device.type != "cuda":
        raise ValueError(f"precision='fp16' needs a CUDA GPU (fp16 training needs a gradient scaler, made for "
                         f"GPUs); on {device.type} use precision='fp32', or 'bf16' where the processor supports it")
    if choice == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError(f"{torch.cuda.get_device_name(device)} has no bf16; use precision='fp16' or 'fp32'")
    return choice


def peak_flops(device_name: str) -> float | None:
    return next((flops for key, flops in PEAK_FLOPS.items() if key in device_name), None)


def flops_per_token(model: nn.Module, seq_len: int) -> float:
    """Training FLOPs per token ≈ 6N (forward 2N, backward 4N per parameter) + 12·L·H·T for attention's
    QKᵀ and AV, which have no parameters (PaLM, Appendix B; nanoGPT's estimate_mfu)."""
    n_params = sum(p.numel() for p in model.parameters())
    return 6 * n_params + 12 * model.config.num_hidden_layers * model.config.hidden_size * seq_len


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


def find_checkpoints(out_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints, oldest first: a folder step-N only ever appears fully written."""
    folders = [p for p in Path(out_dir).glob("step-*") if p.is_dir() and p.name[5:].isdigit()]
    return sorted(folders, key=lambda p: int(p.name[5:]))


class History:
    """What a run did: one record per log step or evaluation, a list of plain dicts that plot and save as JSON.

    e.g. {"step": 100, "loss": 2.3, "lr": 1e-4, "grad_norm": 0.9, "tokens_per_s": 5e4} or {"step": 100, "eval_loss": 2.4}
    """

    def __init__(self, records: list[dict] | None = None):
        self.records = list(records or [])

    def __len__(self) -> int:
        return len(self.records)

    def append(self, step: int, **values: float) -> None:
        self.records.append({"step": step, **values})

    def series(self, key: str) -> tuple[list[int], list[float]]:
        """(steps, values) of the records that have ``key``: ready for plt.plot."""
        rows = [r for r in self.records if key in r]
        return [r["step"] for r in rows], [r[key] for r in rows]

    def last(self, key: str) -> float | None:
        values = self.series(key)[1]
        return values[-1] if values else None

    def plot(self):
        """Loss (train and eval), learning rate and any other eval metric against the step; returns the figure."""
        import matplotlib.pyplot as plt
        metrics = sorted({k for r in self.records for k in r if k.startswith("eval_") and k != "eval_loss"})
        fig, axes = plt.subplots(1, 2 + bool(metrics), figsize=(5 * (2 + bool(metrics)), 3.5), squeeze=False)
        loss_ax, lr_ax = axes[0, 0], axes[0, 1]
        loss_ax.plot(*self.series("loss"), label="train")
        if self.last("eval_loss") is not None:
            loss_ax.plot(*self.series("eval_loss"), "o-", label="eval")
        loss_ax.set(xlabel="step", ylabel="loss", title="loss")
        loss_ax.legend()
        lr_ax.plot(*self.series("lr"))
        lr_ax.set(xlabel="step", ylabel="learning rate", title="learning rate")
        for name in metrics:
            axes[0, 2].plot(*self.series(name), "o-", label=name.removeprefix("eval_"))
        if metrics:
            axes[0, 2].set(xlabel="step", title="eval metrics")
            axes[0, 2].legend()
        fig.tight_layout()
        return fig

    def to_json(self, path: str | os.PathLike) -> None:
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(self.records, indent=1) + "\n")

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "History":
        return cls(json.loads(Path(path).read_text()))


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


class Trainer:
    """Trains ``model`` (any minibert model: ``model(**batch).loss`` given labels) on a map-style Dataset.

    Batches are dicts of tensors: the model's keyword arguments, labels included (``collate_fn``
    makes them from a list of examples; default: stack the examples' tensors). Each epoch visits
    the examples in a permutation seeded by (seed, epoch), so the position in the data is
    (epoch, batches done) and a resumed run skips what it used without loading it. ``collate_fn``
    may draw from torch / numpy / Python random (dynamic masking): checkpoints save those
    generators. With num_workers > 0 it runs in worker processes whose generators are seeded per
    epoch and not saved: runs stay reproducible from scratch, but a resumed run draws other masks.

    ``metrics_fn(outputs, batch) -> {"accuracy": 0.9}`` adds numbers to each evaluation.
    Under ``torchrun`` the Trainer joins the process group (nccl on GPUs, gloo on CPUs), each process
    reads its share of every batch, and process 0 writes checkpoints, which must be on a file system
    all nodes see to resume a multi-node run; fit() leaves the process group when it is done.
    """

    def __init__(self, model: nn.Module, config: TrainConfig, train_data: Dataset, eval_data: Dataset | None = None,
                 collate_fn=None, metrics_fn=None):
        config.validate()
        self.config, self.train_data, self.eval_data = config, train_data, eval_data
        self.collate_fn, self.metrics_fn = collate_fn or default_collate, metrics_fn
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

    def lr_at(self, step: int) -> float:
        return learning_rate(step, self.config.lr, self.config.num_warmup_steps, self.config.max_steps)

    # --- data -------------------------------------------------------------------------------------------
    def _loader(self, data: Dataset, indices: list[int], epoch: int, drop_last: bool) -> DataLoader:
        # The loader's own generator: without one, every new DataLoader iterator draws from the global
        # torch generator, so a resumed run would draw one number more than an uninterrupted one.
        return DataLoader(data, self.config.batch_size, sampler=indices, collate_fn=self.collate_fn,
                          drop_last=drop_last, num_workers=self.config.num_workers,
                          pin_memory=self.device.type == "cuda",
                          generator=torch.Generator().manual_seed(self.config.seed + epoch))

    def _micro_batches(self):
        """Micro-batches forever, epoch after epoch; (epoch, batch_in_epoch) is the position a checkpoint keeps."""
        while True:
            sampler = DistributedSampler(self.train_data, self.world_size, self.rank, shuffle=True,
                                         seed=self.config.seed, drop_last=True)
            sampler.set_epoch(self.epoch)  # permutation seeded by seed + epoch; process r takes every r-th index
            indices = list(sampler)
            if self.config.group_by_length:
                indices = group_by_length(indices, self._lengths(), self.config.batch_size, self.config.seed + self.epoch)
            skipped = self.batch_in_epoch * self.config.batch_size
            for batch in self._loader(self.train_data, indices[skipped:], self.epoch, drop_last=True):
                self.batch_in_epoch += 1
                yield batch
            self.epoch, self.batch_in_epoch = self.epoch + 1, 0

    def _lengths(self) -> list[int]:
        """Tokens in each training example (its ``input_ids``), counted once."""
        if getattr(self, "_example_lengths", None) is None:
            data = self.train_data
            if hasattr(data, "column_names") and "input_ids" in data.column_names:  # a datasets.Dataset: one column
                ids = data["input_ids"]
            elif isinstance(getattr(data, "input_ids", None), list):               # e.g. SquadFeatures
                ids = data.input_ids
            else:
                ids = (data[i]["input_ids"] for i in range(len(data)))
            self._example_lengths = [len(x) for x in ids]
        return self._example_lengths

    def _to_device(self, batch) -> dict:
        if not isinstance(batch, dict):
            raise TypeError(f"a batch must be a dict of tensors (the model's keyword arguments and labels), got "
                            f"{type(batch).__name__}; return dicts from the dataset or from collate_fn")
        return {k: v.to(self.device, non_blocking=True) if isinstance(v, Tensor) else v for k, v in batch.items()}

    # --- training ---------------------------------------------------------------------------------------
    def fit(self, resume: bool | str | os.PathLike = False) -> History:
        """Train up to max_steps (or the time budget); ``resume=True`` goes on from the latest checkpoint in
        out_dir if there is one, ``resume=path`` from that checkpoint."""
        cfg = self.config
        checkpoint = self._checkpoint_to_resume(resume)
        if checkpoint is not None:
            self.load_checkpoint(checkpoint)
        elif self.step == 0:
            seed_everything(cfg.seed + self.rank)  # processes drop out different units
        bar = tqdm(total=cfg.max_steps, initial=self.step, desc="training", dynamic_ncols=True,
                   disable=not (self.is_main and cfg.progress))
        start = time.perf_counter()
        window_start, window_tokens, window_loss, window_steps = start, 0, 0.0, 0
        batches = self._micro_batches()
        self.model.train()
        try:
            while self.step < cfg.max_steps:
                lr = self.lr_at(self.step)
                for group in self.optimizer.param_groups:
                    group["lr"] = lr
                loss, tokens, seq_len = self._accumulate_gradients(batches)
                grad_norm = self._optimizer_step()
                self.step += 1
                bar.update()
                window_tokens, window_loss, window_steps = window_tokens + tokens, window_loss + loss, window_steps + 1
                done = self.step == cfg.max_steps or self._out_of_time(start)
                if self.step % cfg.log_every == 0 or done:
                    seconds = time.perf_counter() - window_start
                    record = {"loss": (window_loss / window_steps).item(), "lr": lr,  # .item() waits for the GPU
                              "tokens_per_s": window_tokens * self.world_size / seconds}
                    if grad_norm is not None:
                        record["grad_norm"] = grad_norm.item()
                    if self.peak_flops and hasattr(self.model, "config"):  # model FLOPs utilisation, per GPU
                        flops_per_s = flops_per_token(self.model, seq_len) * window_tokens / seconds
                        record["mfu"] = flops_per_s / self.peak_flops
                    if not math.isfinite(record["loss"]):
                        raise FloatingPointError(f"the loss is {record['loss']} at step {self.step}: lower lr (now "
                                                 f"{lr:.2e}), keep grad_clip on, or train in bf16/fp32 rather than fp16")
                    self.history.append(self.step, **record)
                    bar.set_postfix({k: f"{v:.3g}" for k, v in record.items()})
                if self.eval_data is not None and (done or cfg.eval_every and self.step % cfg.eval_every == 0):
                    metrics = self.evaluate()
                    self.history.append(self.step, **metrics)
                    self._say(bar, f"step {self.step}: " + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
                if cfg.out_dir and (done or cfg.save_every and self.step % cfg.save_every == 0):
                    self.save_checkpoint()
                if done:
                    if self.step < cfg.max_steps:
                        then = "fit(resume=True) goes on from here" if cfg.out_dir else "no out_dir: nothing saved"
                        self._say(bar, f"time budget of {cfg.time_budget_s}s used up at step {self.step}; {then}")
                    break
                if self.step % cfg.log_every == 0:  # a new window; evaluation and saving just now do not count
                    window_start, window_tokens, window_loss, window_steps = time.perf_counter(), 0, 0.0, 0
        finally:
            bar.close()
            if self.owns_process_group:
                dist.destroy_process_group()
        return self.history

    def _say(self, bar: tqdm, message: str) -> None:
        if not bar.disable:  # tqdm.write prints above the bar, whichever process calls it
            bar.write(message)

    def _accumulate_gradients(self, batches) -> tuple[Tensor, int, int]:
        """Forward and backward over grad_accum_steps micro-batches; returns (mean loss, tokens, sequence length)."""
        accum = self.config.grad_accum_steps
        total_loss, tokens = torch.zeros((), device=self.device), 0
        for micro_step in range(accum):
            batch = self._to_device(next(batches))
            tokens += batch["input_ids"].numel()
            # DDP averages gradients across processes during backward(); once per update is enough.
            last = micro_step == accum - 1
            with nullcontext() if self.world_size == 1 or last else self.forward_model.no_sync():
                with self.autocast:
                    loss = self.forward_model(**batch).loss
                if loss is None:
                    raise ValueError(f"the model returned no loss: a batch needs its labels (it has {sorted(batch)})")
                loss = loss / accum  # the gradient of the mean over the whole batch, not a sum of means
                self.scaler.scale(loss).backward()
            total_loss += loss.detach()
        return total_loss, tokens, batch["input_ids"].shape[-1]

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

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Mean loss and metrics_fn's numbers over eval_data, weighted by examples, with dropout off.

        Evaluation draws from generators seeded the same way every time (the same masks at every
        evaluation, comparable numbers) and leaves training's generators as they were.
        """
        cfg = self.config
        sampler = DistributedSampler(self.eval_data, self.world_size, self.rank, shuffle=False)
        totals, examples = {}, 0
        self.model.eval()
        with isolated_rng(cfg.seed + self.rank, self.device):
            for i, batch in enumerate(self._loader(self.eval_data, list(sampler), 0, drop_last=False)):
                if cfg.eval_batches is not None and i == cfg.eval_batches:
                    break
                batch = self._to_device(batch)
                with self.autocast:
                    outputs = self.model(**batch)
                n = len(batch["input_ids"])
                values = {"loss": outputs.loss, **(self.metrics_fn(outputs, batch) if self.metrics_fn else {})}
                for name, value in values.items():
                    if value is not None:  # no loss without every label (MLM+NSP model, MLM-only data)
                        totals[name] = totals.get(name, 0.0) + float(value) * n
                examples += n
        self.model.train()
        sums = torch.tensor([examples, *totals.values()], dtype=torch.float64, device=self.device)
        if self.world_size > 1:
            dist.all_reduce(sums)
        return {f"eval_{name}": (total / sums[0]).item() for name, total in zip(totals, sums[1:])}

    # --- checkpoints ------------------------------------------------------------------------------------
    def _checkpoint_to_resume(self, resume: bool | str | os.PathLike) -> Path | None:
        out_dir = self.config.out_dir
        if resume is False:
            if out_dir and self.step == 0 and find_checkpoints(out_dir):
                raise ValueError(f"{out_dir} already holds checkpoints of a run; fit(resume=True) continues it, "
                                 "or choose another out_dir (or delete the old one) to start afresh")
            return None
        if resume is True:
            if not out_dir:
                raise ValueError("fit(resume=True) looks for checkpoints in config.out_dir, which is None")
            checkpoints = find_checkpoints(out_dir)
            if not checkpoints and self.is_main:
                logger.info("no checkpoint in %s yet: training from scratch", out_dir)
            return checkpoints[-1] if checkpoints else None
        if not (Path(resume) / "trainer_state.json").exists():
            raise FileNotFoundError(f"{resume} is not a checkpoint folder (a step-NNNNNN folder that fit() wrote)")
        return Path(resume)

    def save_checkpoint(self) -> Path | None:
        """Write out_dir/step-NNNNNN whole or not at all, keep the last keep_last; every process must call it."""
        rng = [rng_state(self.device)]
        if self.world_size > 1:  # process 0 writes every process's generators
            rng = [None] * self.world_size
            dist.all_gather_object(rng, rng_state(self.device))
        if not self.is_main:
            return None
        out_dir = Path(self.config.out_dir)
        final = out_dir / f"step-{self.step:06d}"
        for stale in out_dir.glob(".step-*.tmp"):  # what a killed process left half-written
            shutil.rmtree(stale)
        tmp = out_dir / f".{final.name}.tmp"  # hidden, and not a step-N: never taken for a checkpoint
        try:
            self.model.save_pretrained(tmp)
            optimizer = self.optimizer.state_dict()
            tensors = {f"optimizer.{index}.{name}": value.detach().cpu()
                       for index, state in optimizer["state"].items() for name, value in state.items()}
            tensors |= {f"rng.{rank}.{name}": t for rank, (rank_tensors, _) in enumerate(rng)
                        for name, t in rank_tensors.items()}
            save_file(tensors, tmp / "trainer_state.safetensors")
            state = {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                     "world_size": self.world_size, "config": asdict(self.config),
                     "optimizer_param_groups": optimizer["param_groups"], "scaler": self.scaler.state_dict(),
                     "rng": [values for _, values in rng], "history": self.history.records}
            (tmp / "trainer_state.json").write_text(json.dumps(state, indent=1) + "\n")
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)  # one atomic rename: the checkpoint appears complete
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        for old in find_checkpoints(out_dir)[:-self.config.keep_last]:
            shutil.rmtree(old)
        self.history.to_json(out_dir / "history.json")
        return final

    def load_checkpoint(self, path: str | os.PathLike) -> None:
        """Restore weights, optimizer, scaler, generators, data position and history (safetensors + JSON only)."""
        path = Path(path)
        state = json.loads((path / "trainer_state.json").read_text())
        tensors = load_file(path / "trainer_state.safetensors")
        missing, unexpected = self.model.load_state_dict(load_file(path / "model.safetensors"), strict=False)
        missing = set(missing) - set(tied_aliases(self.model))  # the tied MLM decoder is stored once
        if missing or unexpected:
            raise ValueError(f"{path} holds another model's weights: missing {sorted(missing)}, "
                             f"unexpected {sorted(unexpected)}")
        optimizer_state = {}
        for key, value in tensors.items():
            if key.startswith("optimizer."):
                _, index, name = key.split(".", 2)
                optimizer_state.setdefault(int(index), {})[name] = value
        groups = [{**group, "betas": tuple(group["betas"])} for group in state["optimizer_param_groups"]]
        self.optimizer.load_state_dict({"state": optimizer_state, "param_groups": groups})
        self.scaler.load_state_dict(state["scaler"])
        prefix = f"rng.{self.rank}."
        mine = {k.removeprefix(prefix): v for k, v in tensors.items() if k.startswith(prefix)}
        if mine:
            set_rng_state(mine, state["rng"][self.rank], self.device)
        else:
            seed_everything(self.config.seed + self.rank + state["step"])
        if self.is_main:
            if state["world_size"] != self.world_size:
                logger.warning("resuming a %d-process run on %d processes: the data order and random draws "
                               "differ from an uninterrupted run", state["world_size"], self.world_size)
            now = json.loads(json.dumps(asdict(self.config)))
            changed = [k for k, v in state["config"].items() if k not in RESUME_SAFE_FIELDS and now.get(k) != v]
            if changed:
                logger.warning("resuming with changed %s: the run will differ from an uninterrupted one",
                               ", ".join(f"{k} ({state['config'][k]} -> {now.get(k)})" for k in changed))
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.history = History(state["history"])
