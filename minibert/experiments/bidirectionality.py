"""Deep bidirectionality, measured: the paper's Table 5 and Figure 3 in miniature.

BERT's central claim (Devlin et al. 2018, §3.1, §5.1) is that a masked LM can condition every word
on both sides at every layer, which a left-to-right LM (OpenAI GPT) cannot, and that this matters
downstream. The obvious alternative, a bidirectional model trained to predict the words it reads,
is no alternative: each word "sees itself", so the task is solved by copying. Here the same encoder
pre-trains on the same text with the same budget under three objectives:

- ``mlm``: BERT's masked LM (15% chosen; 80/10/10), full attention;
- ``ltr``: a left-to-right LM: causal attention (each position sees itself and its past) and the
  next token as the label of every position, as GPT trains;
- ``no-mask``: full attention and labels at 15% of the positions, but the input left as it is: the
  model reads the answer.

Each model is then measured where the measure means something: held-out fill-in-the-blank loss
(the MLM's task; the no-mask model has never seen [MASK]), held-out next-token loss (the LTR's
task), the training loss (the no-mask model's collapses), and the downstream use of its frozen
features: a linear part-of-speech probe on UD English EWT (a word's first piece), the same probe
with each word hidden (its tag read from the context alone: both sides for a masked LM, the left
for a left-to-right one, against lookup tables of the word's neighbours), and a linear SST-2
sentiment probe on mean-pooled sentences. With ``curve_points`` the measures are also taken along
training (the paper's Figure 5: which objective learns faster, and which ends ahead). Results go to
a JSON file as each run ends, like the other grids (`PretrainingGrid`), and ``minibert experiment
bidirectionality`` makes it.
"""
from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from ..analysis.conllu import load_ud_english_ewt
from ..analysis.probing import sentence_probe, tagging_probe
from ..config import PRESETS
from ..heads import IGNORE_INDEX, BertForMaskedLM
from ..padding import pad
from ..pretraining import MLMMasking, PretrainingDataset
from ..recipes.pretrain import make_model, make_trainer
from ..training import evaluate as evaluate_model
from ..training import isolated_rng
from .grid import PretrainingGrid, mean_sd_n
from .masking import AblationSetup

OBJECTIVES = ("mlm", "ltr", "no-mask")
# The paper's Table 5 (BERT-base, dev): BERT, then without NSP ("No NSP", a masked LM alone: the closest to
# our "mlm"), then without NSP and without bidirectionality ("LTR & No NSP": our "ltr").
PAPER_TABLE5 = {"mlm+nsp": {"MNLI-m": 84.4, "QNLI": 88.4, "MRPC": 86.7, "SST-2": 92.7, "SQuAD F1": 88.5},
                "mlm": {"MNLI-m": 83.9, "QNLI": 84.9, "MRPC": 86.5, "SST-2": 92.6, "SQuAD F1": 87.9},
                "ltr": {"MNLI-m": 82.1, "QNLI": 84.3, "MRPC": 77.5, "SST-2": 92.1, "SQuAD F1": 77.8}}


@dataclass(kw_only=True)
class BidirectionalitySetup(AblationSetup):
    """The masking grid's setup (one encoder size, notebook 04's recipe, the POS probe's data), plus
    the sentence probe's data; a sentence is cut at the encoder's last position, for every objective
    alike."""
    sst2_train_sentences: int = 4000        # drawn (seeded) from SST-2 train; scored on all 872 of dev (0: no probe)
    curve_points: int = 0                   # also measure at this many checkpoints along training (0: at the end)

    def __post_init__(self):
        super().__post_init__()
        if not isinstance(self.curve_points, int) or not 0 <= self.curve_points <= self.steps:
            raise ValueError(f"curve_points must be an integer from 0 to steps ({self.steps}), got {self.curve_points!r}")
        if not isinstance(self.sst2_train_sentences, int) or self.sst2_train_sentences < 0:
            raise ValueError(f"sst2_train_sentences must be an integer >= 0 (0: no sentiment probe), "
                             f"got {self.sst2_train_sentences!r}")


@dataclass(frozen=True)
class Run:
    objective: str
    seed: int

    @property
    def key(self) -> str:
        return f"{self.objective}#{self.seed}"


