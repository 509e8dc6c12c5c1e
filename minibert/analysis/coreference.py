"""Do attention heads resolve pronouns? Clark et al. (2019, §4.3) found a head (5-4 in BERT-base) whose
coreferent mentions attend to their antecedents.

On GAP each pronoun has two candidate names and exactly one is its antecedent (rows with neither
are left out and counted). A head is right on an example when the pronoun attends more to the true
antecedent than to the other name. As in Clark et al., a mention is represented by its head word,
here the name's last word with a letter (English names are head-final: "Kathleen Nott" -> "Nott"); attention
from the pronoun is the mean over its pieces and attention to the head word the sum over its pieces,
as in `word_attention`. With two candidates, chance is 50%.

Baselines (Clark et al. compare with the nearest mention): the candidate nearest to the pronoun in
characters, and the first candidate in the text. Their head-word-match baseline does not apply: a
pronoun shares no head word with a name.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .extract import attention_batches, check_compatible, fits
from .gap import GapExample


@dataclass
class CoreferenceAccuracy:
    """How often each head prefers the true antecedent, beside the baselines on the same examples."""

    accuracy: np.ndarray          # (layers, heads): share of examples won by the true antecedent
    baselines: dict[str, float]   # "nearest", "first": accuracy of each rule on the same examples
    count: int                    # examples scored
    skipped: dict[str, int]       # "no single antecedent", "too long": examples left out, and why

    def best_head(self) -> tuple[float, int, int]:
        """(accuracy, layer, head) of the best head; layer and head count from 0."""
        layer, head = np.unravel_index(self.accuracy.argmax(), self.accuracy.shape)
        return float(self.accuracy[layer, head]), int(layer), int(head)


WORD = re.compile(r"\w(?:[\w'’.-]*\w)?")  # letters or digits, with apostrophes, dots, hyphens inside


def head_word_span(name: str, offset: int) -> tuple[int, int]:
    """Character span of a name's head word: its last word that has a letter, without the punctuation
    around it. GAP's names carry some ("Jack *", "Matthew 12:40", "Smith,"): the last whitespace chunk
    would score "*" or "12:40" instead of the name. A name without letters keeps its last word."""
    words = list(WORD.finditer(name))
    if not words:
        return offset, offset + len(name.rstrip())
    head = ([w for w in words if any(c.isalpha() for c in w.group())] or words)[-1]
    return offset + head.start(), offset + head.end()


def span_distance(a: tuple[int, int], b: tuple[int, int]) -> int:
    """Characters between two spans (0 if they touch or overlap)."""
    return max(b[0] - a[1], a[0] - b[1], 0)


def mention_spans(example: GapExample) -> dict[str, tuple[int, int]]:
    """Character spans the heads are read at: the pronoun, and the head word of names A and B."""
    return {"pronoun": (example.pronoun_offset, example.pronoun_offset + len(example.pronoun)),
            "A": head_word_span(example.a, example.a_offset), "B": head_word_span(example.b, example.b_offset)}


def pieces_in(offsets: Tensor, spans: Tensor) -> Tensor:
    """(B, T) 1.0 where a piece overlaps its example's character span; offsets (B, T, 2), spans (B, 2)."""
    start, end = offsets[..., 0], offsets[..., 1]
    inside = (start < spans[:, 1:]) & (end > spans[:, :1]) & (end > start)  # special tokens are (0, 0)
    if not inside.any(1).all():
        raise ValueError("a mention's character span covers no word piece; are the offsets character offsets "
                         "into the text, as in GAP?")
    return inside.float()


def coreference_accuracy(model, tokenizer, examples: Sequence[GapExample], *, batch_size: int = 16,
                         max_length: int | None = None, progress: bool = True) -> CoreferenceAccuracy:
    """Score every attention head on choosing a GAP pronoun's antecedent between its two candidates."""
    check_compatible(model, tokenizer)
    single = [e for e in examples if e.antecedent is not None]
    max_length = max_length or model.config.max_position_embeddings
    kept = [e for e, ok in zip(single, fits(tokenizer, [e.text for e in single], max_length)) if ok]
    if not kept:
        raise ValueError(f"none of the {len(examples)} examples has exactly one antecedent and fits in "
                         f"max_length={max_length} word pieces")
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    correct = torch.zeros(L, H, dtype=torch.float64)
    for batch, encoding, attentions in attention_batches(model, tokenizer, [e.text for e in kept],
                                                         batch_size=batch_size, return_offsets_mapping=True,
                                                         progress=progress, desc="coreference heads"):
        spans = [mention_spans(kept[i]) for i in batch]
        offsets = encoding["offset_mapping"]
        pronoun = pieces_in(offsets, torch.tensor([s["pronoun"] for s in spans]))
        from_pronoun = torch.einsum("bt,blhts->blhs", pronoun / pronoun.sum(1, keepdim=True), attentions)
        score = {c: torch.einsum("blhs,bs->blh", from_pronoun,
                                 pieces_in(offsets, torch.tensor([s[c] for s in spans]))) for c in "AB"}
        is_a = torch.tensor([kept[i].antecedent == "A" for i in batch]).view(-1, 1, 1)
        correct += torch.where(is_a, score["A"] > score["B"], score["B"] > score["A"]).double().sum(0)

    nearest = first = 0
    for e in kept:
        pronoun = (e.pronoun_offset, e.pronoun_offset + len(e.pronoun))
        names = {"A": (e.a_offset, e.a_offset + len(e.a)), "B": (e.b_offset, e.b_offset + len(e.b))}
        nearest += min("AB", key=lambda c: span_distance(names[c], pronoun)) == e.antecedent
        first += min("AB", key=lambda c: names[c][0]) == e.antecedent
    n = len(kept)
    return CoreferenceAccuracy((correct / n).numpy(), {"nearest": nearest / n, "first": first / n}, count=n,
                               skipped={"no single antecedent": len(examples) - len(single),
                                        "too long": len(single) - n})
