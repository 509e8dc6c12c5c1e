"""Both sides of a blank, measured: a masked LM fills the same blanks seeing the whole sentence, only the
words before the blank, or only the words after it.

The paper's argument for a bidirectional encoder (§3.1, Table 5: a left-to-right model lost 10 F1 on SQuAD)
is that a word's meaning depends on both sides. A trained masked LM lets one measure it directly: hide one
side from attention and see how many blanks it still fills. Hiding is done with the attention mask, not by
cutting the text, so the blank keeps its position and the model reads a sentence of the usual shape; the
hidden tokens are still in the input, but no position attends to them in any layer, so nothing of them
reaches the blank.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from ..modes import eval_mode

SIDES = ("both", "left", "right")


def side_mask(attention_mask: torch.Tensor, blank: torch.Tensor, side: str) -> torch.Tensor:
    """The attention mask ``(B, T)`` (1 = may be attended to) with one side of each row's blank hidden.

    ``blank`` ``(B,)`` is the blank's position in each row. "left" keeps ``[CLS]`` (position 0), the words
    before the blank and the blank itself; "right" keeps ``[CLS]``, the blank and everything after it
    (``[SEP]`` included); "both" keeps the mask as it is. Padding stays hidden either way."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    if side == "both":
        return attention_mask.clone()
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)[None, :]   # (1, T)
    blank = blank[:, None]                                                                      # (B, 1)
    seen = positions <= blank if side == "left" else positions >= blank                        # (B, T)
    seen = seen | (positions == 0)                                                              # [CLS] always
    return attention_mask * seen.to(attention_mask.dtype)


@dataclass(frozen=True)
class Blank:
    """One word of a sentence to hide: ``words[index]``, a single word piece of the vocabulary."""
    words: tuple[str, ...]
    index: int

    def text(self, mask_token: str) -> str:
        return " ".join((*self.words[:self.index], mask_token, *self.words[self.index + 1:]))


def choose_blanks(sentences: list[str], tokenizer, n: int, seed: int = 0, min_side: int = 4,
                  max_words: int = 40) -> list[Blank]:
    """``n`` blanks, each from another sentence: a lower-case alphabetic word that is one piece of the
    vocabulary, with at least ``min_side`` words on each side, so that both sides have something to say."""
    vocab = tokenizer.get_vocab()
    order = list(range(len(sentences)))
    random.Random(seed).shuffle(order)
    blanks = []
    for k in order:
        words = tuple(sentences[k].lower().split())   # WikiText's plain form: punctuation stands apart
        if len(words) > max_words or len(words) < 2 * min_side + 1:
            continue
        candidates = [i for i in range(min_side, len(words) - min_side) if words[i].isalpha() and words[i] in vocab]
        if candidates:
            blanks.append(Blank(words, random.Random(seed * 1_000_003 + k).choice(candidates)))
            if len(blanks) == n:
                break
    return blanks


@dataclass
class SideResult:
    """Top-1 accuracy on the blanks seeing one side (or both), with a 95% interval."""
    side: str
    correct: list[bool]

    @property
    def accuracy(self) -> float:
        return sum(self.correct) / len(self.correct)

    @property
    def interval(self) -> tuple[float, float]:
        """Wilson's 95% score interval for a proportion (better than p ± 2 SE near 0 or 1, or for few blanks)."""
        n, p, z = len(self.correct), self.accuracy, 1.96
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return centre - half, centre + half


@torch.no_grad()
def fill_from_sides(model, tokenizer, blanks: list[Blank], sides=SIDES, batch_size: int = 64,
                    mask=side_mask) -> dict[str, SideResult]:
    """Each side's `SideResult` on ``blanks``: is the model's first guess at the blank the hidden word?
    ``mask``: the function that hides a side (`side_mask`, or a student's own)."""
    results = {side: SideResult(side, []) for side in sides}
    with eval_mode(model):
        for start in range(0, len(blanks), batch_size):
            chunk = blanks[start:start + batch_size]
            batch = tokenizer([b.text(tokenizer.mask_token) for b in chunk], padding=True, return_tensors="pt")
            ids = batch["input_ids"]                                                   # (B, T)
            where = (ids == tokenizer.mask_token_id).int().argmax(1)                   # (B,): the blank
            answers = torch.tensor([tokenizer.convert_tokens_to_ids(b.words[b.index]) for b in chunk])
            for side in sides:
                logits = model(input_ids=ids, attention_mask=mask(batch["attention_mask"], where, side),
                               token_type_ids=batch.get("token_type_ids")).logits     # (B, T, V)
                guesses = logits[torch.arange(len(chunk)), where].argmax(-1)           # (B,)
                results[side].correct.extend((guesses == answers).tolist())
    return results


@torch.no_grad()
def guesses_from_sides(model, tokenizer, text: str, k: int = 3, sides=SIDES) -> dict[str, list[tuple[str, float]]]:
    """The ``k`` likeliest words at the one ``[MASK]`` of ``text``, seeing each side: for hand-picked
    sentences where one side decides ("the [MASK] barked at the stranger .")."""
    batch = tokenizer(text, return_tensors="pt")
    where = (batch["input_ids"][0] == tokenizer.mask_token_id).nonzero()[:, 0]
    if len(where) != 1:
        raise ValueError(f"the text needs exactly one {tokenizer.mask_token}, it has {len(where)}: {text!r}")
    found = {}
    with eval_mode(model):
        for side in sides:
            logits = model(input_ids=batch["input_ids"], token_type_ids=batch.get("token_type_ids"),
                           attention_mask=side_mask(batch["attention_mask"], where, side)).logits   # (1, T, V)
            top = logits[0, where[0]].softmax(-1).topk(k)
            found[side] = [(tokenizer.convert_ids_to_tokens(int(i)), p.item()) for p, i in zip(top.values, top.indices)]
    return found
