"""2018 → 2024 at the course's budget: what each of ModernBERT's changes buys a small model on a CPU.

ModernBERT (Warner et al. 2024) changed BERT in eight ways at once: pre-LN, a GeGLU feed-forward, no biases,
RoPE instead of learned positions, unpadding, alternating global and sliding-window attention, a higher
masking rate (MosaicBERT's 30%) and no next-sentence prediction. The paper measures them together at
2 trillion tokens; this grid asks what each buys at the course's budget: one CPU core for a few minutes.

Two ends, each changed one step at a time, every run at the **same CPU time** (the number of updates is set
from a timed calibration of that very model, so a change that makes a step dearer pays for it with fewer
steps, and one that makes it cheaper, as unpadding may, gets more):

- from BERT (2018: post-LN, learned positions, NSP on sentence pairs, 15% masking), one change added:
  no NSP (packed sentences), 30% masking, pre-LN;
- from ModernBERT (2024, all eight), one change taken back: the GeGLU (a plain GELU layer of the same
  parameters), the missing biases, RoPE (learned absolute positions instead), unpadding (padding rows through
  every layer), the sliding window (global attention in every layer), 30% masking (15%).

Pre-LN and no NSP are ModernBERT's whole design (it has no post-LN form and no NSP head), so they are
measured from the BERT end only. The variants are experiment-only subclasses and module swaps here: the
library's BERT and ModernBERT carry no flag for them. Each model is scored like every grid's: held-out
fill-in-the-blank (every scored position a [MASK]) and a linear part-of-speech probe on its last layer, beside
the unigram plateau and the word-identity line (tag = the word's most frequent tag). FLOPs are counted per
run as well (``6 · non-embedding parameters · tokens through the layers``, Kaplan et al.'s estimate,
plus attention's ``12 · L · H · T`` per token), since equal time on a CPU is not equal arithmetic.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ..analysis.conllu import load_ud_english_ewt
from ..analysis.probing import tagging_probe
from ..config import PRESETS
from ..modernbert import ModernBertConfig, ModernBertForMaskedLM, ModernBertModel
from ..modernbert.layers import ModernBertMLP
from ..pretraining import MLMMasking, PretrainingDataset
from ..recipes.pretrain import make_model, make_trainer
from ..unpadding import Packing
from .grid import PretrainingGrid, cpu_seconds_per_step, mean_sd_n
from .masking import AblationSetup


@dataclass(frozen=True)
class Row:
    label: str                  # as the table prints it
    family: str                 # "bert" or "modernbert"
    objective: str = "none"     # "nsp" (sentence pairs) or "none" (packed sentences)
    mlm_probability: float = 0.15
    change: str | None = None   # pre-ln | gelu | biases | learned-positions | padded | global


# name (for the command line) -> row; "bert/x": BERT with x added, "modern/x": ModernBERT with x in place of 2024's
ROWS = {
    "bert": Row("BERT (2018)", "bert", "nsp"),
    "bert/no-nsp": Row("BERT + no NSP", "bert", "none"),
    "bert/mask-30": Row("BERT + 30% masking", "bert", "nsp", 0.30),
    "bert/pre-ln": Row("BERT + pre-LN", "bert", "nsp", change="pre-ln"),
    "modern": Row("ModernBERT (2024)", "modernbert", mlm_probability=0.30),
    "modern/gelu": Row("ModernBERT − GeGLU (GELU)", "modernbert", mlm_probability=0.30, change="gelu"),
    "modern/biases": Row("ModernBERT − no biases (biases)", "modernbert", mlm_probability=0.30, change="biases"),
    "modern/learned-positions": Row("ModernBERT − RoPE (learned positions)", "modernbert", mlm_probability=0.30,
                                    change="learned-positions"),
    "modern/padded": Row("ModernBERT − unpadding (padded)", "modernbert", mlm_probability=0.30, change="padded"),
    "modern/global": Row("ModernBERT − sliding window (global)", "modernbert", mlm_probability=0.30, change="global"),
    "modern/mask-15": Row("ModernBERT − 30% masking (15%)", "modernbert"),
}
CALIBRATION_STEPS = 60  # six log windows of 10: the median of the five after the first (ELECTRA's grid times alike)


@dataclass(kw_only=True)
class ModernGridSetup(AblationSetup):
    """The shared recipe: the course BERT's (bert-mini's size, 128-token inputs, 8 a step, lr 1e-3, no
    dropout, an 8,000-piece vocabulary of its own) and a CPU budget per run instead of a number of steps.
    ModernBERT gets the same width, depth and heads, a GeGLU of the same parameters as BERT's feed-forward
    (I = 8H/3), a window of ``local_attention`` tokens and global attention in every third layer."""
    preset: str = "bert-mini"
    corpus: tuple[str, ...] = ("wikipedia_2015",)
    vocab_size: int = 8000
    max_seq_len: int = 128
    batch_size: int = 8
    warmup_ratio: float = 0.05
    budget_minutes: float = 15.0    # CPU time of training per run (one thread)
    local_attention: int = 32       # a quarter of the sequence, as 128 of 8,192 is short in ModernBERT's own

    def __post_init__(self):
        super().__post_init__()  # the preset checked there
        if not self.budget_minutes > 0:
            raise ValueError(f"budget_minutes must be positive, got {self.budget_minutes!r}")


@dataclass(frozen=True)
class Run:
    row: str
    seed: int

    @property
    def key(self) -> str:
        return f"{self.row}#{self.seed}"


def modern_grid(rows=tuple(ROWS), seeds=(0, 1, 2)) -> list[Run]:
    for row in rows:
        if row not in ROWS:
            raise ValueError(f"unknown row {row!r}; choose among {', '.join(ROWS)}")
    return [Run(row, seed) for seed in seeds for row in rows]  # seed by seed: one seed of every row comes first


# --- 2024's changes taken back, one at a time (experiment-only: nothing in the library knows of them) ---

class PlainMLP(ModernBertMLP):
    """BERT's feed-forward, GELU(x W_i) W_o, in place of the GeGLU: width 3I/2 keeps the parameters equal."""

    def __init__(self, config: ModernBertConfig):
        super().__init__(config)
        width = 3 * config.intermediate_size // 2
        self.Wi = nn.Linear(config.hidden_size, width, bias=config.mlp_bias)
        self.Wo = nn.Linear(width, config.hidden_size, bias=config.mlp_bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.Wo(self.drop(self.act(self.Wi(x))))  # (N, H) -> (N, 3I/2) -> (N, H)


class LearnedPositions(ModernBertModel):
    """2018's positions in 2024's encoder: a learned vector per position added to the token's embedding,
    and RoPE's rotation made the identity (cos 1, sin 0)."""

    def __init__(self, config: ModernBertConfig):
        super().__init__(config)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        nn.init.trunc_normal_(self.position_embeddings.weight, std=config.initializer_range,
                              a=-2 * config.initializer_range, b=2 * config.initializer_range)

    def embed(self, input_ids: Tensor, packing: Packing) -> Tensor:
        e = self.embeddings
        tokens = e.tok_embeddings(input_ids.flatten().index_select(0, packing.indices))  # (N, H)
        return e.drop(e.norm(tokens + self.position_embeddings(packing.positions)))    # (N, H)

    def rotary_angles(self, packing: Packing) -> dict[str, tuple[Tensor, Tensor]]:
        N, d = packing.indices.numel(), self.config.head_dim
        still = (torch.ones(N, d, device=packing.indices.device), torch.zeros(N, d, device=packing.indices.device))
        return {kind: still for kind in set(self.config.layer_types or ())}


class Padded(ModernBertModel):
    """No unpadding: every (B, T) row, padding included, goes through embeddings, projections and
    feed-forward, as in BERT; attention still masks the padding, so only the cost changes."""

    def pack(self, attention_mask: Tensor, packed_positions: Tensor | None = None) -> Packing:
        return Packing.of(torch.ones_like(attention_mask))  # every position, whatever the real tokens are


def modern_config(setup: ModernGridSetup, vocab_size: int, pad_token_id: int, change: str | None) -> ModernBertConfig:
    biases = change == "biases"
    return ModernBertConfig.from_preset(  # the preset's L, H, A; a GeGLU of BERT's feed-forward parameters
        setup.preset, vocab_size=vocab_size, max_position_embeddings=setup.max_seq_len, pad_token_id=pad_token_id,
        local_attention=setup.local_attention, global_attn_every_n_layers=1 if change == "global" else 3,
        attention_bias=biases, mlp_bias=biases, norm_bias=biases, embedding_dropout=setup.dropout,
        attention_dropout=setup.dropout, mlp_dropout=setup.dropout)


def modern_model(setup: ModernGridSetup, vocab_size: int, pad_token_id: int, change: str | None,
                 seed: int) -> ModernBertForMaskedLM:
    """ModernBERT at the setup's size with ``change`` taken back; the seed decides the initial weights."""
    torch.manual_seed(seed)
    mlm = ModernBertForMaskedLM(modern_config(setup, vocab_size, pad_token_id, change))
    encoder_class = {"learned-positions": LearnedPositions, "padded": Padded}.get(change)
    if encoder_class is not None:
        mlm.model = encoder_class(mlm.config)
    if change == "gelu":
        for layer in mlm.model.layers:
            layer.mlp = PlainMLP(mlm.config)
    mlm.init_weights()  # the paper's initialisation of whatever was swapped in, and the decoder tied again
    return mlm


def flops_per_token(model: nn.Module, setup: ModernGridSetup) -> float:
    """Training FLOPs per token through the layers: 6 · non-embedding parameters + 12 · L · H · T (attention)."""
    layers, hidden, _ = PRESETS[setup.preset]
    embedding = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Embedding))
    parameters = sum(p.numel() for p in model.parameters()) - embedding
    return 6.0 * parameters + 12.0 * layers * hidden * setup.max_seq_len


