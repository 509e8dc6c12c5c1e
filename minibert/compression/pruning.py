"""Attention-head pruning: many heads can go with little loss (Michel et al. 2019, "Are Sixteen
Heads Really Better than One?").

A head's importance is how much the loss moves when its output is scaled: with a gate ξ_h = 1 on
each head, I_h = E_x |∂L(x)/∂ξ_h|, a first-order estimate of what removing it costs. Heads are
normalised per layer (as in the paper) and the least important are removed for good with
``BertModel.prune_heads``: smaller weights, fewer multiply-adds, the other heads unchanged.
"""
from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

from ..modes import eval_mode


def head_importance(model: nn.Module, batches: Iterable[dict[str, Tensor]], normalize: bool = True) -> Tensor:
    """(layers, heads) importance of each head on ``batches`` (dicts with labels, as for training).

    Pruned heads score NaN (they are gone). Dropout is off while measuring; the model's weights and
    mode are as before afterwards.
    """
    bert = getattr(model, "bert", model)  # a task model or the bare encoder
    config = bert.config
    if config.share_layers:
        raise ValueError("shared layers have one set of heads for every layer; head importance is per layer")
    device = next(model.parameters()).device
    attentions = [layer.attention for layer in bert.encoder.layer]
    gates = [torch.ones(a.self.num_heads, device=device, requires_grad=True) for a in attentions]
    for attention, gate in zip(attentions, gates):
        attention.self.head_gate = gate
    importance = [torch.zeros(a.self.num_heads, device=device) for a in attentions]
    try:
        with eval_mode(model):
            for batch in batches:
                loss = model(**{k: v.to(device) for k, v in batch.items()}).loss
                if loss is None:
                    raise ValueError("the batches need labels: importance is the gradient of the loss")
                for total, grad in zip(importance, torch.autograd.grad(loss, gates)):
                    total += grad.abs()
    finally:
        for attention in attentions:
            attention.self.head_gate = None
    scores = torch.full((config.num_hidden_layers, config.num_attention_heads), float("nan"))
    for index, (attention, total) in enumerate(zip(attentions, importance)):
        alive = [h for h in range(config.num_attention_heads) if h not in attention.pruned_heads]
        if normalize:  # the paper's l2 normalisation within each layer
            total = total / total.norm().clamp_min(1e-20)
        scores[index, alive] = total.cpu()
    return scores


def least_important(importance: Tensor, fraction: float) -> dict[int, list[int]]:
    """The ``fraction`` of remaining heads with the lowest importance, as {layer: [heads]}, always
    leaving each layer at least one head."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"fraction must be in [0, 1), got {fraction}")
    alive = (~importance.isnan()).nonzero().tolist()
    budget = int(round(fraction * len(alive)))
    left = {layer: int((~importance[layer].isnan()).sum()) for layer in range(importance.size(0))}
    chosen: dict[int, list[int]] = {}
    for layer, head in sorted(alive, key=lambda lh: importance[lh[0], lh[1]].item()):
        if budget == 0:
            break
        if left[layer] > 1:
            chosen.setdefault(layer, []).append(head)
            left[layer] -= 1
            budget -= 1
    return chosen
