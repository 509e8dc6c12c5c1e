"""What pre-training reports besides its loss: each objective's loss and accuracy, apart."""
from __future__ import annotations

import torch.nn.functional as F

from ..heads import IGNORE_INDEX


def pretraining_metrics(outputs, batch) -> dict[str, float]:
    """MLM loss and accuracy over the masked positions and, with NSP/SOP, that task's loss and accuracy.

    The model's own loss is their sum; apart, they show which objective is learning. The MLM logits
    are the head's ``masked_logits`` (N_masked, V) when it computed only those, else its full (B, T, V)
    logits at the masked positions, in the same row-major order.
    """
    labels = batch["labels"]
    masked = labels != IGNORE_INDEX                                            # (B, T)
    logits = getattr(outputs, "masked_logits", None)
    if logits is None:
        full = getattr(outputs, "prediction_logits", None)                     # BertForPreTraining
        logits = (outputs.logits if full is None else full)[masked]            # (N_masked, V)
    targets = labels[masked]
    metrics = {"mlm_loss": F.cross_entropy(logits.float(), targets).item(),
               "mlm_accuracy": (logits.argmax(-1) == targets).float().mean().item()}
    if "next_sentence_label" in batch:
        nsp_logits, nsp_labels = outputs.seq_relationship_logits.float(), batch["next_sentence_label"]
        metrics["nsp_loss"] = F.cross_entropy(nsp_logits, nsp_labels).item()
        metrics["nsp_accuracy"] = (nsp_logits.argmax(-1) == nsp_labels).float().mean().item()
    return metrics
