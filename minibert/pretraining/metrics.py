"""What pre-training reports besides its loss: each objective's loss and accuracy, apart."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..heads import IGNORE_INDEX
from ..modes import eval_mode
from ..padding import pad, pad_with_mask


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
    if hasattr(train_examples, "token_counts"):  # `SpanExamples`: counted from the corpus, nothing made
        counts = torch.from_numpy(train_examples.token_counts(vocab_size)).double()              # (V,)
    else:
        counts = torch.bincount(torch.tensor([i for e in train_examples for i in e["input_ids"]]),
                                minlength=vocab_size).double()                                   # (V,)
    log_frequency = (counts.clamp_min(1) / counts.sum()).log()
    labels = torch.tensor([y for e in eval_examples for y in e["labels"] if y != IGNORE_INDEX])
    if len(labels) == 0:
        raise ValueError("the held-out examples have no masked positions (labels); make them with "
                         "fill_in_the_blank_data")
    return -log_frequency[labels].mean().item()



@torch.no_grad()
def next_sentence_accuracy(model, examples, pad_token_id: int = 0, batch_size: int = 64) -> float:
    """How often a ``BertForPreTraining`` (or ``ModernBertForPreTraining``) tells IsNext from NotNext (or, trained
    with SOP, the order) on sentence pairs as a user writes them: every token as it is, none masked.

    ``examples``: dicts with ``input_ids``, ``token_type_ids`` and ``next_sentence_label`` (`build_pretraining_data`
    with ``objective="nsp"``). The masked-LM decoder, a (B, T, V) tensor, is not needed for this: it is given
    no positions to decode.
    """
    device = next(model.parameters()).device
    correct = 0
    with eval_mode(model):
        for start in range(0, len(examples), batch_size):
            batch = examples[start:start + batch_size]
            ids, mask = pad_with_mask([e["input_ids"] for e in batch], pad_token_id)           # (B, T) each
            inputs = {"input_ids": ids, "attention_mask": mask,
                      "token_type_ids": pad([e["token_type_ids"] for e in batch], 0)}
            nowhere = torch.zeros(0, dtype=torch.long, device=device)                          # no MLM positions
            out = model(**{k: v.to(device) for k, v in inputs.items()}, masked_positions=nowhere)
            guesses = out.seq_relationship_logits.argmax(-1).cpu()                              # (B,)
            correct += int((guesses == torch.tensor([e["next_sentence_label"] for e in batch])).sum())
    return correct / len(examples)
