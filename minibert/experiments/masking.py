"""The masking ablations of BERT (Table 8 and the masking rate) as an experiment anyone can rerun.

BERT replaces a chosen token by [MASK] 80% of the time, leaves it unchanged (SAME) 10% and puts a
random token there (RND) 10% (Devlin et al., Appendix C.2). Table 8 trains BERT-base with other
splits and fine-tunes or probes each model. Here every strategy (and the rates 15/30/45% of
Wettig et al. 2023) pre-trains the same small BERT from the same seeds on the same text, and each
model is measured twice:

- **held-out MLM**: loss and accuracy at 15% of held-out tokens, all replaced by [MASK]: the same
  fill-in-the-blank test for every model;
- **a downstream probe**: a linear part-of-speech tagger on the frozen last layer (UD English EWT,
  fitted on dev, scored on test), the feature-based use of BERT that Table 8's last column measures.

Runs are written to a JSON results file as each one finishes (atomically), and a run already in
the file is not run again: an interrupted grid goes on where it stopped, and a larger grid made by
``minibert experiment masking`` (on a GPU, say) loads in notebook 05 with the command that made it.
"""
from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.conllu import load_ud_english_ewt
from ..analysis.probing import tagging_probe
from ..config import PRESETS
from ..pretraining import MLMMasking, PretrainingDataset
from ..recipes.pretrain import make_model, make_trainer
from .grid import GridSetup, PretrainingGrid, mean_sd_n, read_results

# MASK/SAME/RND shares of Table 8, in the paper's order.
STRATEGIES = {"80/10/10": (0.8, 0.1, 0.1), "100/0/0": (1.0, 0.0, 0.0), "80/0/20": (0.8, 0.0, 0.2),
              "80/20/0": (0.8, 0.2, 0.0), "0/20/80": (0.0, 0.2, 0.8), "0/0/100": (0.0, 0.0, 1.0)}
# Table 8, BERT-base: MNLI dev accuracy (fine-tuned), CoNLL-2003 NER dev F1 fine-tuned and feature-based.
PAPER_TABLE8 = {"80/10/10": (84.2, 95.4, 94.9), "100/0/0": (84.3, 94.9, 94.0), "80/0/20": (84.1, 95.2, 94.6),
                "80/20/0": (84.4, 95.2, 94.7), "0/20/80": (83.7, 94.8, 94.6), "0/0/100": (83.6, 94.9, 94.6)}
RATES = (0.15, 0.3, 0.45)
# What one masking decision covers: a word piece (BERT), a whole word (BERT's later release), or a run of
# whole words (SpanBERT, Joshi et al. 2020); each runs at 80/10/10 and 15%, beside Table 8's token grid.
UNITS = {"token": {}, "whole-word": {"whole_word": True}, "span": {"spans": True}}


@dataclass(kw_only=True)
class AblationSetup(GridSetup):
    """The masking grid's setup: the shared recipe, one model size and the POS probe's data."""
    preset: str = "bert-tiny"
    probe_sentences: int | None = None  # per split of UD EWT (dev to fit, test to score); None: all ~2,000

    def __post_init__(self):
        super().__post_init__()
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")


@dataclass(frozen=True)
class Run:
    strategy: str
    rate: float
    seed: int
    unit: str = "token"

    @property
    def key(self) -> str:
        return f"{self.strategy}@{self.rate:g}#{self.seed}" + ("" if self.unit == "token" else f"+{self.unit}")


def masking_grid(strategies=tuple(STRATEGIES), rates=RATES, seeds=(0, 1, 2), units=("token",)) -> list[Run]:
    """Table 8's strategies at 15%, then the other rates with 80/10/10, then the other masking units
    (`UNITS`) at 80/10/10 and 15%, each for every seed."""
    for name in strategies:
        if name not in STRATEGIES:
            raise ValueError(f"unknown strategy {name!r}; Table 8's are {', '.join(STRATEGIES)}")
    for unit in units:
        if unit not in UNITS:
            raise ValueError(f"unknown masking unit {unit!r}; choose from {', '.join(UNITS)}")
    configs = [(s, 0.15, "token") for s in strategies] + [("80/10/10", r, "token") for r in rates if r != 0.15]
    configs += [("80/10/10", 0.15, unit) for unit in units if unit != "token"]
    return [Run(s, r, seed, unit) for s, r, unit in configs for seed in seeds]


