"""Choose on some examples, score on others: a best head's accuracy without selection bias.

"The best of 72 heads" (144 with both directions) is a maximum, and a maximum of noisy scores is
biased upwards: scored on the sentences it was picked on, the winner looks better than it is, and
even a random model's best head looks better than chance. So the head, and likewise the baseline's
best offset, are chosen on one set of examples and their accuracy is read on another, as a
model's hyperparameters are chosen on dev and its score reported on test.

- `split_in_two`: a seeded random half of the examples and the rest, each in its original order.
- `HeldOutSyntax`: two `SyntaxAccuracy` results, one to choose on (UD English EWT dev) and one to
  score on (test, or the other half); ``best_head``, ``best_offset`` and ``table`` as on
  `SyntaxAccuracy`, with the held-out accuracy in place of the in-sample one.
- `HeldOutCoreference`: the same for two `CoreferenceAccuracy` results (two halves of GAP).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from .coreference import CoreferenceAccuracy
from .syntax import ALL, SyntaxAccuracy

T = TypeVar("T")


def split_in_two(items: Sequence[T], seed: int = 0) -> tuple[list[T], list[T]]:
    """A seeded random half of ``items`` (rounded down) and the other half, each in the original order."""
    order = np.random.default_rng(seed).permutation(len(items))
    first = set(order[:len(items) // 2].tolist())
    return ([x for i, x in enumerate(items) if i in first], [x for i, x in enumerate(items) if i not in first])


@dataclass
class HeldOutSyntax:
    """Heads and offsets chosen on ``chosen``, their accuracy read on ``scored`` (other sentences)."""

    chosen: SyntaxAccuracy   # where each relation's best head and best offset are picked
    scored: SyntaxAccuracy   # where they are scored: sentences the choice never saw

    def _check(self, relation: str) -> None:
        for name, result in (("chosen", self.chosen), ("scored", self.scored)):
            if relation not in result.counts:
                raise KeyError(f"no {relation!r} words in the {name} sentences; relations there: "
                               f"{', '.join(sorted(result.counts))}")

    def best_head(self, relation: str) -> tuple[float, int, int, str]:
        """(held-out accuracy, layer, head, direction) of the head that is best on ``chosen``; from 0."""
        self._check(relation)
        _, layer, head, direction = self.chosen.best_head(relation)
        return float(self.scored.accuracy[direction][relation][layer, head]), layer, head, direction

    def best_offset(self, relation: str) -> tuple[int, float]:
        """(offset, held-out accuracy) of the offset that is best on ``chosen`` (0.0 if never seen in ``scored``)."""
        self._check(relation)
        offset, _ = self.chosen.best_offset(relation)
        return offset, self.scored.offsets[relation].get(offset, 0.0)

    def table(self, min_count: int = 100, exclude: Sequence[str] = ("punct",)) -> list[dict]:
        """Clark et al.'s Table 1, held out: "all", then each relation with ``min_count`` words on both sides.

        ``accuracy`` and ``offset_accuracy`` are read on ``scored`` (``count`` words); ``chosen_accuracy`` is
        the same head's accuracy where it was picked, the number an in-sample table would report.
        """
        shared = [r for r, n in self.scored.counts.items() if r != ALL and r not in exclude and n >= min_count
                  and self.chosen.counts.get(r, 0) >= min_count]
        rows = []
        for r in [ALL] + sorted(shared, key=lambda r: -self.scored.counts[r]):
            accuracy, layer, head, direction = self.best_head(r)
            offset, offset_accuracy = self.best_offset(r)
            rows.append({"relation": r, "count": self.scored.counts[r], "head": f"{layer + 1}-{head + 1}",
                         "direction": direction, "accuracy": accuracy,
                         "chosen_accuracy": float(self.chosen.accuracy[direction][r][layer, head]),
                         "offset": offset, "offset_accuracy": offset_accuracy})
        return rows


@dataclass
class HeldOutCoreference:
    """The head that is best on ``chosen`` pronouns, scored on ``scored`` (other pronouns)."""

    chosen: CoreferenceAccuracy
    scored: CoreferenceAccuracy

    def best_head(self) -> tuple[float, int, int]:
        """(held-out accuracy, layer, head) of the head that is best on ``chosen``; from 0."""
        _, layer, head = self.chosen.best_head()
        return float(self.scored.accuracy[layer, head]), layer, head