@dataclass
class ModernGrid(PretrainingGrid):
    """>>> grid = ModernGrid(ModernGridSetup(budget_minutes=3), "results/modern.json")
    >>> results = grid.run(modern_grid(seeds=(0,)))"""
    setup: ModernGridSetup = field(default_factory=ModernGridSetup)

    def __post_init__(self):
        probe = self.setup.probe_sentences
        self.probe_train, self.probe_test = ([[(w.form, w.upos) for w in sentence.words]
                                              for sentence in load_ud_english_ewt(split)[:probe]] for split in ("dev", "test"))
        super().__post_init__()

    def measure_references(self) -> dict[str, float]:
        untrained = self.model(Run("bert", 0))
        tagging = tagging_probe(encoder(untrained), self.tokenizer, self.probe_train, self.probe_test)
        return {"unigram_loss": self.unigram_loss(), "untrained_pos_accuracy": tagging["accuracy"],
                "word_identity_pos_accuracy": tagging["majority_accuracy"]}

    def model(self, run: Run) -> nn.Module:
        row, s = ROWS[run.row], self.setup
        if row.family == "bert":
            layers, hidden, heads = PRESETS[s.preset]
            return make_model(self.settings(run), self.tokenizer, num_hidden_layers=layers, hidden_size=hidden,
                              num_attention_heads=heads, intermediate_size=4 * hidden,
                              max_position_embeddings=s.max_seq_len, pre_layer_norm=row.change == "pre-ln")
        return modern_model(s, self.tokenizer.vocab_size, self.tokenizer.pad_token_id, row.change, run.seed)

    def settings(self, run: Run, steps: int | None = None):
        row = ROWS[run.row]
        return self.setup.run_settings(run.seed, objective=row.objective, mlm_probability=row.mlm_probability,
                                       **({"steps": steps} if steps else {}))

    def data(self, run: Run) -> PretrainingDataset:
        row = ROWS[run.row]
        return PretrainingDataset(self.objective_examples(row.objective), MLMMasking(self.tokenizer, row.mlm_probability))

    def cpu_seconds_per_step(self, run: Run) -> float:
        """CPU seconds of one update of this row's model on its own data (`cpu_seconds_per_step`): timed once per
        row and kept with the references, so that every seed of a row trains the same number of steps and a grid
        that goes on later keeps them."""
        timed = self.references.setdefault("cpu_s_per_step", {})
        if run.row not in timed:
            first = Run(run.row, 0)
            timed[run.row] = cpu_seconds_per_step(self.settings(first, CALIBRATION_STEPS), self.model(first), self.data(run))
            self._save()
        return timed[run.row]

    def run_one(self, run: Run) -> dict:
        """Train this row from this seed for the setup's CPU budget (the row's steps), then measure it."""
        per_step = self.cpu_seconds_per_step(run)
        steps = max(10, round(self.setup.budget_minutes * 60 / per_step))
        model, data = self.model(run), self.data(run)
        trainer = make_trainer(self.settings(run, steps), model, data, progress=False, out_dir=None)
        started, cpu = time.perf_counter(), time.process_time()
        history = trainer.fit()
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
        fill_in = self.evaluate(model)
        tagging = tagging_probe(encoder(model), self.tokenizer, self.probe_train, self.probe_test)
        tokens = steps * self.setup.batch_size * self.setup.max_seq_len  # an upper bound: pairs are often shorter
        return {"key": run.key, "row": run.row, "label": ROWS[run.row].label, "seed": run.seed, "steps": steps,
                "cpu_s_per_step": per_step,
                "train_cpu_seconds": round(cpu_seconds, 1), "train_seconds": round(seconds, 1),
                "train_loss": history.last("loss"), "fill_in_the_blank_loss": fill_in["mlm_loss"],
                "fill_in_the_blank_accuracy": fill_in["mlm_accuracy"], "pos_accuracy": tagging["accuracy"],
                "parameters": sum(p.numel() for p in model.parameters()),
                "train_flops": flops_per_token(model, self.setup) * tokens, "device": str(trainer.device)}


