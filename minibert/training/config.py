"""How to train, as plain data: a run's settings, checked before the first step."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from .precision import PRECISIONS

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
        check(0 < self.lr < math.inf, f"lr must be a positive number, got {self.lr} (BERT: 1e-4 to pre-train, 2e-5 to "
                                      "5e-5 to fine-tune)")
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

