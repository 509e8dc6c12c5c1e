"""``minibert pretrain``: BERT's pre-training (Devlin et al. §3.1, §A.2) at any size.

Text → WordPiece → NSP/SOP pairs or packed sentences → dynamic 15% masking → `Trainer`. Every knob
of the masking ablations (notebook 05) is a setting (`PretrainSettings`), and the output folder is
a checkpoint that ``BertForPreTraining.from_pretrained`` (or transformers) loads, with its
tokenizer beside it. ``minibert export`` (`minibert.recipes.export`) turns it into a model to ship.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..config import ALBERT_PRESETS, PRESETS, BertConfig, read_json
from ..heads import BertForMaskedLM, BertForPreTraining
from ..pretraining import (OBJECTIVES, MLMMasking, build_pretraining_data, fill_in_the_blank_data, load_documents,
                           pretraining_metrics, unigram_loss)
from ..tokenizer import BertTokenizer
from ..training import PRECISIONS, TrainConfig, Trainer, find_checkpoints

DEFAULT_TOKENIZER = "sentence-transformers/all-MiniLM-L6-v2"  # the bert-base-uncased vocabulary


@dataclass(kw_only=True)
class PretrainSettings:
    """A pre-training run as plain data; the defaults are ``minibert pretrain``'s (see its --help), and
    recipe.json stores them as they are (``asdict``), so a run can be repeated and described."""
    out: str                                    # checkpoints (step-N/), tokenizer/, history.json, recipe.json
    preset: str = "bert-tiny"                   # a BERT or ALBERT size (`minibert.config.PRESETS`, `ALBERT_PRESETS`)
    init_from: str | None = None                # or go on pre-training a BERT (Hub id or folder): its encoder,
                                                # config and vocabulary; the heads it lacks start fresh
    corpus: tuple[str, ...] = ("wikitext2_raw/wiki.valid.raw",)   # training text: corpora, DATASET/FILE or paths
    eval_corpus: tuple[str, ...] = ("wikitext2_raw/wiki.test.raw",)  # held-out text; () for none
    tokenizer: str = DEFAULT_TOKENIZER          # a Hub id or folder with the vocabulary,
    vocab_size: int | None = None               # or train a new WordPiece vocabulary of this size on the corpus
    objective: str = "nsp"                      # nsp: BERT; sop: ALBERT; none: RoBERTa (MLM on packed sentences)
    max_seq_len: int = 128                      # tokens per example, [CLS] and [SEP]s included
    mlm_probability: float = 0.15               # fraction of tokens to predict
    mask_same_rnd: tuple[float, float, float] = (0.8, 0.1, 0.1)  # of those: [MASK], kept, random token
    whole_word: bool = False                    # mask all pieces of a word together
    static_masking: bool = False                # masks drawn once up front (BERT), not per batch (RoBERTa)
    steps: int = 1000                           # optimizer updates
    time_budget: float | None = None            # seconds, then stop and save; resume goes on
    batch_size: int = 32                        # examples per micro-batch and process
    grad_accum: int = 1                         # micro-batches per update
    lr: float = 5e-4                            # peak learning rate (small models take more than BERT-base's 1e-4)
    warmup_ratio: float = 0.1                   # fraction of the steps of linear warmup
    dropout: float = 0.1                        # on hidden states and attention weights (the paper's 0.1)
    pre_layer_norm: bool = False                # pre-LN layers (later models, Cramming) instead of BERT's post-LN
    eval_every: int | None = None               # None: evaluate at the end
    save_every: int | None = None               # None: a checkpoint at the end
    precision: str = "auto"                     # auto: bf16 on CUDA, fp32 on CPU
    compile: bool = False                       # torch.compile the model (GPU)
    device: str = "auto"                        # auto: CUDA, then MPS, then CPU
    seed: int = 0                               # of the data, the masks and the initial weights
    resume: bool = False                        # go on from the latest checkpoint in out

    def __post_init__(self):
        self.out = os.fspath(self.out)
        self.corpus, self.eval_corpus = (tuple([c] if isinstance(c, (str, os.PathLike)) else c)
                                         for c in (self.corpus, self.eval_corpus))
        self.mask_same_rnd = tuple(self.mask_same_rnd)
        if self.time_budget is not None:
            self.time_budget = float(self.time_budget)  # as the command line gives it: recipe.json stays alike
        if self.preset not in PRESETS and self.preset not in ALBERT_PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {', '.join([*PRESETS, *ALBERT_PRESETS])}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        for name in ("max_seq_len", "steps", "batch_size", "grad_accum", "vocab_size", "eval_every", "save_every"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not 0 < self.mlm_probability <= 1:
            raise ValueError(f"mlm_probability must be in (0, 1], got {self.mlm_probability}")
        if len(self.mask_same_rnd) != 3 or min(self.mask_same_rnd) < 0 or abs(sum(self.mask_same_rnd) - 1) > 1e-6:
            raise ValueError(f"mask_same_rnd must be three shares >= 0 that add up to 1 (MASK, SAME, RND), "
                             f"got {self.mask_same_rnd}")
        if not (0 <= self.dropout < 1 and 0 <= self.warmup_ratio < 1):
            raise ValueError(f"dropout and warmup_ratio must be in [0, 1), got {self.dropout} and {self.warmup_ratio}")
        if self.time_budget is not None and self.time_budget <= 0:
            raise ValueError(f"time_budget must be positive seconds, got {self.time_budget}")
        if self.init_from is not None and self.pre_layer_norm:
            raise ValueError(f"pre_layer_norm builds a new model; init_from={self.init_from!r} keeps that model's layers")
        if self.init_from is not None and self.vocab_size is not None:
            raise ValueError(f"init_from={self.init_from!r} keeps that model's vocabulary; leave out vocab_size "
                             f"({self.vocab_size}), which would train a new one the model's embeddings do not fit")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")


# Settings that decide the data, the masks and the model: a run resumed with other values would silently be a
# different run under the old run's recipe.json (the model card's provenance), so resuming refuses them.
RUN_DEFINING = ("corpus", "objective", "max_seq_len", "mlm_probability", "mask_same_rnd", "whole_word",
                "static_masking", "preset", "vocab_size", "init_from", "tokenizer", "pre_layer_norm", "dropout",
                "seed")


def check_out_folder(s: PretrainSettings) -> None:
    """Everything about ``out`` that can go wrong is found before anything is written to it."""
    out = Path(s.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder; choose a folder for the run")
    checkpoints = find_checkpoints(out) if out.is_dir() else []
    if not s.resume:
        if checkpoints:
            raise ValueError(f"{out} already holds a pre-training run ({checkpoints[-1].name}): --resume goes on "
                             "with it, or choose another --out; nothing was written")
        if (out / "tokenizer").exists() or (out / "recipe.json").exists():
            raise ValueError(f"{out} holds the tokenizer or recipe of another run; choose another --out (nothing "
                             "was written)")
        return
    recipe_file = out / "recipe.json"
    if not checkpoints or not recipe_file.is_file():
        return  # nothing to compare with: the Trainer says that it starts at step 0
    recorded = read_json(recipe_file, "run's recipe").get("args", {})
    now = json.loads(json.dumps(asdict(s), default=str))
    changed = [f"--{name.replace('_', '-')} {now[name]!r} (the run: {recorded[name]!r})"
               for name in RUN_DEFINING if name in recorded and recorded[name] != now[name]]
    if changed:
        raise ValueError(f"--resume with settings other than the run in {out}: " + "; ".join(changed) +
                         ". Resume with the run's own flags (its recipe.json lists them), or start a new run in "
                         "another --out; nothing was written")


def pretrain(settings: PretrainSettings) -> Path:
    """Run the recipe; returns the folder of the final checkpoint."""
    s = settings
    out = Path(s.out)
    check_out_folder(s)
    tokenizer_dir = out / "tokenizer"
    if s.resume and tokenizer_dir.exists():
        tokenizer = BertTokenizer.from_pretrained(tokenizer_dir)  # the vocabulary the checkpoint was trained with
    elif s.vocab_size:
        tokenizer = BertTokenizer.train(
            [" ".join(sentences) for sentences in load_documents(list(s.corpus))], vocab_size=s.vocab_size)
    else:
        tokenizer = BertTokenizer.from_pretrained(s.init_from or s.tokenizer)
    masking = MLMMasking(tokenizer, s.mlm_probability, s.mask_same_rnd, whole_word=s.whole_word)
    train_data = build_pretraining_data(tokenizer, list(s.corpus), s.objective, s.max_seq_len, masking=masking,
                                        static_masking=s.static_masking, seed=s.seed)
    # Held out: fill-in-the-blank (every scored token a [MASK]), the same test whatever the training masks.
    eval_data = (fill_in_the_blank_data(tokenizer, list(s.eval_corpus), s.objective, s.max_seq_len)
                 if s.eval_corpus else None)

    model_class = BertForMaskedLM if s.objective == "none" else BertForPreTraining
    dropout = dict(hidden_dropout_prob=s.dropout, attention_probs_dropout_prob=s.dropout)
    torch.manual_seed(s.seed)  # the initial weights: from the seed, not from whatever the generator holds
    if s.init_from:  # continued pre-training: the encoder's weights, fresh heads (the MLM decoder tied to them)
        model = model_class.from_pretrained(s.init_from, **dropout).train()
        if s.max_seq_len > model.config.max_position_embeddings:
            raise ValueError(f"max_seq_len={s.max_seq_len} is longer than {s.init_from}'s "
                             f"{model.config.max_position_embeddings} positions")
    else:
        config = BertConfig.from_preset(s.preset, vocab_size=tokenizer.vocab_size, pre_layer_norm=s.pre_layer_norm,
                                        max_position_embeddings=max(512, s.max_seq_len), **dropout)
        model = model_class(config)
    train_config = TrainConfig(
        max_steps=s.steps, batch_size=s.batch_size, grad_accum_steps=s.grad_accum, lr=s.lr,
        warmup_ratio=s.warmup_ratio, eval_every=s.eval_every, save_every=s.save_every,
        precision=s.precision, compile=s.compile, device=s.device, out_dir=str(out),
        time_budget_s=s.time_budget, seed=s.seed)
    # Masked-only decoding in training: the V-wide decoder runs at the ~15% masked positions only.
    trainer = Trainer(model, train_config, train_data, eval_data, collate_fn=train_data.collate,
                      metrics_fn=pretraining_metrics, model_kwargs={"masked_only": True},
                      eval_model_kwargs={"masked_only": True})
    if trainer.is_main:  # under torchrun every process built the same tokenizer; one writes it
        tokenizer.save_pretrained(tokenizer_dir)
    started = time.perf_counter()
    history = trainer.fit(resume=s.resume)
    if trainer.is_main:
        recipe = {"command": "minibert pretrain", "args": asdict(s),
                  "train_examples": len(train_data), "eval_examples": len(eval_data or []),
                  "parameters": sum(p.numel() for p in model.parameters()), "step": trainer.step,
                  "seconds_this_run": round(time.perf_counter() - started, 1), "device": str(trainer.device),
                  "precision": trainer.precision, "final": {k: v for k, v in history.records[-1].items()}}
        if eval_data is not None:
            recipe["unigram_loss"] = unigram_loss(train_data.examples, eval_data.examples, tokenizer.vocab_size)
        (out / "recipe.json").write_text(json.dumps(recipe, indent=2, default=str) + "\n")
    return out / f"step-{trainer.step:06d}"
