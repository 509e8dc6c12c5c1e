"""ELECTRA against BERT's masked LM at equal compute, on the course's budget (Clark et al. 2020, §3.3, Table 1).

ELECTRA's claim is about compute: replaced token detection (`minibert.pretraining.electra`) learns
more per FLOP than a masked LM, and the gap is widest for small models (ELECTRA-Small 79.9 GLUE
against BERT-Small's 75.1, trained with the same compute). Here the question is asked at the
course's size: the discriminator is exactly the masked LM's encoder (bert-tiny with notebook 04's
recipe, `GridSetup`), both read the same text in the same batches, and both are measured as the
bidirectionality grid measures its encoders (`Bidirectionality`): linear probes on the frozen
last layer, part of speech on UD English EWT and sentiment on SST-2.

The generator is ELECTRA's extra cost: a quarter-width encoder and its V-wide decoder at every
blank. So ELECTRA gets *fewer* steps than the masked LM, in two ways, and both are reported:

- ``electra``: the masked LM's training FLOPs (`training_flops_per_token`, counted from the sizes as
  the paper counts them: every weight matrix and attention's products, backward twice forward);
- ``electra-time``: the masked LM's CPU time, per step measured once for both models on this
  machine (`ElectraComparison.measure_references`, stored with the results): on a CPU at this size,
  the second model's per-step overheads cost more than its FLOPs say;
- ``electra-steps`` (not run by default): the masked LM's number of steps, which gives ELECTRA more
  compute than the masked LM.

Each ELECTRA run also reports its own two models: the generator's fill-in-the-blank accuracy on the
held-out test, and the discriminator's held-out loss beside its plateau (``rtd_base_rate_loss``: the
loss of always answering "replaced" with the share of replaced tokens, the discriminator's analogue
of the masked LM's unigram plateau). Results go to a JSON file as each run ends, like the other grids,
and ``minibert experiment electra`` makes it.
"""
from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..config import PRESETS, BertConfig
from ..pretraining.electra import ElectraData, ElectraForPreTraining, electra_masking, electra_metrics, generator_config
from ..recipes.pretrain import make_trainer
from ..training import evaluate as evaluate_model
from .bidirectionality import Bidirectionality, BidirectionalitySetup
from .grid import cpu_seconds_per_step, mean_sd_n
from .masking import difference_and_error

ARMS = ("mlm", "electra", "electra-time", "electra-steps")
DEFAULT_ARMS = ("mlm", "electra", "electra-time")
MEASURES = ("pos_accuracy", "sst2_accuracy", "train_seconds", "cpu_seconds", "steps", "fill_in_the_blank_accuracy",
            "rtd_loss", "rtd_base_rate_loss", "rtd_accuracy", "replaced_share")
# Clark et al. 2020, Table 1 (GLUE dev score; train FLOPs): the small models, trained with about the same compute.
PAPER_TABLE1 = {"BERT-Small": {"glue": 75.1, "train_flops": 1.4e18}, "ELECTRA-Small": {"glue": 79.9, "train_flops": 1.4e18}}


@dataclass(kw_only=True)
class ElectraSetup(BidirectionalitySetup):
    """The bidirectionality grid's setup (encoder size, recipe, probes), plus ELECTRA's knobs."""
    generator_fraction: float = 0.25        # generator hidden size / discriminator's (ELECTRA-Small: 1/4)
    rtd_weight: float = 50.0                # λ: loss = generator MLM + λ · discriminator
    timing_steps: int = 60                  # steps per model timed, twice each, to set electra-time's steps

    def __post_init__(self):
        super().__post_init__()
        if self.curve_points:
            raise ValueError("the ELECTRA comparison measures at the end of training only (curve_points=0)")
        if not 0 < self.generator_fraction <= 1 or not self.rtd_weight > 0:
            raise ValueError(f"generator_fraction must be in (0, 1] and rtd_weight > 0, got {self.generator_fraction} "
                             f"and {self.rtd_weight}")
        if not isinstance(self.timing_steps, int) or self.timing_steps < 20:
            raise ValueError(f"timing_steps must be an integer >= 20 (two log windows at least), got {self.timing_steps!r}")


