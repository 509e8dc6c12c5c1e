"""BERT's optimizer recipe (Devlin et al. 2018, §A.2): Adam with weight decay 0.01, learning-rate
warmup over the first updates, then linear decay of the learning rate to zero."""
from __future__ import annotations

import torch
from torch import nn

from .config import TrainConfig


def warmup_linear_decay(step: int, peak: float, warmup: int, total: int) -> float:
    """The learning rate of update ``step``: linear warmup to ``peak`` over ``warmup`` updates, then linear
    decay to 0 at ``total`` (transformers' ``get_linear_schedule_with_warmup``).

    Warmup keeps Adam's first, poorly estimated steps small. ``step`` counts the updates already
    made, so the first update uses peak / warmup, not 0.
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
