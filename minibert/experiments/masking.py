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

import json
import os
import statistics
import sys
import time
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..analysis.conllu import load_ud_english_ewt
from ..atomic import atomic_path
from ..config import PRESETS, BertConfig
from ..heads import BertForMaskedLM
from ..pretraining import MLMMasking, PretrainingDataset, build_pretraining_data, load_documents, pretraining_metrics
from ..analysis.probing import tagging_probe
from ..tokenizer import BertTokenizer
from ..training import AUTOCAST_DTYPES, TrainConfig, Trainer, pick_device, pick_precision
from ..training import evaluate as evaluate_model

# MASK/SAME/RND shares of Table 8, in the paper's order.
STRATEGIES = {"80/10/10": (0.8, 0.1, 0.1), "100/0/0": (1.0, 0.0, 0.0), "80/0/20": (0.8, 0.0, 0.2),
              "80/20/0": (0.8, 0.2, 0.0), "0/20/80": (0.0, 0.2, 0.8), "0/0/100": (0.0, 0.0, 1.0)}
# Table 8, BERT-base: MNLI dev accuracy (fine-tuned), CoNLL-2003 NER dev F1 fine-tuned and feature-based.
PAPER_TABLE8 = {"80/10/10": (84.2, 95.4, 94.9), "100/0/0": (84.3, 94.9, 94.0), "80/0/20": (84.1, 95.2, 94.6),
                "80/20/0": (84.4, 95.2, 94.7), "0/20/80": (83.7, 94.8, 94.6), "0/0/100": (83.6, 94.9, 94.6)}
RATES = (0.15, 0.3, 0.45)
EVAL_RATE, EVAL_SEED = 0.15, 1234


