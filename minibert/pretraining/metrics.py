"""What pre-training reports besides its loss: each objective's loss and accuracy, apart."""
from __future__ import annotations

import torch
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
    top5 = logits.topk(min(5, logits.shape[-1]), dim=-1).indices                 # (N_masked, 5)
    metrics = {"mlm_loss": F.cross_entropy(logits.float(), targets).item(),
               "mlm_accuracy": (top5[:, 0] == targets).float().mean().item(),
               "mlm_top5": (top5 == targets[:, None]).any(-1).float().mean().item()}
    if "next_sentence_label" in batch:
        nsp_logits, nsp_labels = outputs.seq_relationship_logits.float(), batch["next_sentence_label"]
        metrics["nsp_loss"] = F.cross_entropy(nsp_logits, nsp_labels).item()
        metrics["nsp_accuracy"] = (nsp_logits.argmax(-1) == nsp_labels).float().mean().item()
    return metrics


def unigram_loss(train_examples, eval_examples, vocab_size: int) -> float:
    """The unigram plateau: held-out MLM loss (nats) of always answering with the training text's token
    frequencies, whatever the context.

    A fresh model finds this answer within a few hundred updates and can sit on it for a long time:
    the loss falls fast to here and then hardly moves, and every blank gets "the". Only a model
    below this line reads the words around the blank.
    """
    counts = torch.bincount(torch.tensor([i for e in train_examples for i in e["input_ids"]]),
                            minlength=vocab_size).double()                                       # (V,)
    log_frequency = (counts.clamp_min(1) / counts.sum()).log()
    labels = torch.tensor([y for e in eval_examples for y in e["labels"] if y != IGNORE_INDEX])
    if len(labels) == 0:
        raise ValueError("the held-out examples have no masked positions (labels); make them with "
                         "fill_in_the_blank_data")
    return -log_frequency[labels].mean().item()

