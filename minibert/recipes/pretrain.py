"""``minibert pretrain``: BERT's pre-training (Devlin et al. §3.1, §A.2) at any size, the one way to run it.

A run is five steps, each a function of its settings, so that a grid of runs (`minibert.experiments`)
or a benchmark composes the same steps instead of copying them:

1. text and tokenizer (`make_tokenizer`): the model's vocabulary, or a new WordPiece one;
2. data (`training_data`, `held_out_data`): WordPiece → NSP/SOP pairs or packed sentences → 15%
   masking, and the held-out fill-in-the-blank test;
3. model (`make_model`): a preset size, or a pre-trained BERT given the heads it lacks; BERT (2018) or
   ModernBERT (2024) at that size;
4. train (`make_trainer`): the `Trainer`, its settings translated from these in one place;
5. score (`score`): fill-in-the-blank (and NSP) on held-out text, against the unigram plateau.

`TrainingSettings` is the block of knobs all of them share. The output folder of `pretrain` is a
checkpoint that ``BertForPreTraining.from_pretrained`` (or transformers) loads, with its tokenizer
beside it; ``minibert export`` (`minibert.recipes.export`) turns it into a model to ship.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..atomic import saying_what_is_intact
from ..config import ALBERT_PRESETS, PRESETS, BertConfig
from ..heads import BertForMaskedLM, BertForPreTraining
from ..modernbert import ModernBertForMaskedLM
from ..out_folder import claimable, writing
from ..pretraining import (
    OBJECTIVES,
    MLMMasking,
    PretrainingDataset,
    build_pretraining_data,
    fill_in_the_blank_data,
    load_documents,
    pretraining_metrics,
    unigram_loss,
)
from ..tokenizer import BertTokenizer
from ..training import (
    AUTOCAST_DTYPES,
    PRECISIONS,
    TrainConfig,
    Trainer,
    evaluate,
    find_checkpoints,
    pick_device,
    pick_precision,
)
from .architecture import ARCHITECTURES, check_architecture, new_modernbert
from .run_record import refuse_changes, write_json

DEFAULT_TOKENIZER = "sentence-transformers/all-MiniLM-L6-v2"  # the bert-base-uncased vocabulary
MAX_SEQ_LEN = 8192  # a longer example is a typo here: a (T, T) score matrix per head and layer


@dataclass(kw_only=True)
class TrainingSettings:
    """The knobs every pre-training run has, whoever runs it: what it reads, how big its inputs and its
    vocabulary are, and how it trains. Checked here, once; `PretrainSettings` and the grids' setups
    (`minibert.experiments.grid.GridSetup`) add what is their own and give their own defaults."""
    corpus: tuple[str, ...] = ("wikitext2_raw/wiki.valid.raw",)   # training text: corpora, DATASET/FILE or paths
    eval_corpus: tuple[str, ...] = ("wikitext2_raw/wiki.test.raw",)  # held-out text; () or "none" for none
    vocab_size: int | None = None               # train a new WordPiece vocabulary of this size on the corpus
    max_seq_len: int = 128                      # tokens per example, [CLS] and [SEP]s included
    steps: int = 1000                           # optimizer updates
    batch_size: int = 32                        # examples per micro-batch and process
    lr: float = 5e-4                            # peak learning rate (small models take more than BERT-base's 1e-4)
    warmup_ratio: float = 0.1                   # fraction of the steps of linear warmup
    dropout: float = 0.1                        # on hidden states and attention weights (the paper's 0.1)
    pre_layer_norm: bool = False                # pre-LN layers (later models, Cramming) instead of BERT's post-LN
    precision: str = "auto"                     # auto: bf16 on CUDA, fp32 on CPU
    device: str = "auto"                        # auto: CUDA, then MPS, then CPU

    def __post_init__(self):
        self.corpus, self.eval_corpus = (tuple([c] if isinstance(c, (str, os.PathLike)) else c)
                                         for c in (self.corpus, self.eval_corpus))
        if "none" in self.eval_corpus:  # the command line's word for no held-out text (as --eval-corpus alone)
            if len(self.eval_corpus) > 1:
                raise ValueError(f"eval_corpus {' '.join(map(str, self.eval_corpus))!r}: none means no held-out text, "
                                 "so it stands alone; give none, or the held-out sources")
            self.eval_corpus = ()
        for name in ("max_seq_len", "steps", "batch_size", "vocab_size"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not 8 <= self.max_seq_len <= MAX_SEQ_LEN:
            raise ValueError(f"max_seq_len must be from 8 to {MAX_SEQ_LEN:,} tokens, got {self.max_seq_len:,}: an example "
                             "needs room for [CLS], [SEP]s and words, and attention's memory grows with the square of "
                             "the length (BERT trains at 128, then 512)")
        if not 0 < self.lr < float("inf"):
            raise ValueError(f"lr must be a positive number, got {self.lr} (BERT: 1e-4; small models 5e-4 to 1e-3)")
        if not (0 <= self.dropout < 1 and 0 <= self.warmup_ratio < 1):
            raise ValueError(f"dropout and warmup_ratio must be in [0, 1), got {self.dropout} and {self.warmup_ratio}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")

    def model_config(self, vocab_size: int, positions: int, preset: str | None = None, **config) -> BertConfig:
        """A new model's BertConfig: a preset's size (or ``config``'s sizes) with these settings' dropout and
        layer-norm placement; ``config`` overrides anything (ALBERT's sharing, a causal mask)."""
        fields = {**dict(vocab_size=vocab_size, max_position_embeddings=positions, hidden_dropout_prob=self.dropout,
                         attention_probs_dropout_prob=self.dropout, pre_layer_norm=self.pre_layer_norm), **config}
        return BertConfig.from_preset(preset, **fields) if preset else BertConfig(**fields)

    def train_config(self, seed: int, **more) -> TrainConfig:
        """The `Trainer`'s settings: the only place where these knobs become its names."""
        return TrainConfig(**{**dict(max_steps=self.steps, batch_size=self.batch_size, lr=self.lr,
                                     warmup_ratio=self.warmup_ratio, precision=self.precision, device=self.device,
                                     seed=seed), **more})

    def autocast(self):
        """The number format of evaluation: the one training uses on this device."""
        device = pick_device(self.device)
        precision = pick_precision(self.precision, device)
        return None if precision == "fp32" else torch.autocast(device.type, dtype=AUTOCAST_DTYPES[precision])


@dataclass(kw_only=True)
class PretrainSettings(TrainingSettings):
    """A pre-training run as plain data; the defaults are ``minibert pretrain``'s (see its --help), and
    recipe.json stores them as they are (``asdict``), so a run can be repeated and described."""
    out: str | None = None                      # checkpoints (step-N/), tokenizer/, history.json, recipe.json
    preset: str = "bert-tiny"                   # a BERT or ALBERT size (`minibert.config.PRESETS`, `ALBERT_PRESETS`)
    architecture: str = "bert"                  # bert: Devlin et al. 2018; modernbert: Warner et al. 2024 at the
                                                # preset's size (`ModernBertConfig.from_preset`)
    local_attention: int | None = None          # modernbert: its sliding window in tokens (None: 128, ModernBERT's,
                                                # or init_from's)
    init_from: str | None = None                # or go on pre-training a BERT (Hub id or folder): its encoder,
                                                # config and vocabulary; the heads it lacks start fresh
    extend_from: int | None = None              # init_from was trained on this many positions and one segment:
                                                # longer inputs start from copies of them (`extend_trained_length`)
    random_positions: int | None = None         # place each training sequence at a random offset among this many
                                                # positions: short sequences then train every position
    tokenizer: str = DEFAULT_TOKENIZER          # a Hub id or folder with the vocabulary (unless vocab_size)
    objective: str | None = None                # nsp: BERT; sop: ALBERT; none: RoBERTa, ModernBERT (MLM on packed
                                                # sentences); None: nsp for bert, none for modernbert
    mlm_probability: float = 0.15               # fraction of tokens to predict
    mask_same_rnd: tuple[float, float, float] = (0.8, 0.1, 0.1)  # of those: [MASK], kept, random token
    whole_word: bool = False                    # mask all pieces of a word together
    span_masking: bool = False                  # mask runs of whole words, 3.8 on average (SpanBERT)
    static_masking: bool = False                # masks drawn once up front (BERT), not per batch (RoBERTa)
    time_budget: float | None = None            # seconds, then stop and save; resume goes on
    grad_accum: int = 1                         # micro-batches per update
    eval_every: int | None = None               # None: evaluate at the end
    save_every: int | None = None               # None: a checkpoint at the end
    compile: bool = False                       # torch.compile the model (GPU)
    unpadded: bool = False                      # bert: the layers on the real tokens only (`minibert.unpadding`;
                                                # ModernBERT always is)
    num_workers: int = 0                        # processes that make the batches (pairs, masks) beside the training,
                                                # for a GPU the host cannot feed (a resumed run then draws other masks)
    seed: int = 0                               # of the data, the masks and the initial weights
    resume: bool = False                        # go on from the latest checkpoint in out

    def __post_init__(self):
        super().__post_init__()
        self.out = None if self.out is None else os.fspath(self.out)
        self.mask_same_rnd = tuple(self.mask_same_rnd)
        if self.time_budget is not None:
            self.time_budget = float(self.time_budget)  # as the command line gives it: recipe.json stays alike
        if self.preset not in PRESETS and self.preset not in ALBERT_PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {', '.join([*PRESETS, *ALBERT_PRESETS])}")
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}, got {self.architecture!r}")
        if self.objective is None:
            self.objective = "none" if self.architecture == "modernbert" else "nsp"
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        check_architecture(self)
        for name in ("grad_accum", "eval_every", "save_every"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.num_workers, int) or self.num_workers < 0:
            raise ValueError(f"num_workers must be an integer >= 0 (0: batches made in the training process), "
                             f"got {self.num_workers!r}")
        if self.unpadded and self.architecture != "bert":
            raise ValueError(f"unpadded is BERT's option; {self.architecture} runs on the real tokens only anyway")
        # The masking's own checks (MLMMasking), made now: a bad value fails before the text is read.
        MLMMasking.check(self.mlm_probability, self.mask_same_rnd, self.whole_word, self.span_masking)
        if self.time_budget is not None and self.time_budget <= 0:
            raise ValueError(f"time_budget must be positive seconds, got {self.time_budget}")
        if self.init_from is not None and self.pre_layer_norm:
            raise ValueError(f"pre_layer_norm builds a new model; init_from={self.init_from!r} keeps that model's layers")
        if self.extend_from is not None and (self.init_from is None or not 1 <= self.extend_from < self.max_seq_len):
            raise ValueError(f"extend_from={self.extend_from!r} is the sequence length that --init-from was trained "
                             f"at: it needs --init-from and must be shorter than max_seq_len ({self.max_seq_len})")
        if self.random_positions is not None and not self.max_seq_len <= self.random_positions <= 512:
            raise ValueError(f"random_positions={self.random_positions!r} is how many positions short sequences are "
                             f"spread over: from max_seq_len ({self.max_seq_len}) to the model's 512")
        if self.init_from is not None and self.vocab_size is not None:
            raise ValueError(f"init_from={self.init_from!r} keeps that model's vocabulary; leave out vocab_size "
                             f"({self.vocab_size}), which would train a new one the model's embeddings do not fit")


# Settings that decide the data, the masks and the model: a run resumed with other values would silently be a
# different run under the old run's recipe.json (the model card's provenance), so resuming refuses them.
RUN_DEFINING = ("corpus", "objective", "max_seq_len", "mlm_probability", "mask_same_rnd", "whole_word", "span_masking",
                "static_masking", "preset", "vocab_size", "init_from", "extend_from", "tokenizer", "pre_layer_norm",
                "dropout", "seed", "random_positions", "architecture", "local_attention")


# --- the five steps -------------------------------------------------------------------------------------
def make_tokenizer(s: PretrainSettings, saved: Path | None = None) -> BertTokenizer:
    """Step 1: the vocabulary. A resumed run's own (``saved``), a new WordPiece vocabulary trained on the
    corpus (``vocab_size``), or the tokenizer of the model pre-training goes on from."""
    if saved is not None and saved.exists():
        return BertTokenizer.from_pretrained(saved)  # the vocabulary the checkpoint was trained with
    if s.vocab_size:
        return BertTokenizer.train([" ".join(sentences) for sentences in load_documents(list(s.corpus))],
                                   vocab_size=s.vocab_size)
    return BertTokenizer.from_pretrained(s.init_from or s.tokenizer)


def training_data(s: PretrainSettings, tokenizer) -> PretrainingDataset:
    """Step 2a: the training examples (NSP/SOP pairs or packed sentences), masked as the settings say."""
    masking = MLMMasking(tokenizer, s.mlm_probability, s.mask_same_rnd, whole_word=s.whole_word,
                         spans=s.span_masking)
    data = build_pretraining_data(tokenizer, list(s.corpus), s.objective, s.max_seq_len, masking=masking,
                                  static_masking=s.static_masking, seed=s.seed)
    data.random_positions = s.random_positions
    return data


def held_out_data(s: PretrainSettings, tokenizer) -> PretrainingDataset | None:
    """Step 2b: the held-out fill-in-the-blank test (every scored token a [MASK], the same test whatever the
    training masks; with NSP/SOP, pairs of held-out sentences too), or None without held-out text."""
    return fill_in_the_blank_data(tokenizer, list(s.eval_corpus), s.objective, s.max_seq_len) if s.eval_corpus else None


def make_model(s: PretrainSettings, tokenizer, **config) -> BertForPreTraining | BertForMaskedLM | ModernBertForMaskedLM:
    """Step 3: a new model of the preset's size (``config`` overrides it: sizes, ALBERT's sharing, a causal
    mask) with MLM + NSP/SOP heads, or MLM alone for ``objective="none"``; with ``init_from``, that
    BERT's encoder and the heads it lacks, fresh; a ModernBERT for ``architecture="modernbert"``
    (`new_modernbert`). The seed decides the initial weights."""
    torch.manual_seed(s.seed)  # the initial weights: from the seed, not from whatever the generator holds
    if s.architecture == "modernbert":
        return new_modernbert(s, tokenizer, **config)
    model_class = BertForMaskedLM if s.objective == "none" else BertForPreTraining
    if s.init_from:  # continued pre-training: the encoder's weights, fresh heads (the MLM decoder tied to them)
        model = model_class.from_pretrained(s.init_from, hidden_dropout_prob=s.dropout,
                                            attention_probs_dropout_prob=s.dropout).train()
        if s.max_seq_len > model.config.max_position_embeddings:
            raise ValueError(f"max_seq_len={s.max_seq_len} is longer than {s.init_from}'s "
                             f"{model.config.max_position_embeddings} positions")
        if s.extend_from:
            extend_trained_length(model, s.extend_from)
        return model
    preset = None if "hidden_size" in config else s.preset
    return model_class(s.model_config(tokenizer.vocab_size, max(512, s.max_seq_len), preset, **config))


@torch.no_grad()
def extend_trained_length(model, trained: int) -> None:
    """Ready a model trained on ``trained``-token inputs of one segment for longer ones, of two segments.

    Its positions from ``trained`` on were never used: they hold their random initial vectors, and a
    longer input would mix that noise into every layer before training can fix it (measured: a
    bert-mini trained on 16 tokens fell from 24% to 7% fill-in-the-blank accuracy in its first 300
    steps at 128). Longformer (Beltagy et al. 2020, §5) met the same problem going from 512 positions
    to 4,096 and started the new ones as copies of the trained ones; here too, and segment B's
    embedding starts as a copy of segment A's for a model that never saw a sentence pair.
    """
    embeddings = model.bert.embeddings
    positions = embeddings.position_embeddings.weight                      # (max_positions, E)
    repeats = -(-positions.shape[0] // trained)                            # ceil
    positions.copy_(positions[:trained].repeat(repeats, 1)[:positions.shape[0]])
    embeddings.token_type_embeddings.weight[1:] = embeddings.token_type_embeddings.weight[0]


def make_trainer(s: PretrainSettings, model, train_data, eval_data=None, **train_config) -> Trainer:
    """Step 4: the `Trainer` for this run (``train_config``: more `TrainConfig` fields, e.g. ``progress``).
    Masked-only decoding: the V-wide MLM decoder runs at the ~15% masked positions only; with ``unpadded``,
    BERT's layers skip the padding too."""
    config = s.train_config(s.seed, **{**dict(grad_accum_steps=s.grad_accum, eval_every=s.eval_every,
                                              save_every=s.save_every, compile=s.compile, out_dir=s.out,
                                              time_budget_s=s.time_budget, num_workers=s.num_workers), **train_config})
    model_kwargs = {"masked_only": True, **({"unpadded": True} if s.unpadded else {})}
    return Trainer(model, config, train_data, eval_data, collate_fn=train_data.collate,
                   metrics_fn=pretraining_metrics, model_kwargs=model_kwargs, eval_model_kwargs=model_kwargs)


def score(s: TrainingSettings, model, eval_data: PretrainingDataset, batch_size: int | None = None,
          device: str | torch.device | None = None, progress: str | None = None) -> dict[str, float]:
    """Step 5: the held-out figures: fill-in-the-blank loss, accuracy and top-5 (and NSP's loss and
    accuracy on held-out pairs when the data has them), on the device and in the number format the run
    trains in (``device``: another one, e.g. "cpu" for a shipped model; ``progress``: a progress bar's label)."""
    device = pick_device(s.device) if device is None else torch.device(device)
    autocast = s.autocast() if device == _run_device(s) else None
    return evaluate(model.to(device), eval_data, batch_size=batch_size or s.batch_size, collate_fn=eval_data.collate,
                    metrics_fn=pretraining_metrics, device=device, autocast=autocast,
                    model_kwargs={"masked_only": True}, progress=progress)


def _run_device(s: TrainingSettings) -> torch.device | None:
    """The device the run trains on here; None where this machine has no such device (a run made on a
    GPU, scored or exported on a laptop)."""
    try:
        return pick_device(s.device)
    except ValueError:
        return None


def plateau(train_data: PretrainingDataset, eval_data: PretrainingDataset, vocab_size: int) -> float:
    """The unigram plateau of this training text on this held-out test (`unigram_loss`)."""
    return unigram_loss(train_data.examples, eval_data.examples, vocab_size)


# --- the recipe ----------------------------------------------------------------------------------------
# What a run writes in its folder, and may replace there (`minibert.out_folder`): nothing else is touched.
WRITES = ("tokenizer", "recipe.json", "history.json", "step-*", ".step-*.tmp")


def check_out_folder(s: PretrainSettings) -> None:
    """Everything about ``out`` that can go wrong is found before anything is written to it."""
    if s.out is None:
        raise ValueError("pretrain needs an out folder for its checkpoints, tokenizer and recipe.json")
    out = claimable(s.out, "minibert pretrain", WRITES)  # a new folder, or one minibert wrote: never the user's own
    checkpoints = find_checkpoints(out) if out.is_dir() else []
    if not s.resume:
        if checkpoints:
            raise ValueError(f"{out} already holds a pre-training run ({checkpoints[-1].name}): --resume goes on "
                             "with it, or choose another --out; nothing was written")
        if (out / "tokenizer").exists() or (out / "recipe.json").exists():
            raise ValueError(f"{out} holds the tokenizer or recipe of another run; --resume goes on with it, or "
                             "choose another --out (nothing was written)")
        return
    if checkpoints:  # recipe.json is written when a run starts: an interrupted run is checked too
        refuse_changes(out / "recipe.json", "args", asdict(s), RUN_DEFINING, out)


def pretrain(settings: PretrainSettings) -> Path:
    """Run the five steps; returns the folder of the final checkpoint.

    The out folder is locked while the run writes it (a second run on it is refused at once), and a full
    disk ends the run with a `DiskFullError` that says which checkpoint is intact."""
    s = settings
    check_out_folder(s)  # before the folder is made or locked: a refused run touches nothing
    with writing(s.out, "minibert pretrain", WRITES) as out:
        check_out_folder(s)  # again, now that no other command can be writing it
        with saying_what_is_intact(lambda: _last_checkpoint(out)):
            return _pretrain(s, out)


def _last_checkpoint(out: Path) -> str:
    checkpoints = find_checkpoints(out)
    return f"the last checkpoint {checkpoints[-1]} is intact" if checkpoints else "no checkpoint had been saved yet"


def _pretrain(s: PretrainSettings, out: Path) -> Path:
    tokenizer = make_tokenizer(s, out / "tokenizer" if s.resume else None)
    train_data, eval_data = training_data(s, tokenizer), held_out_data(s, tokenizer)
    model = make_model(s, tokenizer)
    trainer = make_trainer(s, model, train_data, eval_data)
    if trainer.is_main:  # under torchrun every process built the same tokenizer; one writes it
        tokenizer.save_pretrained(out / "tokenizer")
        if not find_checkpoints(out):  # what defines the run, from its start (the rest is added at its end)
            write_json(out / "recipe.json", {"command": "minibert pretrain", "args": asdict(s)})
    started, cpu_started = time.perf_counter(), time.process_time()
    history = trainer.fit(resume=s.resume)
    if trainer.is_main:
        recipe = {"command": "minibert pretrain", "args": asdict(s),
                  "train_examples": len(train_data), "eval_examples": len(eval_data or []),
                  "parameters": sum(p.numel() for p in model.parameters()), "step": trainer.step,
                  "seconds_this_run": round(time.perf_counter() - started, 1), "device": str(trainer.device),
                  # on a shared machine wall time is not the work done: the card gives this process's CPU time too
                  "cpu_seconds_this_run": round(time.process_time() - cpu_started, 1),
                  "precision": trainer.precision, "final": {k: v for k, v in history.records[-1].items()}}
        if eval_data is not None:
            recipe["unigram_loss"] = plateau(train_data, eval_data, tokenizer.vocab_size)
        write_json(out / "recipe.json", recipe)
    return out / f"step-{trainer.step:06d}"