@dataclass(frozen=True)
class Run:
    arm: str
    seed: int

    @property
    def key(self) -> str:
        return f"{self.arm}#{self.seed}"


def electra_grid(arms=DEFAULT_ARMS, seeds=(0, 1, 2)) -> list[Run]:
    for arm in arms:
        if arm not in ARMS:
            raise ValueError(f"unknown arm {arm!r}; choose among {', '.join(ARMS)}")
    return [Run(arm, seed) for arm in arms for seed in seeds]


def encoder_flops(config: BertConfig, seq_len: int) -> float:
    """Forward FLOPs per token of an encoder (2 per multiply-add): the E → H projection if any, and per
    layer the four H × H attention matrices, the two H × I feed-forward ones and attention's QKᵀ and AV
    (2·T·H each). Embedding lookups, LayerNorms and softmaxes are left out, as the paper leaves them out."""
    H, I, L = config.hidden_size, config.intermediate_size, config.num_hidden_layers  # noqa: E741 (the paper's letters)
    projection = 2 * config.embedding_dim * H if config.embedding_dim != H else 0
    return projection + L * (2 * (4 * H * H + 2 * H * I) + 4 * seq_len * H)


def training_flops_per_token(objective: str, config: BertConfig, seq_len: int, predicted_share: float,
                             generator_fraction: float = 0.25) -> float:
    """Training FLOPs per input token (forward + backward ≈ 3 × forward) of the masked LM ("mlm") or of
    ELECTRA ("electra") with ``config`` as the encoder kept. ``predicted_share``: the share of tokens
    masked, where the MLM decoder (H → E → V) runs. ELECTRA adds the replaced-token head at every
    token and the whole generator, whose decoder costs as much as the masked LM's (the same V × E table)."""
    mlm_head = 2 * config.hidden_size * config.embedding_dim + 2 * config.embedding_dim * config.vocab_size
    if objective == "mlm":
        return 3 * (encoder_flops(config, seq_len) + predicted_share * mlm_head)
    generator = generator_config(config, generator_fraction)
    rtd_head = 2 * config.hidden_size * config.hidden_size + 2 * config.hidden_size
    generator_head = 2 * generator.hidden_size * generator.embedding_dim + 2 * generator.embedding_dim * config.vocab_size
    return 3 * (encoder_flops(config, seq_len) + rtd_head + encoder_flops(generator, seq_len)
                + predicted_share * generator_head)


