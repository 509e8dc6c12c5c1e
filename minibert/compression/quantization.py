"""Post-training dynamic int8 quantisation for CPU inference, and the two numbers it is judged by:
size and latency.

``torch.ao.quantization.quantize_dynamic`` stores every ``nn.Linear`` weight in int8 (one scale per
tensor) and quantises the activations on the fly, batch by batch: no calibration data, no
retraining. In BERT the Linear layers hold nearly all multiply-adds outside attention, so CPU
inference gets faster and the weights 4× smaller. (PyTorch now points to torchao for this; the
``torch.ao`` path still ships with the course's torch and needs nothing else.)
"""
from __future__ import annotations

import contextlib
import copy
import io
import statistics
import time
import warnings

import torch
from torch import nn

from ..modes import eval_mode


def quantize_dynamic(model: nn.Module) -> nn.Module:
    """An int8 copy of ``model`` for CPU inference (the original is left as it is)."""
    from torch.ao.quantization import quantize_dynamic as quantize

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the deprecation notice of torch.ao, once per Linear
        return quantize(copy.deepcopy(model).cpu().eval(), {nn.Linear}, dtype=torch.qint8)


def size_mb(model: nn.Module) -> float:
    """Megabytes of the model's serialised state_dict (what saving it would take)."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getbuffer().nbytes / 1e6


def latency_ms(model: nn.Module, inputs: dict[str, torch.Tensor], repeats: int = 10, warmup: int = 2) -> float:
    """Median milliseconds of one forward pass on ``inputs`` (a batch), after ``warmup`` passes: `latencies_ms`
    of one model."""
    return latencies_ms({"model": model}, inputs, rounds=repeats, warmup=warmup)["model"]


@torch.no_grad()
def latencies_ms(models: dict[str, nn.Module], inputs: dict[str, torch.Tensor], rounds: int = 7,
                 warmup: int = 1) -> dict[str, float]:
    """Median milliseconds of one forward pass for each of ``models``, timed **interleaved**: every round
    times each model once, so a machine that gets busier or quieter (another program, the CPU's clock)
    shifts them all alike. Timed one after another, minutes apart, two identical models can differ 2×."""
    times: dict[str, list[float]] = {name: [] for name in models}
    with contextlib.ExitStack() as modes:
        for model in models.values():
            modes.enter_context(eval_mode(model))
        for round_ in range(warmup + rounds):
            for name, model in models.items():
                start = time.perf_counter()
                model(**inputs)
                if round_ >= warmup:
                    times[name].append(time.perf_counter() - start)
    return {name: 1000 * statistics.median(t) for name, t in times.items()}
