"""BERT's successors and BERT's sizes, pre-trained on the same budget: the experiment of notebook 11.

Two questions, one grid of small pre-training runs (same text, same number of updates, same seeds),
each model measured with notebook 05's held-out fill-in-the-blank test:

- **objectives** (at one size): BERT (MLM + next sentence prediction on sentence pairs, masks drawn
  in advance: copies of the data masked differently, each copy seen as often as in BERT's 40 epochs
  over 10 copies), RoBERTa (Liu et al. 2019: MLM alone on packed full sentences, masks drawn anew for every
  batch) and ALBERT (Lan et al. 2019: MLM + sentence-order prediction, a factorised embedding
  E = H/2 and one layer's weights shared by every layer);
- **sizes** (BERT's objective, and RoBERTa's): layers L, hidden size H and heads A against held-out
  MLM loss, a small version of the paper's Table 6.

Runs go to a JSON results file as each finishes, and an interrupted grid goes on where it stopped
(`minibert experiment beyond-bert`), as for the masking ablation.
"""
from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..pretraining import BERT_MASK_REPEATS, MLMMasking, PretrainingDataset, mask_statically
from ..recipes.pretrain import make_model, make_trainer
from .grid import GridSetup, PretrainingGrid, mean_sd_n

# name -> (sentence task, masks drawn in advance (static), what the model changes)
VARIANTS = {"BERT": ("nsp", True, {}),
            "RoBERTa": ("none", False, {}),
            "ALBERT": ("sop", False, {"share_layers": True, "embedding_ratio": 0.5})}
# Devlin et al. Table 6: (L, H, A) -> held-out masked LM perplexity, MNLI-m, MRPC, SST-2 dev accuracy.
PAPER_TABLE6 = {(3, 768, 12): (5.84, 77.9, 79.8, 88.4), (6, 768, 3): (5.24, 80.6, 82.2, 90.7),
                (6, 768, 12): (4.68, 81.9, 84.8, 91.3), (12, 768, 12): (3.99, 84.4, 86.7, 92.9),
                (12, 1024, 16): (3.54, 85.7, 86.9, 93.3), (24, 1024, 16): (3.23, 86.6, 87.8, 93.7)}
SIZES = ((1, 128, 2), (2, 128, 2), (4, 128, 2), (2, 256, 4))
COMPARED_AT = (2, 128, 2)  # the size at which the three objectives are compared (bert-tiny)
# The objectives run at every size: BERT's (Table 6), and RoBERTa's, which reads 4.6 times as many distinct
# sequences of the same text at 16 tokens (sentence pairs cut to fit waste most of each sentence).
SIZE_VARIANTS = ("BERT", "RoBERTa")


@dataclass(frozen=True)
class Run:
    variant: str
    size: tuple[int, int, int]  # (L, H, A)
    seed: int

    @property
    def key(self) -> str:
        L, H, A = self.size
        return f"{self.variant}-L{L}-H{H}-A{A}-seed{self.seed}"


def comparison_grid(sizes=SIZES, variants=tuple(VARIANTS), seeds=(0, 1, 2),
                    size_variants=SIZE_VARIANTS) -> list[Run]:
    """Every size with each of ``size_variants``' objectives, and every variant at ``COMPARED_AT``, for each seed."""
    for name in (*variants, *size_variants):
        if name not in VARIANTS:
            raise ValueError(f"unknown variant {name!r}; choose among {', '.join(VARIANTS)}")
    configs = [(v, tuple(size)) for v in size_variants for size in sizes]
    configs += [(v, COMPARED_AT) for v in variants if (v, COMPARED_AT) not in configs]
    return [Run(v, size, seed) for v, size in configs for seed in seeds]


@dataclass
class ModelComparison(PretrainingGrid):
    """>>> comparison = ModelComparison(GridSetup(steps=800), "results/11_beyond_bert.json")
    >>> results = comparison.run(comparison_grid())"""
    setup: GridSetup = field(default_factory=GridSetup)

    def model_sizes(self, run: Run) -> dict:
        """The run's model: its L, H, A with exactly ``max_seq_len`` positions, and ALBERT's changes."""
        L, H, A = run.size
        extra = dict(VARIANTS[run.variant][2])
        ratio = extra.pop("embedding_ratio", None)
        if ratio is not None:
            extra["embedding_size"] = int(H * ratio)
        return dict(num_hidden_layers=L, hidden_size=H, num_attention_heads=A, intermediate_size=4 * H,
                    max_position_embeddings=self.setup.max_seq_len, **extra)

    def run_one(self, run: Run) -> dict:
        """Pre-train one model of this variant and size from this seed (the recipe's steps), then measure it."""
        s = self.setup
        objective, static, _ = VARIANTS[run.variant]
        settings = s.run_settings(run.seed, objective=objective)
        masking = MLMMasking(self.tokenizer)
        examples = self.objective_examples(objective)
        copies = None
        if static:  # as many masked copies as keep each mask's repeats at BERT's
            copies = max(1, math.ceil(s.steps * s.batch_size / len(examples) / BERT_MASK_REPEATS))
            examples = mask_statically(examples, masking, seed=run.seed, dupe_factor=copies)
        train_data = PretrainingDataset(examples, masking)
        model = make_model(settings, self.tokenizer, **self.model_sizes(run))
        trainer = make_trainer(settings, model, train_data, progress=False)
        started = time.perf_counter()
        history = trainer.fit()
        seconds = time.perf_counter() - started
        measured = self.evaluate(model)
        return {"key": run.key, "variant": run.variant, "size": list(run.size), "seed": run.seed,
                "parameters": model.bert.num_parameters(), **measured, "train_examples": len(examples) // (copies or 1),
                **({"mask_copies": copies} if copies else {}),
                "train_tokens": round(mean_length(examples) * s.steps * s.batch_size),
                "train_loss": history.last("loss"), "train_seconds": round(seconds, 1), "device": str(trainer.device)}