@dataclass
class GridSetup:
    """Everything that is the same in every run of a grid, as plain data (stored with the results).

    The defaults are notebook 04's recipe, which leaves the unigram plateau in three CPU-minutes at
    bert-tiny's size: 16-token sequences, 64 of them a step, lr 1e-3, no dropout, BERT's post-LN.
    The encoders get exactly ``max_seq_len`` positions, so that a probe reads them only where they
    were trained: a word past the last position is left out of a probe (and of its baseline)."""
    vocab_size: int = 4000
    corpus: tuple[str, ...] = ("wikitext2_raw/wiki.valid.raw",)
    eval_corpus: tuple[str, ...] = ("wikitext2_raw/wiki.test.raw",)
    eval_examples: int = 512
    max_seq_len: int = 16
    steps: int = 3000
    batch_size: int = 64
    lr: float = 1e-3
    device: str = "auto"
    # The recipe's levers (`minibert pretrain`'s of the same names).
    warmup_ratio: float = 0.1
    dropout: float = 0.0
    pre_layer_norm: bool = False

    def __post_init__(self):
        self.corpus, self.eval_corpus = tuple(self.corpus), tuple(self.eval_corpus)
        for name in ("vocab_size", "eval_examples", "max_seq_len", "steps", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if not (0 <= self.dropout < 1 and 0 <= self.warmup_ratio < 1):
            raise ValueError(f"dropout and warmup_ratio must be in [0, 1), got {self.dropout} and {self.warmup_ratio}")

    def model_config(self, vocab_size: int, **sizes) -> BertConfig:
        """The BertConfig of a run: its sizes (a preset's, or ``sizes``) with this setup's recipe."""
        return BertConfig(**{**dict(vocab_size=vocab_size, max_position_embeddings=self.max_seq_len,
                                    hidden_dropout_prob=self.dropout, attention_probs_dropout_prob=self.dropout,
                                    pre_layer_norm=self.pre_layer_norm), **sizes})

    def train_config(self, seed: int) -> TrainConfig:
        return TrainConfig(max_steps=self.steps, batch_size=self.batch_size, lr=self.lr, warmup_ratio=self.warmup_ratio,
                           device=self.device, progress=False, seed=seed)


@dataclass
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

    @property
    def key(self) -> str:
        return f"{self.strategy}@{self.rate:g}#{self.seed}"


def masking_grid(strategies=tuple(STRATEGIES), rates=RATES, seeds=(0, 1, 2)) -> list[Run]:
    """Table 8's strategies at 15%, then the other rates with 80/10/10, each for every seed."""
    for name in strategies:
        if name not in STRATEGIES:
            raise ValueError(f"unknown strategy {name!r}; Table 8's are {', '.join(STRATEGIES)}")
    configs = [(s, 0.15) for s in strategies] + [("80/10/10", r) for r in rates if r != 0.15]
    return [Run(s, r, seed) for s, r in configs for seed in seeds]


@dataclass
class PretrainingGrid:
    """What every grid of small pre-training runs shares: the pieces prepared once (a tokenizer
    trained on the corpus, the packed training text, the held-out fill-in-the-blank set), and a
    results file written as each run finishes, so that an interrupted grid goes on where it stopped.

    Subclasses say what one run is (``run_one``) and what the numbers mean (``measure_references``).
    """
    setup: GridSetup
    results_path: str | os.PathLike | None = None
    command: str | None = None  # how the results file was made, stored with it
    progress_label = "pre-training runs"

    def __post_init__(self):
        s = self.setup
        self.tokenizer = BertTokenizer.train([" ".join(d) for d in load_documents(list(s.corpus))],
                                             vocab_size=s.vocab_size)
        self.examples = build_pretraining_data(self.tokenizer, list(s.corpus), "none", s.max_seq_len).examples
        fill_in_the_blank = MLMMasking(self.tokenizer, EVAL_RATE, (1.0, 0.0, 0.0))
        self.eval_data = build_pretraining_data(self.tokenizer, list(s.eval_corpus), "none", s.max_seq_len,
                                                masking=fill_in_the_blank, static_masking=True, seed=EVAL_SEED)
        self.eval_data.examples = self.eval_data.examples[:s.eval_examples]
        self.results, self.references = self._load()
        if self.references is None:
            self.references = self.measure_references()
            self._save()  # kept at once: a grid stopped before its first run need not measure them again

    def measure_references(self) -> dict[str, float]:
        return {"unigram_loss": self.unigram_loss()}

    def unigram_loss(self) -> float:
        """Held-out MLM loss of always predicting the training text's token frequencies: the plateau
        a model sits on before it reads context."""
        counts = torch.bincount(torch.tensor([i for e in self.examples for i in e["input_ids"]]),
                                minlength=self.tokenizer.vocab_size).double()
        log_frequency = (counts.clamp_min(1) / counts.sum()).log()
        labels = torch.tensor([y for e in self.eval_data.examples for y in e["labels"] if y != -100])
        return -log_frequency[labels].mean().item()

    def evaluate(self, model) -> dict[str, float]:
        """Held-out MLM loss and accuracy at the masked positions, the same test for every model, on the
        device and in the precision the runs train in."""
        device = pick_device(self.setup.device)
        precision = pick_precision("auto", device)
        autocast = None if precision == "fp32" else torch.autocast(device.type, dtype=AUTOCAST_DTYPES[precision])
        metrics = evaluate_model(model.to(device), self.eval_data, batch_size=min(self.setup.batch_size,
                                                                                  len(self.eval_data)),
                                 collate_fn=self.eval_data.collate, metrics_fn=pretraining_metrics, device=device,
                                 autocast=autocast)
        return {"mlm_loss": metrics["mlm_loss"], "mlm_accuracy": metrics["mlm_accuracy"]}

    def _load(self) -> tuple[list[dict], dict | None]:
        if self.results_path is None or not Path(self.results_path).exists():
            return [], None
        stored = json.loads(Path(self.results_path).read_text())
        # A file from before a setting existed was made with that setting's default.
        defaults = {f.name: f.default for f in fields(self.setup) if f.default is not MISSING}
        if {**defaults, **stored["setup"]} != json.loads(json.dumps(asdict(self.setup))):
            raise ValueError(f"{self.results_path} holds runs made with another setup ({stored['setup']}); "
                             "pass that setup to go on with it, or choose a new results file")
        return stored["runs"], stored["references"]

    def _save(self) -> None:
        if self.results_path is None:
            return
        payload = {"setup": asdict(self.setup), "command": self.command, "references": self.references,
                   "runs": self.results,
                   "versions": {"torch": torch.__version__, "python": sys.version.split()[0]}}
        Path(self.results_path).parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(self.results_path) as tmp:
            Path(tmp).write_text(json.dumps(payload, indent=1) + "\n")

    def run(self, runs: list, progress: bool = True) -> list[dict]:
        """Run what is not in the results yet; returns the results of ``runs`` (in their order)."""
        done = {r["key"]: r for r in self.results}
        todo = [run for run in runs if run.key not in done]
        for run in tqdm(todo, desc=self.progress_label, disable=not progress or not todo):
            result = self.run_one(run)
            self.results.append(result)
            done[run.key] = result
            self._save()
        return [done[run.key] for run in runs]

    def run_one(self, run) -> dict:
        raise NotImplementedError


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
        torch.manual_seed(0)
        untrained = BertForMaskedLM(self._model_config())
        untrained_mlm = self.evaluate(untrained)
        probe = tagging_probe(untrained, self.tokenizer, self.probe_train, self.probe_test)
        return {"unigram_loss": self.unigram_loss(), "untrained_mlm_loss": untrained_mlm["mlm_loss"],
                "untrained_probe_accuracy": probe["accuracy"], "majority_probe_accuracy": probe["majority_accuracy"]}

    def _model_config(self) -> BertConfig:
        layers, hidden, heads = PRESETS[self.setup.preset]
        return self.setup.model_config(self.tokenizer.vocab_size, num_hidden_layers=layers, hidden_size=hidden,
                                       num_attention_heads=heads, intermediate_size=4 * hidden)

    def run_one(self, run: Run) -> dict:
        """Pre-train one model with this masking from this seed, then measure it."""
        s = self.setup
        masking = MLMMasking(self.tokenizer, run.rate, STRATEGIES[run.strategy])
        train_data = PretrainingDataset(self.examples, masking)
        torch.manual_seed(run.seed)
        model = BertForMaskedLM(self._model_config())
        trainer = Trainer(model, s.train_config(run.seed), train_data, self.eval_data, collate_fn=train_data.collate,
                          metrics_fn=pretraining_metrics, model_kwargs={"masked_only": True},
                          eval_model_kwargs={"masked_only": True})
        started = time.perf_counter()
        history = trainer.fit()
        seconds = time.perf_counter() - started
        probe = tagging_probe(model, self.tokenizer, self.probe_train, self.probe_test)
        return {"key": run.key, "strategy": run.strategy, "rate": run.rate, "seed": run.seed,
                "mlm_loss": history.last("eval_loss"), "mlm_accuracy": history.last("eval_mlm_accuracy"),
                "probe_accuracy": probe["accuracy"], "train_loss": history.last("loss"),
                "train_seconds": round(seconds, 1), "device": str(trainer.device)}


def load_results(path: str | os.PathLike) -> dict:
    """A results file as written by `MaskingAblation` (setup, command, runs, versions)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no ablation results at {path}; make them with `minibert experiment masking "
                                f"--out {path}`")
    return json.loads(path.read_text())


def summarize(runs: list[dict], metric: str) -> dict[tuple[str, float], tuple[float, float, int]]:
    """(strategy, rate) -> (mean, standard deviation over seeds, number of seeds) of ``metric``."""
    groups: dict[tuple[str, float], list[float]] = {}
    for r in runs:
        groups.setdefault((r["strategy"], r["rate"]), []).append(r[metric])
    return {k: (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else 0.0, len(v)) for k, v in groups.items()}


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
    setup: AblationSetup = field(default_factory=AblationSetup)

    def __post_init__(self):
        self.out = os.fspath(self.out)
        self.strategies, self.rates, self.seeds = tuple(self.strategies), tuple(self.rates), tuple(self.seeds)
        unknown = [name for name in self.strategies if name not in STRATEGIES]
        if unknown:
            raise ValueError(f"unknown strategies {unknown}; Table 8's are {', '.join(STRATEGIES)}")
        if not all(0 < rate < 1 for rate in self.rates):
            raise ValueError(f"masking rates must be between 0 and 1, got {self.rates}")


def experiment(settings: MaskingSettings, command: str | None = None) -> Path:
    """Run the grid; ``command``: the command line that asked for it, recorded in the results file."""
    ablation = MaskingAblation(settings.setup, settings.out, command)
    runs = ablation.run(masking_grid(settings.strategies, settings.rates, settings.seeds))
    print(table(runs))
    print(f"results: {settings.out}")
    return Path(settings.out)
