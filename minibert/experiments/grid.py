"""Grids of small pre-training runs, composed of the pre-training recipe's steps.

A grid (notebook 05's masking ablation, notebook 04's bidirectionality runs, notebook 11's BERT /
RoBERTa / ALBERT comparison) pre-trains many small models that differ in one thing and are measured
alike. Everything they share is a `GridSetup` (the recipe's `TrainingSettings` with a grid's defaults);
one run is that setup made into `PretrainSettings` (`GridSetup.run_settings`) and put through the
recipe's own steps (`minibert.recipes.pretrain`): the tokenizer, the text and the held-out test are
prepared once per grid, the model, the training and the score once per run. Results go to a JSON
file as each run finishes, so an interrupted grid goes on where it stopped.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..atomic import atomic_path
from ..pretraining import unigram_loss
from ..recipes.pretrain import (
    PretrainSettings,
    TrainingSettings,
    held_out_data,
    make_tokenizer,
    make_trainer,
    score,
    training_data,
)
from ..user_files import regular_file

RESULT_KEYS = ("setup", "runs", "references")


def read_results(path: str | os.PathLike) -> dict:
    """A grid's results file (setup, command, references, runs, versions), or an error that names the file:
    a grid goes on from its --out file and rewrites it, so a file that is not one of its own is refused."""
    try:
        stored = json.loads(regular_file(path).read_text(encoding="utf-8"))
        why = None if isinstance(stored, dict) else f"it holds a JSON {type(stored).__name__}"
    except (UnicodeDecodeError, json.JSONDecodeError):
        stored, why = None, "it is not JSON text"
    if why is None and (any(key not in stored for key in RESULT_KEYS) or not isinstance(stored["runs"], list)):
        why = f"it has no {', '.join(key for key in RESULT_KEYS if key not in stored) or 'list of runs'}"
    if why:
        raise ValueError(f"{path} is not the results file of a `minibert experiment` grid ({why}); if it is one, "
                         "damaged, restore it; else choose a new --out file (this one is left as it is)")
    return stored


@dataclass(kw_only=True)
class GridSetup(TrainingSettings):
    """Everything that is the same in every run of a grid, as plain data (stored with the results).

    The defaults are notebook 04's recipe, which leaves the unigram plateau in three CPU-minutes at
    bert-tiny's size: a 4,000-piece vocabulary of its own, 16-token sequences, 64 of them a step,
    lr 1e-3, no dropout, BERT's post-LN. The encoders get exactly ``max_seq_len`` positions, so that
    a probe reads them only where they were trained: a word past the last position is left out of a
    probe (and of its baseline)."""
    vocab_size: int = 4000
    max_seq_len: int = 16
    steps: int = 3000
    batch_size: int = 64
    lr: float = 1e-3
    dropout: float = 0.0
    eval_examples: int = 512                    # held-out sequences of the fill-in-the-blank test

    def __post_init__(self):
        super().__post_init__()
        if not self.eval_corpus:
            raise ValueError("a grid scores every run on held-out text: give --eval-corpus a source (no held-out "
                             "text, --eval-corpus none, is for `minibert pretrain`)")
        for name in ("vocab_size", "eval_examples"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")

    def run_settings(self, seed: int = 0, **changes) -> PretrainSettings:
        """One run of the grid as the recipe's settings: this setup, the seed, and what the run changes
        (``objective``, ``mask_same_rnd``, ``mlm_probability``, ...)."""
        shared = {f.name: getattr(self, f.name) for f in fields(TrainingSettings)}
        return PretrainSettings(**{**shared, "seed": seed, "objective": "none", **changes})


@dataclass
class PretrainingGrid:
    """What every grid of small pre-training runs shares: the pieces prepared once (a tokenizer trained
    on the corpus, the packed training text, the held-out fill-in-the-blank set), and a results file
    written as each run finishes, so that an interrupted grid goes on where it stopped.

    Subclasses say what one run is (``run_one``) and what the numbers mean (``measure_references``).
    """
    setup: GridSetup
    results_path: str | os.PathLike | None = None
    command: str | None = None  # how the results file was made, stored with it
    progress_label = "pre-training runs"

    def __post_init__(self):
        self._task_examples: dict[str, list] = {}  # sentence task -> its examples, built once
        self.in_progress: dict | None = None  # what the run under way has measured so far, saved with the results
        shared = self.setup.run_settings()
        self.tokenizer = make_tokenizer(shared)
        self.examples, self.eval_data = training_data(shared, self.tokenizer).examples, held_out_data(shared, self.tokenizer)
        self.eval_data.examples = self.eval_data.examples[:self.setup.eval_examples]
        self.results, self.references = self._load()
        if self.references is None:
            self.references = self.measure_references()
            self._save()  # kept at once: a grid stopped before its first run need not measure them again

    def measure_references(self) -> dict[str, float]:
        return {"unigram_loss": self.unigram_loss()}

    def objective_examples(self, objective: str) -> list:
        """The training examples of an objective: the packed text for ``"none"``, and for a sentence task
        (``"nsp"``, ``"sop"``) its pairs of the same text, built the first time a run asks for them."""
        if objective == "none":
            return self.examples
        if objective not in self._task_examples:
            settings = self.setup.run_settings(objective=objective)
            self._task_examples[objective] = training_data(settings, self.tokenizer).examples
        return self._task_examples[objective]

    def unigram_loss(self) -> float:
        """Held-out MLM loss of always predicting the training text's token frequencies: the plateau
        a model sits on before it reads context."""
        return unigram_loss(self.examples, self.eval_data.examples, self.tokenizer.vocab_size)

    def evaluate(self, model) -> dict[str, float]:
        """Held-out MLM loss and accuracy at the masked positions (the recipe's `score`), the same test for
        every model, on the device and in the precision the runs train in."""
        measured = score(self.setup, model, self.eval_data, batch_size=min(self.setup.batch_size, len(self.eval_data)))
        return {"mlm_loss": measured["mlm_loss"], "mlm_accuracy": measured["mlm_accuracy"]}

    def _load(self) -> tuple[list[dict], dict | None]:
        if self.results_path is None or not Path(self.results_path).exists():
            return [], None
        stored = read_results(self.results_path)
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
                   "runs": self.results, **({"in_progress": self.in_progress} if self.in_progress else {}),
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
            self.in_progress = None
            self._save()
        return [done[run.key] for run in runs]

    def run_one(self, run) -> dict:
        raise NotImplementedError


def cpu_seconds_per_step(settings, model, data, log_every: int = 10) -> float:
    """CPU seconds of this process per training step of ``model`` on ``data``: a short run of ``settings``
    (its ``steps``), the median of the Trainer's log windows after the first (which pays for warming up)."""
    history = make_trainer(settings, model, data, progress=False, out_dir=None, log_every=log_every).fit()
    return statistics.median(history.series("cpu_s_per_step")[1][1:])


def mean_sd_n(values) -> tuple[float, float, int]:
    """(mean, standard deviation over seeds, number of seeds) of per-seed values: every grid's summary.
    One seed has no spread to measure, so its standard deviation is given as 0.0."""
    values = list(values)
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0, len(values)
