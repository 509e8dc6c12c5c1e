"""Do attention heads find syntactic heads? Clark et al. (2019, §4.2) scored each head as a parser.

For every word, a head predicts one other word as its syntactic head; the prediction is right when
that is the word's head in the dependency tree. Clark et al. read each map both ways and report the
better:

- ``dep->head``: a word's predicted head is the word *it* attends to most (its row of the map:
  ``det`` attending to its noun);
- ``head->dep``: a word's predicted head is the word that attends most *to it* (its column: the
  transposed map, as Clark et al.'s code computes it). This is not "the head attends most to its
  dependent": a head with three dependents may attend most to only one of them, yet each dependent
  is scored by who attends most to it.

Where our table differs from Clark et al.'s Table 1: they scored Stanford Dependencies on the Penn
Treebank (WSJ), we score Universal Dependencies on English EWT; our "all" leaves out root words (their
head is not a word), and relations are UD's universal ones, so PTB's ``poss`` is UD's ``nmod:poss``,
counted under ``nmod`` unless ``subtypes``.

As in their code, the word itself, [CLS] and [SEP] are never predicted (they are still part of each
row's distribution), and root words are not scored: their head is not a word. Accuracy is counted
per relation and for all words at once ("all", punctuation included), for each layer and head.

The baseline is a fixed offset: "the head is the word k positions away", with the best k for each
relation (the most frequent head - dependent distance, over all k; Clark et al. searched
k = -3..2, which can only do worse). Clark et al.'s special case for PTB ``poss`` + ``'s`` is not
needed: in UD the possessive ``'s`` is a ``case`` dependent of the possessor.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from .conllu import Sentence
from .extract import attention_batches, check_compatible, fits
from .word_attention import piece_words, word_attention

DIRECTIONS = ("dep->head", "head->dep")
ALL = "all"


@dataclass
class SyntaxAccuracy:
    """Per relation: accuracy of every head in both directions, and of every fixed offset."""

    accuracy: dict[str, dict[str, np.ndarray]]  # direction -> relation -> (layers, heads), in [0, 1]
    counts: dict[str, int]                       # relation -> number of words scored
    offsets: dict[str, dict[int, float]]         # relation -> offset k -> accuracy of "head = word i + k"
    skipped: int                                 # sentences left out: too long, or a word with no piece

    def best_head(self, relation: str) -> tuple[float, int, int, str]:
        """(accuracy, layer, head, direction) of the best head; layer and head count from 0."""
        candidates = []
        for direction, by_relation in self.accuracy.items():
            acc = by_relation[relation]
            layer, head = np.unravel_index(acc.argmax(), acc.shape)
            candidates.append((float(acc[layer, head]), int(layer), int(head), direction))
        return max(candidates)

    def best_offset(self, relation: str) -> tuple[int, float]:
        """(offset, accuracy) of the best fixed-offset baseline."""
        return max(self.offsets[relation].items(), key=lambda kv: kv[1])

    def table(self, min_count: int = 100, exclude: Sequence[str] = ("punct",)) -> list[dict]:
        """Clark et al.'s Table 1: all words, then each relation with at least ``min_count`` words.

        ``head`` is written "layer-head" counting from 1, as in the paper ("8-10" is layer index 7).
        """
        relations = [ALL] + sorted((r for r, n in self.counts.items() if r != ALL and n >= min_count
                                    and r not in exclude), key=lambda r: -self.counts[r])
        rows = []
        for r in relations:
            accuracy, layer, head, direction = self.best_head(r)
            offset, offset_accuracy = self.best_offset(r)
            rows.append({"relation": r, "count": self.counts[r], "head": f"{layer + 1}-{head + 1}",
                         "direction": direction, "accuracy": accuracy,
                         "offset": offset, "offset_accuracy": offset_accuracy})
        return rows


def relation_of(subtypes: bool):
    return (lambda w: w.deprel) if subtypes else (lambda w: w.relation)


def offset_accuracy(sentences: Sequence[Sentence], subtypes: bool = False) -> dict[str, dict[int, float]]:
    """relation -> {k: share of its (non-root) words whose head is k positions away}, k sorted."""
    relation = relation_of(subtypes)
    distances = defaultdict(Counter)
    for sentence in sentences:
        for w in sentence.words:
            if w.head:
                distances[relation(w)][w.head - w.id] += 1
                distances[ALL][w.head - w.id] += 1
    return {r: {k: n / c.total() for k, n in sorted(c.items())} for r, c in distances.items()}


def predict_heads(attention: Tensor, n_words: Tensor) -> dict[str, Tensor]:
    """For each word, its predicted head as a CoNLL-U ID (1..n), in both directions.

    ``attention`` is word attention (B, ..., W, W) laid out as `word_attention` makes it ([CLS] = 0,
    words 1..n, [SEP] = n + 1, zero padding beyond); ``n_words`` is (B,). Returns (B, ..., W) per
    direction; positions that are not words hold meaningless values.
    """
    B, W = attention.shape[0], attention.shape[-1]
    ids = torch.arange(W)
    real = (ids >= 1) & (ids <= n_words[:, None])                  # (B, W): the sentence's words
    allowed = real[:, None, :] & (ids[:, None] != ids[None, :])    # (B, W, W): key j for query i, j != i
    allowed = allowed.view(B, *(1,) * (attention.dim() - 3), W, W)
    maps = {"dep->head": attention, "head->dep": attention.transpose(-1, -2)}
    return {d: m.masked_fill(~allowed, float("-inf")).argmax(-1) for d, m in maps.items()}


def dependency_accuracy(model, tokenizer, sentences: Sequence[Sentence], *, subtypes: bool = False,
                        batch_size: int = 32, max_length: int | None = None,
                        progress: bool = True) -> SyntaxAccuracy:
    """Score every attention head of ``model`` as a dependency parser on ``sentences``.

    Relations are universal (``nsubj:pass`` counts as ``nsubj``) unless ``subtypes``. Sentences over
    ``max_length`` pieces (default: the model's position embeddings), or with a word the tokenizer
    erases (a lone zero-width space), are skipped and counted.
    """
    check_compatible(model, tokenizer)
    max_length = max_length or model.config.max_position_embeddings
    keep = fits(tokenizer, [s.forms for s in sentences], max_length, split_into_words=True)
    kept = [s for s, k in zip(sentences, keep) if k]
    if not kept:
        raise ValueError(f"none of the {len(sentences)} sentences fits in max_length={max_length} word pieces")
    relation = relation_of(subtypes)
    counts = Counter(relation(w) for s in kept for w in s.words if w.head)
    relations = sorted(counts)
    index = {r: i for i, r in enumerate(relations)}
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    correct = {d: torch.zeros(len(relations), L, H, dtype=torch.float64) for d in DIRECTIONS}

    for batch, encoding, attentions in attention_batches(model, tokenizer, [s.forms for s in kept],
                                                         batch_size=batch_size, split_into_words=True,
                                                         progress=progress, desc="dependency heads"):
        words = piece_words(encoding)
        maps = word_attention(attentions, words)  # (B, L, H, W, W)
        W = maps.size(-1)
        gold = torch.full((len(batch), W), -1)  # head ID of each scored word, -1 where nothing is scored
        label = torch.zeros(len(batch), W, dtype=torch.long)
        for b, i in enumerate(batch):
            for w in kept[i].words:
                if w.head:
                    gold[b, w.id], label[b, w.id] = w.head, index[relation(w)]
        scored = F.one_hot(label, len(relations)).double() * (gold >= 0).unsqueeze(-1)  # (B, W, R)
        n_words = torch.tensor([len(kept[i].words) for i in batch])
        for d, predicted in predict_heads(maps, n_words).items():
            hit = (predicted == gold[:, None, None, :]).double()  # (B, L, H, W)
            correct[d] += torch.einsum("blhw,bwr->rlh", hit, scored)

    total = torch.tensor([counts[r] for r in relations], dtype=torch.float64).view(-1, 1, 1)
    accuracy = {d: {r: (c[i] / total[i]).numpy() for i, r in enumerate(relations)}
                | {ALL: (c.sum(0) / total.sum()).numpy()} for d, c in correct.items()}
    return SyntaxAccuracy(accuracy, {ALL: counts.total(), **counts}, offset_accuracy(kept, subtypes),
                          skipped=len(sentences) - len(kept))