def mean_length(examples) -> float:
    """Tokens per example: from the spans' ends where the examples are spans (a million packed Wikipedia
    sequences would take half an hour to make one by one), else from the examples."""
    if hasattr(examples, "lengths"):
        return float(examples.lengths().mean())
    return statistics.fmean(len(e["input_ids"]) for e in examples)


def summarize(runs: list[dict], metric: str = "mlm_loss") -> dict[tuple, tuple[float, float, int]]:
    """(variant, (L, H, A)) -> (mean, standard deviation over seeds, number of seeds) of ``metric``."""
    groups: dict[tuple, list[float]] = {}
    for r in runs:
        groups.setdefault((r["variant"], tuple(r["size"])), []).append(r[metric])
    return {k: mean_sd_n(v) for k, v in groups.items()}


def table6(runs: list[dict], variant: str = "BERT") -> str:
    """The paper's Table 6 (BERT-base scale) and ours (CPU scale, ``variant``'s objective) in Markdown, largest last."""
    lines = ["| L | H | A | paper: MLM perplexity | paper: SST-2 | | L | H | A | parameters | held-out MLM loss | perplexity |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ours = sorted(((size, stats) for (v, size), stats in summarize(runs).items() if v == variant),
                  key=lambda item: parameters(runs, item[0], variant))
    paper = list(PAPER_TABLE6.items())
    for i in range(max(len(paper), len(ours))):
        left = "| | | | | |"
        if i < len(paper):
            (L, H, A), (ppl, _, _, sst2) = paper[i]
            left = f"| {L} | {H} | {A} | {ppl} | {sst2} |"
        right = " | | | | | |"
        if i < len(ours):
            (L, H, A), (mean, sd, _) = ours[i]
            right = (f" | {L} | {H} | {A} | {parameters(runs, (L, H, A), variant) / 1e6:.2f}M | {mean:.3f} ± {sd:.3f} | "
                     f"{math.exp(mean):.0f} |")
        lines.append(left + right)
    return "\n".join(lines)


def parameters(runs: list[dict], size: tuple, variant: str = "BERT") -> int:
    """Encoder parameters (embeddings included) of the models of ``variant`` at ``size``."""
    return next(r["parameters"] for r in runs if r["variant"] == variant and tuple(r["size"]) == tuple(size))


def parse_size(text: str) -> tuple[int, int, int]:
    """``"LxHxA"`` (``"2x128x2"``: layers, hidden size, heads) as (L, H, A)."""
    try:
        L, H, A = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"a size is LxHxA, e.g. 2x128x2 (layers, hidden size, heads); got {text!r}") from None
    return L, H, A


@dataclass(kw_only=True)
class BeyondBertSettings:
    """``minibert experiment beyond-bert``: which runs (sizes with the objectives of ``size_variants``,
    variants at ``COMPARED_AT``, seeds), their shared setup, and the results file that keeps finished runs."""
    out: str                                              # results file (JSON) to write, and to go on from
    sizes: tuple[tuple[int, int, int], ...] = SIZES       # (L, H, A), or "LxHxA" text
    variants: tuple[str, ...] = tuple(VARIANTS)           # objectives compared at COMPARED_AT
    size_variants: tuple[str, ...] = SIZE_VARIANTS        # objectives run at every size
    seeds: tuple[int, ...] = (0, 1, 2)                    # seeds per configuration
    setup: GridSetup = field(default_factory=GridSetup)

    def __post_init__(self):
        self.out = os.fspath(self.out)
        self.sizes = tuple(parse_size(size) if isinstance(size, str) else tuple(size) for size in self.sizes)
        self.variants, self.seeds, self.size_variants = tuple(self.variants), tuple(self.seeds), tuple(self.size_variants)
        unknown = [name for name in (*self.variants, *self.size_variants) if name not in VARIANTS]
        if unknown:
            raise ValueError(f"unknown variants {unknown}; choose among {', '.join(VARIANTS)}")


def experiment(settings: BeyondBertSettings, command: str | None = None) -> Path:
    """Run the grid; ``command``: the command line that asked for it, recorded in the results file."""
    comparison = ModelComparison(settings.setup, settings.out, command)
    runs = comparison.run(comparison_grid(settings.sizes, settings.variants, settings.seeds, settings.size_variants))
    for variant in settings.size_variants:
        print(f"{variant}'s objective at every size:\n{table6(runs, variant)}")
    print(f"results: {settings.out}")
    return Path(settings.out)