@dataclass
class ElectraComparison(Bidirectionality):
    """>>> comparison = ElectraComparison(ElectraSetup(), "results/electra.json")
    >>> results = comparison.run(electra_grid(seeds=(0, 1, 2)))
    """
    setup: ElectraSetup = field(default_factory=ElectraSetup)
    progress_label = "MLM and ELECTRA runs"

    def __post_init__(self):
        super().__post_init__()
        self.electra_eval = ElectraData(self.eval_data.examples, electra_masking(self.tokenizer))

    def config(self) -> BertConfig:
        """The encoder both objectives train: the preset's size, exactly ``max_seq_len`` positions."""
        layers, hidden, heads = PRESETS[self.setup.preset]
        return self.setup.model_config(self.tokenizer.vocab_size, self.setup.max_seq_len, num_hidden_layers=layers,
                                       hidden_size=hidden, num_attention_heads=heads, intermediate_size=4 * hidden)

    def electra(self, seed: int) -> ElectraForPreTraining:
        torch.manual_seed(seed)  # the initial weights, from the seed
        return ElectraForPreTraining(self.config(), self.setup.generator_fraction, self.setup.rtd_weight)

    def flops_per_token(self, objective: str) -> float:
        """`training_flops_per_token` at this setup: a sequence holds a [CLS] and a [SEP] that are never masked."""
        s = self.setup
        share = 0.15 * (s.max_seq_len - 2) / s.max_seq_len
        return training_flops_per_token(objective, self.config(), s.max_seq_len, share, s.generator_fraction)

    def cpu_seconds_per_step(self, objective: str) -> float:
        """CPU seconds of this process per training step: the median of the Trainer's 10-step log windows
        after the first (which pays for warming up)."""
        settings = self.setup.run_settings(0, steps=self.setup.timing_steps)
        model = self.model("mlm", 0) if objective == "mlm" else self.electra(0)
        return cpu_seconds_per_step(settings, model, self.training_data(objective))

    def training_data(self, objective: str):
        if objective == "mlm":
            return super().training_data("mlm")
        return ElectraData(self.examples, electra_masking(self.tokenizer))

    def measure_references(self) -> dict[str, float]:
        """The floors (unigram plateau, untrained encoder's probes, word identity, majority class) and the
        compute of one step of each objective: FLOPs counted, CPU seconds measured (each model timed twice,
        in turns, so that the machine's load falls on both alike)."""
        untrained = self.model("mlm", 0)
        tagging = self.tagging(untrained)
        sentiment = self.sentiment(untrained)
        timings = {"mlm": [], "electra": []}
        for _ in range(2):
            for objective in timings:
                timings[objective].append(self.cpu_seconds_per_step(objective))
        return {"unigram_loss": self.unigram_loss(), "untrained_pos_accuracy": tagging["accuracy"],
                "word_identity_pos_accuracy": tagging["majority_accuracy"],
                **({"untrained_sst2_accuracy": sentiment["accuracy"],
                    "majority_sst2_accuracy": sentiment["majority_accuracy"]} if sentiment else {}),
                "mlm_flops_per_token": self.flops_per_token("mlm"),
                "electra_flops_per_token": self.flops_per_token("electra"),
                "mlm_cpu_s_per_step": statistics.fmean(timings["mlm"]),
                "electra_cpu_s_per_step": statistics.fmean(timings["electra"])}

    def steps(self, arm: str) -> int:
        """The masked LM's steps, or ELECTRA's at the masked LM's FLOPs, CPU time, or steps."""
        s, r = self.setup, self.references
        ratio = {"mlm": 1.0, "electra-steps": 1.0,
                 "electra": r["mlm_flops_per_token"] / r["electra_flops_per_token"],
                 "electra-time": r["mlm_cpu_s_per_step"] / r["electra_cpu_s_per_step"]}[arm]
        return max(1, round(s.steps * ratio))

    def tagging(self, model) -> dict:
        from ..analysis.probing import tagging_probe
        return tagging_probe(model, self.tokenizer, self.probe_train, self.probe_test)

    def run_one(self, run: Run) -> dict:
        """Pre-train one encoder with this arm's objective and steps from this seed, then probe it."""
        s = self.setup
        objective = "mlm" if run.arm == "mlm" else "electra"
        steps = self.steps(run.arm)
        model = self.model("mlm", run.seed) if objective == "mlm" else self.electra(run.seed)
        trainer = make_trainer(s.run_settings(run.seed, steps=steps), model, self.training_data(objective), progress=False)
        started, cpu = time.perf_counter(), time.process_time()
        history = trainer.fit()
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
        tokens = steps * s.batch_size * s.max_seq_len
        result = {"key": run.key, "arm": run.arm, "objective": objective, "seed": run.seed, "steps": steps,
                  "train_flops": tokens * self.flops_per_token(objective), "train_loss": history.last("loss")}
        if objective == "electra":  # the generator's fill-in-the-blank, and the discriminator's held-out task
            held_out = evaluate_model(model, self.electra_eval, batch_size=s.batch_size, collate_fn=self.electra_eval.collate,
                                      metrics_fn=electra_metrics, device=trainer.device, model_kwargs={"masked_only": True})
            share = held_out["replaced_share"]  # always answering "replaced with probability share" scores its entropy:
            base_rate = -(share * math.log(share) + (1 - share) * math.log(1 - share))  # the discriminator's plateau
            result.update(rtd_loss=held_out["rtd_loss"], rtd_base_rate_loss=base_rate,
                          rtd_accuracy=held_out["rtd_accuracy"], replaced_share=share)
        fill_in = self.evaluate(model if objective == "mlm" else model.generator)
        sentiment = self.sentiment(model)
        return {**result, "fill_in_the_blank_loss": fill_in["mlm_loss"],
                "fill_in_the_blank_accuracy": fill_in["mlm_accuracy"], "pos_accuracy": self.tagging(model)["accuracy"],
                **({"sst2_accuracy": sentiment["accuracy"]} if sentiment else {}),
                "train_seconds": round(seconds, 1), "cpu_seconds": round(cpu_seconds, 1), "device": str(trainer.device)}