def bidirectionality_grid(objectives=OBJECTIVES, seeds=(0, 1, 2)) -> list[Run]:
    for objective in objectives:
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}; choose among {', '.join(OBJECTIVES)}")
    return [Run(objective, seed) for objective in objectives for seed in seeds]


def next_token_labels(input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """(B, T) -> (B, T): position t is labelled with token t + 1 (the LTR objective); the last real
    token and the padding are not scored."""
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[:, :-1] = input_ids[:, 1:].masked_fill(attention_mask[:, 1:] == 0, IGNORE_INDEX)
    return labels


class NextTokenData(PretrainingDataset):
    """Packed sequences as a left-to-right LM reads them: nothing corrupted, every next token a label."""

    def collate(self, examples: list[dict]) -> dict[str, Tensor]:
        lengths = [len(e["input_ids"]) for e in examples]
        ids = pad([e["input_ids"] for e in examples], self.masking.pad_token_id)       # (B, T)
        mask = pad([[1] * n for n in lengths], 0)                                      # (B, T)
        return {"input_ids": ids, "attention_mask": mask, "labels": next_token_labels(ids, mask)}


@dataclass
class Bidirectionality(PretrainingGrid):
    """>>> experiment = Bidirectionality(BidirectionalitySetup(), "results/bidirectionality.json")
    >>> results = experiment.run(bidirectionality_grid(seeds=(0,)))
    """
    setup: BidirectionalitySetup = field(default_factory=BidirectionalitySetup)
    progress_label = "pre-training runs"

    def __post_init__(self):
        from ..tasks.sst2 import load_sst2

        s = self.setup
        self.probe_train, self.probe_test = ([[(w.form, w.upos) for w in sentence.words] for sentence in
                                              load_ud_english_ewt(split)[:s.probe_sentences]]
                                             for split in ("dev", "test"))
        self.sst2_train = self.sst2_dev = None  # 0 sentences: no sentiment probe (and no need of `datasets`)
        if s.sst2_train_sentences:
            train = list(zip(*(load_sst2("train")[k] for k in ("sentence", "label"))))
            self.sst2_train = random.Random(0).sample(train, min(s.sst2_train_sentences, len(train)))
            self.sst2_dev = list(zip(*(load_sst2("dev")[k] for k in ("sentence", "label"))))
        super().__post_init__()
        originals = [{"input_ids": [i if y == IGNORE_INDEX else y for i, y in zip(e["input_ids"], e["labels"])]}
                     for e in self.eval_data.examples]  # the held-out text with its blanks filled back in
        self.next_token_eval = NextTokenData(originals, self.eval_data.masking)

    def model(self, objective: str, seed: int) -> BertForMaskedLM:
        """The recipe's new model at the preset's size, with exactly ``max_seq_len`` positions; a causal
        mask for the left-to-right LM."""
        layers, hidden, heads = PRESETS[self.setup.preset]
        return make_model(self.setup.run_settings(seed), self.tokenizer, num_hidden_layers=layers, hidden_size=hidden,
                          num_attention_heads=heads, intermediate_size=4 * hidden,
                          max_position_embeddings=self.setup.max_seq_len, is_decoder=objective == "ltr")

    def measure_references(self) -> dict[str, float]:
        """The floors: the unigram plateau, an untrained encoder's probes, the word-identity baseline, and
        for hidden words the lookup tables of their neighbours (the word before; both sides)."""
        untrained = self.model("mlm", 0)
        tagging = tagging_probe(untrained, self.tokenizer, self.probe_train, self.probe_test)
        hidden = tagging_probe(untrained, self.tokenizer, self.probe_train, self.probe_test, hide_words=True)
        sentiment = self.sentiment(untrained)
        return {"unigram_loss": self.unigram_loss(), "untrained_pos_accuracy": tagging["accuracy"],
                "word_identity_pos_accuracy": tagging["majority_accuracy"],
                "untrained_hidden_pos_accuracy": hidden["accuracy"],
                "left_neighbour_pos_accuracy": hidden["left_neighbour_accuracy"],
                "neighbours_pos_accuracy": hidden["neighbours_accuracy"],
                **({"untrained_sst2_accuracy": sentiment["accuracy"],
                    "majority_sst2_accuracy": sentiment["majority_accuracy"]} if sentiment else {})}

    def sentiment(self, model) -> dict | None:
        """The SST-2 probe's result, or None where the setup asks for none."""
        return sentence_probe(model, self.tokenizer, self.sst2_train, self.sst2_dev) if self.sst2_train else None

    def measure(self, model) -> dict[str, float]:
        """What a model knows at one point of its training: the held-out losses of both objectives, and
        part of speech probed from its last layer at each word, and at each word hidden (`tagging_probe`
        with ``hide_words``: from the context alone, where a left-to-right model has only the left)."""
        fill_in = self.evaluate(model)
        tagging = tagging_probe(model, self.tokenizer, self.probe_train, self.probe_test)
        hidden = tagging_probe(model, self.tokenizer, self.probe_train, self.probe_test, hide_words=True)
        return {"fill_in_the_blank_loss": fill_in["mlm_loss"], "fill_in_the_blank_accuracy": fill_in["mlm_accuracy"],
                "next_token_loss": self.next_token_loss(model), "pos_accuracy": tagging["accuracy"],
                "hidden_pos_accuracy": hidden["accuracy"]}

    def training_data(self, objective: str) -> PretrainingDataset:
        if objective == "ltr":
            return NextTokenData(self.examples, MLMMasking(self.tokenizer))
        shares = (0.0, 1.0, 0.0) if objective == "no-mask" else (0.8, 0.1, 0.1)  # no-mask: every chosen token SAME
        return PretrainingDataset(self.examples, MLMMasking(self.tokenizer, 0.15, shares))

    def next_token_loss(self, model) -> float:
        """Held-out loss of predicting each next token from the tokens before it (the LTR's own task)."""
        metrics = evaluate_model(model, self.next_token_eval, batch_size=self.setup.batch_size,
                                 collate_fn=self.next_token_eval.collate, device=next(model.parameters()).device,
                                 model_kwargs={"masked_only": True})
        return metrics["loss"]

    def run_one(self, run: Run) -> dict:
        """Pre-train one encoder with this objective from this seed, then measure it (with ``curve_points``,
        also along the way: the paper's Figure 5 asks how the objectives compare over training). The training
        pauses at each curve point (`Trainer.fit` ``until``) and the point goes into the results file at once
        (``in_progress``), so a run cut short by a time limit still shows its curve so far; the measuring
        leaves the random generators as it found them, so the run trains exactly as it would unmeasured."""
        s = self.setup
        model = self.model(run.objective, run.seed)
        trainer = make_trainer(s.run_settings(run.seed), model, self.training_data(run.objective), progress=False)
        every = max(1, s.steps // s.curve_points) if s.curve_points else s.steps
        curve, seconds = [], 0.0
        for step in range(every, s.steps, every):
            started = time.perf_counter()
            trainer.fit(until=step)
            seconds += time.perf_counter() - started
            with isolated_rng(run.seed, trainer.device):
                curve.append({"step": step, **self.measure(model)})
            self.in_progress = {"key": run.key, "curve": curve}
            self._save()
        started = time.perf_counter()
        history = trainer.fit()
        seconds += time.perf_counter() - started
        sentiment = self.sentiment(model)
        final = {"step": s.steps, **self.measure(model)}
        return {"key": run.key, "objective": run.objective, "seed": run.seed, "train_loss": history.last("loss"),
                **{k: v for k, v in final.items() if k != "step"}, **({"sst2_accuracy": sentiment["accuracy"]} if sentiment else {}),
                **({"curve": curve + [final]} if s.curve_points else {}),
                "train_seconds": round(seconds, 1), "device": str(trainer.device)}


MEASURES = ("train_loss", "fill_in_the_blank_loss", "fill_in_the_blank_accuracy", "next_token_loss", "pos_accuracy",
            "hidden_pos_accuracy", "sst2_accuracy")


def summary(runs: list[dict]) -> dict[str, dict[str, tuple[float, float, int]]]:
    """objective -> measure -> (mean, standard deviation over seeds, seeds)."""
    out = {}
    for objective in OBJECTIVES:
        chosen = [r for r in runs if r["objective"] == objective]
        measures = [m for m in MEASURES if chosen and all(m in r for r in chosen)]  # older files lack some
        if chosen:
            out[objective] = {m: mean_sd_n(r[m] for r in chosen) for m in measures}
    return out


def curve_summary(runs: list[dict], measure: str) -> dict[str, list[tuple[int, float, float, int]]]:
    """objective -> [(step, mean, standard deviation over seeds, seeds), ...] of ``measure`` along training
    (runs made with ``curve_points``); a step is kept only where every seed of the objective was measured."""
    out = {}
    for objective in OBJECTIVES:
        curves = [{point["step"]: point[measure] for point in r["curve"]}
                  for r in runs if r["objective"] == objective and "curve" in r]
        steps = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
        if steps:
            out[objective] = [(step, *mean_sd_n(c[step] for c in curves)) for step in steps]
    return out


def merged(*stored: dict) -> dict:
    """One results file from several of the same setup that ran different objectives or seeds (a GPU loan runs
    one objective per call: benchmarks/gpu_both_sides.sh). Their reference levels, measured by each call on the
    same probe data, must agree (to 0.5 points: a GPU's kernels may add in another order); a run in two
    files is refused, as is a file of another setup."""
    if not stored:
        raise ValueError("merged() needs at least one results file")
    first, runs, seen = stored[0], [], set()
    for i, other in enumerate(stored):
        if other["setup"] != first["setup"]:
            changed = sorted(k for k in {*first["setup"], *other["setup"]}
                             if first["setup"].get(k) != other["setup"].get(k))
            raise ValueError(f"results file {i + 1} was made with another setup ({', '.join(changed)}); only runs of "
                             "one setup can be drawn as one curve")
        apart = [k for k in first["references"] if abs(first["references"][k] - other["references"].get(k, -1)) > 0.005]
        if apart:
            raise ValueError(f"results file {i + 1} measured other reference levels ({', '.join(apart)}) than the first")
        for run in other["runs"]:
            if run["key"] in seen:
                raise ValueError(f"run {run['key']} is in more than one results file")
            seen.add(run["key"])
            runs.append(run)
    return {**first, "command": " ; ".join(s["command"] for s in stored if s.get("command")), "runs": runs}


def table(runs: list[dict]) -> str:
    rows = [f"{'objective':9s} {'train loss':>11s} {'blank loss':>11s} {'next-token':>11s} {'POS probe':>10s} "
            f"{'hidden POS':>10s} {'SST-2 probe':>11s}"]
    for objective, m in summary(runs).items():
        hidden = f"{m['hidden_pos_accuracy'][0]:10.1%}" if "hidden_pos_accuracy" in m else f"{'':10s}"
        sst2 = f"{m['sst2_accuracy'][0]:11.1%}" if "sst2_accuracy" in m else f"{'':11s}"
        rows.append(f"{objective:9s} {m['train_loss'][0]:11.3f} {m['fill_in_the_blank_loss'][0]:11.3f} "
                    f"{m['next_token_loss'][0]:11.3f} {m['pos_accuracy'][0]:10.1%} {hidden} {sst2}")
    return "\n".join(rows)


@dataclass
class BidirectionalitySettings:
    """``minibert experiment bidirectionality``: which objectives and seeds, their shared setup, and the
    results file that keeps finished runs."""
    out: str                                               # results file (JSON) to write, and to go on from
    objectives: tuple[str, ...] = OBJECTIVES
    seeds: tuple[int, ...] = (0, 1, 2)
    setup: BidirectionalitySetup = field(default_factory=BidirectionalitySetup)

    def __post_init__(self):
        self.out = os.fspath(self.out)
        self.objectives, self.seeds = tuple(self.objectives), tuple(self.seeds)
        bidirectionality_grid(self.objectives, self.seeds)  # checks the names


def experiment(settings: BidirectionalitySettings, command: str | None = None) -> Path:
    """Run the grid; ``command``: the command line that asked for it, recorded in the results file."""
    grid = Bidirectionality(settings.setup, settings.out, command)
    runs = grid.run(bidirectionality_grid(settings.objectives, settings.seeds))
    print(table(runs))
    print(f"results: {settings.out}")
    return Path(settings.out)
