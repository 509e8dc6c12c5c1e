"""What a run did, as plain data: one record per log step or evaluation, saved as JSON."""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..atomic import atomic_path
from ..config import read_json


class History:
    """What a run did: one record per log step or evaluation, a list of plain dicts that plot and save as JSON.

    e.g. {"step": 100, "loss": 2.3, "lr": 1e-4, "grad_norm": 0.9, "tokens_per_s": 5e4} or {"step": 100, "eval_loss": 2.4}
    """

    def __init__(self, records: list[dict] | None = None):
        self.records = list(records or [])

    def __len__(self) -> int:
        return len(self.records)

    def append(self, step: int, **values: float) -> None:
        self.records.append({"step": step, **values})

    def series(self, key: str) -> tuple[list[int], list[float]]:
        """(steps, values) of the records that have ``key``: ready for plt.plot."""
        rows = [r for r in self.records if key in r]
        return [r["step"] for r in rows], [r[key] for r in rows]

    def last(self, key: str) -> float | None:
        values = self.series(key)[1]
        return values[-1] if values else None

    def plot(self):
        """`minibert.viz.history.plot_history`: loss, learning rate and eval metrics against the step."""
        from ..viz.history import plot_history  # matplotlib only when a picture is asked for
        return plot_history(self)

    def to_json(self, path: str | os.PathLike) -> None:
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(self.records, indent=1) + "\n")

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "History":
        return cls(read_json(Path(path), "training history", expect=list))