def summary(runs: list[dict]) -> dict[str, dict[str, tuple[float, float, int]]]:
    """arm -> measure -> (mean, standard deviation over seeds, seeds)."""
    out = {}
    for arm in ARMS:
        chosen = [r for r in runs if r["arm"] == arm]
        if chosen:
            out[arm] = {m: mean_sd_n(r[m] for r in chosen) for m in MEASURES if all(m in r for r in chosen)}
    return out


def against_mlm(runs: list[dict], measure: str = "pos_accuracy") -> dict[str, tuple[float, float]]:
    """ELECTRA arm -> (its mean ``measure`` minus the masked LM's, the standard error of that difference),
    `difference_and_error` over the seeds; arms with fewer than two seeds are left out."""
    values = {arm: [r[measure] for r in runs if r["arm"] == arm and measure in r] for arm in ARMS}
    return {arm: difference_and_error(values[arm], values["mlm"]) for arm in ARMS[1:]
            if len(values[arm]) > 1 and len(values["mlm"]) > 1}


def table(runs: list[dict]) -> str:
    """Markdown: per arm, steps, compute and the probes (mean ± sd over seeds), and the differences from MLM."""
    lines = ["| arm | steps | train TFLOPs | CPU s | POS probe % | SST-2 probe % | blank acc % | seeds |",
             "|---|---|---|---|---|---|---|---|"]
    flops = {arm: statistics.fmean(r["train_flops"] for r in runs if r["arm"] == arm) for arm in summary(runs)}
    for arm, m in summary(runs).items():
        sst2 = f"{100 * m['sst2_accuracy'][0]:.1f} ± {100 * m['sst2_accuracy'][1]:.1f}" if "sst2_accuracy" in m else ""
        lines.append(f"| {arm} | {m['steps'][0]:.0f} | {flops[arm] / 1e12:.1f} | {m['cpu_seconds'][0]:.0f} | "
                     f"{100 * m['pos_accuracy'][0]:.2f} ± {100 * m['pos_accuracy'][1]:.2f} | {sst2} | "
                     f"{100 * m['fill_in_the_blank_accuracy'][0]:.1f} | {m['pos_accuracy'][2]} |")
    for arm, m in summary(runs).items():
        if "rtd_loss" in m:
            lines.append(f"\n{arm}: discriminator's held-out loss {m['rtd_loss'][0]:.4f}, always answering the base rate "
                         f"{m['rtd_base_rate_loss'][0]:.4f} ({100 * m['replaced_share'][0]:.1f}% of tokens replaced)")
    for measure in ("pos_accuracy", "sst2_accuracy"):
        for arm, (difference, error) in against_mlm(runs, measure).items():
            lines.append(f"\n{arm} − mlm, {measure}: {100 * difference:+.2f} ± {100 * error:.2f} points"
                         f" ({'more' if abs(difference) > 2 * error else 'not more'} than two standard errors)")
    return "\n".join(lines)


@dataclass
class ElectraSettings:
    """``minibert experiment electra``: which arms and seeds, their shared setup, and the results file."""
    out: str                                               # results file (JSON) to write, and to go on from
    arms: tuple[str, ...] = DEFAULT_ARMS
    seeds: tuple[int, ...] = (0, 1, 2)
    setup: ElectraSetup = field(default_factory=ElectraSetup)

    def __post_init__(self):
        self.out = os.fspath(self.out)
        self.arms, self.seeds = tuple(self.arms), tuple(self.seeds)
        electra_grid(self.arms, self.seeds)  # checks the names


def experiment(settings: ElectraSettings, command: str | None = None) -> Path:
    """Run the grid; ``command``: the command line that asked for it, recorded in the results file."""
    grid = ElectraComparison(settings.setup, settings.out, command)
    runs = grid.run(electra_grid(settings.arms, settings.seeds))
    print(table(runs))
    print(f"results: {settings.out}")
    return Path(settings.out)