@dataclass
class MaskingAblation(PretrainingGrid):
    """Prepares the shared pieces once (tokenizer, packed text, eval set, probe data), then runs a grid.

    >>> ablation = MaskingAblation(AblationSetup(steps=300), "results/masking.json")
    >>> results = ablation.run(masking_grid(seeds=(0, 1)))
    """
    setup: AblationSetup = field(default_factory=AblationSetup)
    progress_label = "ablation runs"

    def __post_init__(self):
        s = self.setup
        self.probe_train, self.probe_test = ([[(w.form, w.upos) for w in sentence.words] for sentence in
                                              load_ud_english_ewt(split)[:s.probe_sentences]]
                                             for split in ("dev", "test"))
        super().__post_init__()

    def measure_references(self) -> dict[str, float]:
        """What the grid's numbers mean: the same measurements for models that learned nothing.

        ``unigram_loss``: see ``PretrainingGrid.unigram_loss``. ``untrained_*``: a randomly
        initialised model (seed 0). ``majority_probe_accuracy``: each word's most frequent tag.
        """
        untrained = make_model(self.setup.run_settings(seed=0), self.tokenizer, **self._sizes())
        untrained_mlm = self.evaluate(untrained)
        probe = tagging_probe(untrained, self.tokenizer, self.probe_train, self.probe_test)
        return {"unigram_loss": self.unigram_loss(), "untrained_mlm_loss": untrained_mlm["mlm_loss"],
                "untrained_probe_accuracy": probe["accuracy"], "majority_probe_accuracy": probe["majority_accuracy"]}

    def _sizes(self) -> dict:
        """The preset's sizes, with exactly ``max_seq_len`` positions (see `GridSetup`)."""
        layers, hidden, heads = PRESETS[self.setup.preset]
        return dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                    intermediate_size=4 * hidden, max_position_embeddings=self.setup.max_seq_len)

    def run_one(self, run: Run) -> dict:
        """Pre-train one model with this masking from this seed (the recipe's steps), then measure it."""
        settings = self.setup.run_settings(run.seed, mlm_probability=run.rate, mask_same_rnd=STRATEGIES[run.strategy])
        masking = MLMMasking(self.tokenizer, run.rate, STRATEGIES[run.strategy], **UNITS[run.unit])
        train_data = PretrainingDataset(self.examples, masking)
        model = make_model(settings, self.tokenizer, **self._sizes())
        trainer = make_trainer(settings, model, train_data, self.eval_data, progress=False)
        started = time.perf_counter()
        history = trainer.fit()
        seconds = time.perf_counter() - started
        probe = tagging_probe(model, self.tokenizer, self.probe_train, self.probe_test)
        return {"key": run.key, "strategy": run.strategy, "rate": run.rate, "seed": run.seed, "unit": run.unit,
                "mlm_loss": history.last("eval_loss"), "mlm_accuracy": history.last("eval_mlm_accuracy"),
                "probe_accuracy": probe["accuracy"], "train_loss": history.last("loss"),
                "train_seconds": round(seconds, 1), "device": str(trainer.device)}


