"""The control for every head analysis: the same architecture with random weights.

A head that "finds" determiners only means something if an untrained model of the same shape does
not: position embeddings and word identity alone can make attention look structured. So every
number is reported beside the same measurement on a freshly initialised copy (N(0, 0.02) weights,
as BERT starts pre-training).
"""
from __future__ import annotations

import torch


def random_like(model, seed: int = 0):
    """A randomly initialised model of the same class and config, in eval mode on the same device."""
    parameter = next(model.parameters())
    with torch.random.fork_rng(devices=[]):  # seed the copy without touching the caller's random state
        torch.manual_seed(seed)
        control = type(model)(model.config)
    return control.to(device=parameter.device, dtype=parameter.dtype).eval()
