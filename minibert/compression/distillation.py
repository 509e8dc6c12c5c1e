"""Knowledge distillation: a small student learns from a large teacher's soft targets (Hinton et al. 2015).

The teacher's probabilities say more than its label: that a review is 70% positive, or which wrong
answers are nearly right. Softening both distributions with a temperature T > 1 brings that out:

    L = α · T² · KL(softmax(z_t / T) ‖ softmax(z_s / T)) + (1 − α) · CE(z_s, y)

T² keeps the soft term's gradients the same size whatever T is (they shrink as 1/T²). DistilBERT
(Sanh et al. 2019) starts the student from every other layer of the teacher, which
``student_from_teacher`` does for any choice of layers.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..outputs import TaskOutput


def distillation_loss(student_logits: Tensor, teacher_logits: Tensor, labels: Tensor | None = None,
                      temperature: float = 2.0, alpha: float = 0.5) -> Tensor:
    """α·T²·KL(teacher ‖ student) at temperature T, plus (1 − α)·cross-entropy with the labels.

    Logits are (N, C); without labels (or with α = 1) only the soft term counts. The teacher's
    logits are a fixed target: no gradient flows back into them.
    """
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(f"student logits {tuple(student_logits.shape)} and teacher logits "
                         f"{tuple(teacher_logits.shape)} must have the same shape (the same classes)")
    if temperature <= 0 or not 0.0 <= alpha <= 1.0:
        raise ValueError(f"need temperature > 0 and 0 <= alpha <= 1, got T={temperature}, alpha={alpha}")
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=-1),
                    F.log_softmax(teacher_logits.detach() / temperature, dim=-1),
                    reduction="batchmean", log_target=True) * temperature ** 2
    if labels is None or alpha == 1.0:
        return soft
    return alpha * soft + (1 - alpha) * F.cross_entropy(student_logits, labels.view(-1))


class Distiller(nn.Module):
    """The student with a frozen teacher beside it, so the course's ``Trainer`` can train it as is:
    ``forward`` returns the student's logits and the distillation loss. Only the student's
    parameters require gradients, so only they reach the optimizer; ``student`` is what to keep."""

    def __init__(self, student: nn.Module, teacher: nn.Module, temperature: float = 2.0, alpha: float = 0.5):
        super().__init__()
        self.student, self.teacher = student, teacher.eval().requires_grad_(False)
        self.temperature, self.alpha = temperature, alpha

    def train(self, mode: bool = True) -> "Distiller":
        self.student.train(mode)  # the teacher stays in eval mode: no dropout in its targets
        self.training = mode
        return self

    def forward(self, labels: Tensor | None = None, **inputs) -> TaskOutput:
        with torch.no_grad():
            teacher_logits = self.teacher(**inputs).logits
        logits = self.student(**inputs).logits
        return TaskOutput(logits, distillation_loss(logits, teacher_logits, labels, self.temperature, self.alpha))


def student_from_teacher(teacher: nn.Module, layers: list[int]) -> nn.Module:
    """A copy of ``teacher`` keeping only the encoder layers ``layers`` (e.g. [0, 2, 4] of 6, as
    DistilBERT does), with the embeddings, pooler and task head unchanged."""
    config = teacher.config
    if config.share_layers:
        raise ValueError("an ALBERT-style teacher shares one layer; set num_hidden_layers instead")
    if not layers or any(not 0 <= i < config.num_hidden_layers for i in layers):
        raise ValueError(f"layers must be a non-empty list of indices in [0, {config.num_hidden_layers}), got {layers}")
    pruned = {new: config.pruned_heads[old] for new, old in enumerate(layers) if old in config.pruned_heads}
    student = type(teacher)(config.replace(num_hidden_layers=len(layers), pruned_heads=pruned))
    shared = {k: v for k, v in teacher.state_dict().items() if "encoder.layer." not in k}
    missing = student.load_state_dict(shared, strict=False).missing_keys  # embeddings, pooler, task head
    assert all("encoder.layer." in k for k in missing), missing             # only the layers are left
    student_layers, teacher_layers = (getattr(m, "bert", m).encoder.layer for m in (student, teacher))
    for new, old in enumerate(layers):
        student_layers[new].load_state_dict(teacher_layers[old].state_dict())
    return student.to(next(teacher.parameters()).device)