def load_results(path: str | os.PathLike) -> dict:
    """A results file as written by `MaskingAblation` (setup, command, runs, versions)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no ablation results at {path}; make them with `minibert experiment masking "
                                f"--out {path}`")
    return read_results(path)


def summarize(runs: list[dict], metric: str) -> dict[tuple[str, float], tuple[float, float, int]]:
    """(strategy, rate) -> (mean, standard deviation over seeds, number of seeds) of ``metric``, over the runs
    that mask word pieces (Table 8's; files made before `UNITS` existed have no ``unit``)."""
    groups: dict[tuple[str, float], list[float]] = {}
    for r in runs:
        if r.get("unit", "token") == "token":
            groups.setdefault((r["strategy"], r["rate"]), []).append(r[metric])
    return {k: mean_sd_n(v) for k, v in groups.items()}


def by_unit(runs: list[dict], metric: str) -> dict[str, tuple[float, float, int]]:
    """unit -> (mean, standard deviation over seeds, number of seeds) of ``metric`` at 80/10/10 and 15%."""
    chosen = [r for r in runs if r["strategy"] == "80/10/10" and r["rate"] == 0.15]
    return {unit: mean_sd_n(r[metric] for r in chosen if r.get("unit", "token") == unit)
            for unit in UNITS if any(r.get("unit", "token") == unit for r in chosen)}


def difference_and_error(a: list[float], b: list[float]) -> tuple[float, float]:
    """mean(a) - mean(b) and its standard error sqrt(s_a²/n_a + s_b²/n_b), from per-seed values.

    A difference of more than about two standard errors is unlikely to be seed luck.
    """
    error = (statistics.variance(a) / len(a) + statistics.variance(b) / len(b)) ** 0.5
    return statistics.fmean(a) - statistics.fmean(b), error


def table(runs: list[dict]) -> str:
    """Table 8's shape in Markdown: the paper's numbers beside ours (mean ± sd over seeds)."""
    loss, acc, probe = (summarize(runs, m) for m in ("mlm_loss", "mlm_accuracy", "probe_accuracy"))
    lines = ["| MASK/SAME/RND | rate | paper MNLI | paper NER fine-tune | paper NER feature | "
             "held-out MLM loss | MLM acc % | POS probe % | seeds |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(loss, key=lambda k: (k[1], list(STRATEGIES).index(k[0]))):
        strategy, rate = key
        paper = PAPER_TABLE8[strategy] if rate == 0.15 else ("", "", "")
        lines.append(f"| {strategy} | {rate:.0%} | {paper[0]} | {paper[1]} | {paper[2]} | "
                     f"{loss[key][0]:.3f} ± {loss[key][1]:.3f} | {100 * acc[key][0]:.1f} ± {100 * acc[key][1]:.1f} | "
                     f"{100 * probe[key][0]:.2f} ± {100 * probe[key][1]:.2f} | {loss[key][2]} |")
    return "\n".join(lines)


def plot(runs: list[dict], references: dict | None = None, title: str | None = None):
    """Held-out MLM loss (top row) and probe accuracy (bottom row), mean ± sd over seeds, per strategy at
    15% (left) and per masking rate with 80/10/10 (right), with the references
    (`MaskingAblation.measure_references`) as dashed lines. 10 inches wide, text at 10 pt or more, so it
    reads unshrunk in a notebook's column."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 6.4), sharey="row", gridspec_kw={"width_ratios": [2, 1]})
    strategies = [s for s in STRATEGIES if any(r["strategy"] == s and r["rate"] == 0.15 for r in runs)]
    rated = [r for r in runs if r["strategy"] == "80/10/10"]
    lines = {"mlm_loss": [("unigram_loss", "token frequencies")],
             "probe_accuracy": [("untrained_probe_accuracy", "untrained model"),
                                ("majority_probe_accuracy", "word's usual tag")]}
    for row, (metric, label) in enumerate((("mlm_loss", "held-out MLM loss (lower is better)"),
                                           ("probe_accuracy", "POS probe accuracy (higher is better)"))):
        by_strategy, by_rate = axes[row]
        stats = summarize([r for r in runs if r["rate"] == 0.15], metric)
        by_strategy.errorbar(range(len(strategies)), [stats[(s, 0.15)][0] for s in strategies],
                             yerr=[stats[(s, 0.15)][1] for s in strategies], fmt="o", capsize=4)
        by_strategy.set_xticks(range(len(strategies)), strategies)
        by_strategy.set_ylabel(label.split(" (")[0])
        by_strategy.set_title(f"{label}, by MASK / SAME / RND at 15%", fontsize=11)
        rates = summarize(rated, metric)
        xs = sorted(rate for _, rate in rates)
        by_rate.errorbar([f"{x:.0%}" for x in xs], [rates[("80/10/10", x)][0] for x in xs],
                         yerr=[rates[("80/10/10", x)][1] for x in xs], fmt="o-", capsize=4, color="C2")
        by_rate.set_title("by masking rate, 80/10/10", fontsize=11)
        for ax in axes[row]:
            for (key, name), style in zip(lines[metric], ("--", ":")):
                if references and key in references:
                    ax.axhline(references[key], color="grey", linestyle=style, label=name)
        if references:
            by_strategy.legend(loc="best")
    axes[1, 0].set_xlabel("MASK / SAME / RND (%)")
    axes[1, 1].set_xlabel("masking rate")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


@dataclass(kw_only=True)
class MaskingSettings:
    """``minibert experiment masking``: which runs (strategies at 15%, rates with 80/10/10, seeds), their
    shared setup, and the results file that keeps finished runs."""
    out: str                                               # results file (JSON) to write, and to go on from
    strategies: tuple[str, ...] = tuple(STRATEGIES)        # MASK/SAME/RND splits run at 15%
    rates: tuple[float, ...] = RATES                       # masking rates run with 80/10/10
    seeds: tuple[int, ...] = (0, 1, 2)                     # seeds per configuration
    units: tuple[str, ...] = ("token",)                    # what one masking decision covers (`UNITS`)
    setup: AblationSetup = field(default_factory=AblationSetup)

    def __post_init__(self):
        self.out = os.fspath(self.out)
        self.strategies, self.rates, self.seeds = tuple(self.strategies), tuple(self.rates), tuple(self.seeds)
        self.units = tuple(self.units)
        masking_grid(self.strategies, self.rates, self.seeds, self.units)  # checks the names
        unknown = [name for name in self.strategies if name not in STRATEGIES]
        if unknown:
            raise ValueError(f"unknown strategies {unknown}; Table 8's are {', '.join(STRATEGIES)}")
        if not all(0 < rate < 1 for rate in self.rates):
            raise ValueError(f"masking rates must be between 0 and 1, got {self.rates}")


def experiment(settings: MaskingSettings, command: str | None = None) -> Path:
    """Run the grid; ``command``: the command line that asked for it, recorded in the results file."""
    ablation = MaskingAblation(settings.setup, settings.out, command)
    runs = ablation.run(masking_grid(settings.strategies, settings.rates, settings.seeds, settings.units))
    print(table(runs))
    for unit, (mean, sd, n) in by_unit(runs, "probe_accuracy").items():
        loss = by_unit(runs, "mlm_loss")[unit]
        print(f"{unit:<11} held-out MLM loss {loss[0]:.3f} ± {loss[1]:.3f}, POS probe {100 * mean:.2f} ± {100 * sd:.2f}% ({n} seeds)")
    print(f"results: {settings.out}")
    return Path(settings.out)