def encoder(model: nn.Module) -> nn.Module:
    """The encoder a probe reads: BERT's ``.bert``, ModernBERT's ``.model``."""
    if isinstance(model, ModernBertForMaskedLM):
        return model.model
    return getattr(model, "bert", model)


MEASURES = ("fill_in_the_blank_accuracy", "fill_in_the_blank_loss", "pos_accuracy", "steps", "train_flops")


def summary(runs: list[dict]) -> dict[str, dict[str, tuple[float, float, int]]]:
    """row -> measure -> (mean, standard deviation over seeds, seeds)."""
    rows: dict[str, list[dict]] = {}
    for r in runs:
        rows.setdefault(r["row"], []).append(r)
    return {row: {m: mean_sd_n(r[m] for r in done) for m in MEASURES} for row, done in rows.items()}


def table(runs: list[dict], references: dict) -> str:
    """The grid as Markdown, each row's mean ± sd over its seeds, the floors last."""
    lines = ["| | seeds | updates | fill-in-the-blank | held-out loss | POS probe | TFLOPs |",
             "|---|---|---|---|---|---|---|"]
    for row, m in summary(runs).items():
        acc, loss, pos, steps, flops = (m[k] for k in MEASURES)
        lines.append(f"| {ROWS[row].label} | {acc[2]} | {steps[0]:,.0f} | {100 * acc[0]:.1f}% ± {100 * acc[1]:.1f} | "
                     f"{loss[0]:.3f} ± {loss[1]:.3f} | {100 * pos[0]:.1f}% ± {100 * pos[1]:.1f} | {flops[0] / 1e12:.1f} |")
    lines.append(f"| unigram plateau | | | | {references['unigram_loss']:.3f} | | |")
    lines.append(f"| word identity (most frequent tag) | | | | | {100 * references['word_identity_pos_accuracy']:.1f}% | |")
    return "\n".join(lines)


@dataclass(kw_only=True)
class ModernSettings:
    """``minibert experiment modern``: which rows and seeds, their shared setup, and the results file."""
    out: str
    rows: tuple[str, ...] = tuple(ROWS)
    seeds: tuple[int, ...] = (0, 1, 2)
    setup: ModernGridSetup = field(default_factory=ModernGridSetup)

    def __post_init__(self):
        self.rows, self.seeds = tuple(self.rows), tuple(self.seeds)
        modern_grid(self.rows, self.seeds)  # unknown rows refused here, before any data is read


def experiment(settings: ModernSettings, command: str | None = None):
    grid = ModernGrid(settings.setup, settings.out, command)
    runs = grid.run(modern_grid(settings.rows, settings.seeds))
    print(table(runs, grid.references))
    print(f"results: {settings.out}")
    return settings.out
