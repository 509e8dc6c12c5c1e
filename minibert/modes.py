"""A model in eval mode for a block of code, and back in the mode it was in afterwards.

Scoring, probing and drawing attention all need dropout off, but a caller may hand over a model in the
middle of its training: switching it to eval and leaving it there would silently train the rest of the
run without dropout. One context manager instead of a try/finally in every such function."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """``with eval_mode(model):`` dropout off inside; the model's own train/eval mode restored after, even
    when the block raises. Gradients are the caller's choice (add ``torch.no_grad()`` where none are needed)."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
