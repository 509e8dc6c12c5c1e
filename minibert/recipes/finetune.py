"""Fine-tuning recipes: ``minibert finetune TASK`` (`finetune`) and ``minibert evaluate TASK`` (`evaluate`).

Fine-tuning (Devlin et al. 2018, §4 and §A.3) starts from a pre-trained BERT, adds one task layer
and trains everything for 2 to 4 epochs with a peak learning rate of 2e-5 to 5e-5, batches of 16 or
32 and a linear warmup over the first 10% of the steps. Those are the "paper" preset of
`Hyperparameters`; the "cpu" preset cuts a run to what a laptop does in minutes (fewer steps, a
time budget, shorter inputs). What differs between tasks (model class, data, score) is in
`minibert.tasks.registry`.

A run trains with the `Trainer` (checkpoints in ``OUT/checkpoints``, so ``resume`` goes on after
an interruption), scores the model on held-out data with the task's own ``evaluate``, and leaves a
model folder: ``save_pretrained``'s weights, which minibert and transformers load, the tokenizer,
``predictions.json`` and ``results.json`` (the metric, every setting, the time, the device and
which data every number comes from). Held-out data, per task:

    sst2   train on GLUE SST-2 train (67,349 phrases), evaluate on its dev set (872)
    squad  train on SQuAD v1.1 train, evaluate on dev; offline, where only the dev set exists,
           split the dev set by article into train and eval (and say so)
    pos    UD English EWT has no train split offline: train on its dev split, evaluate on test
    mrpc   train on GLUE MRPC train (3,668 pairs), evaluate on dev (408) or, with split="test", on its
    stsb   labelled test set (1,725), where the paper's figure is; STS-B alike (5,749 / 1,500 / 1,379)
    rte    train on GLUE RTE train (2,490), evaluate on dev (277); its test labels are secret
    qnli   evaluate only: QNLI dev (5,463); its train set is not in the offline data
    snli   SNLI stands in for MNLI, and has no train split offline: train on dev, evaluate on test
    ner    CoNLL-2003: train on eng.train, evaluate on dev (eng.testa) or test (eng.testb, the paper's)
    wnut17 WNUT-17: train on train, evaluate on dev or test
``split`` chooses the held-out split where a task has more than one (and SQuAD's offline split).
"""
from __future__ import annotations

import json
import math
import os
import shlex
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import torch

from ..atomic import atomic_path, saying_what_is_intact
from ..config import read_json
from ..out_folder import claimable, writing
from ..tasks import get_task, tagging
from ..tokenizer import BertTokenizer
from ..training import PRECISIONS, TrainConfig, Trainer, find_checkpoints, pick_device
from .run_record import PER_CALL, refuse_changes, write_json


@dataclass(frozen=True)
class Hyperparameters:
    """How to fine-tune a task, as plain data; the defaults are the paper's (§A.3)."""
    lr: float = 2e-5                      # peak learning rate: the paper searches 2e-5 to 5e-5
    batch_size: int = 32                  # 16 or 32
    epochs: float = 3.0                   # 2 to 4; sets the steps when max_steps is None
    max_steps: int | None = None          # optimizer updates; None: epochs × batches per epoch
    time_budget_s: float | None = None    # stop training after this many seconds, then evaluate and save
    max_length: int = 128                 # tokens per input (SQuAD: per window, windows overlapping by a third)
    warmup_ratio: float = 0.1             # linear warmup over the first 10% of the steps
    train_examples: int | None = None     # None: the whole training set; N: N of it drawn with the seed
    eval_examples: int | None = None      # None: the whole held-out set; N: its first N

    def __post_init__(self):
        for name in ("batch_size", "max_steps", "max_length", "train_examples", "eval_examples"):
            check_whole_number(name, getattr(self, name))
        for name in ("lr", "epochs", "time_budget_s"):
            check_positive_number(name.removesuffix("_s"), getattr(self, name))
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError(f"warmup-ratio must be in [0, 1), got {self.warmup_ratio!r}")


def check_positive_number(name: str, value):
    """``value`` if it is None or a positive, finite number (not a bool, not a string); else a ValueError naming the
    flag. One check for the presets' `Hyperparameters` and the settings given on top of them."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not 0 < value < math.inf):
        raise ValueError(f"{name.replace('_', '-')} must be a positive, finite number, got {value!r}")
    return value


def check_whole_number(name: str, value, least: int = 1):
    """``value`` if it is None or an integer of at least ``least`` (not a bool); else a ValueError naming the flag."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
        kind = "a positive integer" if least == 1 else f"a whole number of {least} or more"
        raise ValueError(f"{name.replace('_', '-')} must be {kind}, got {value!r}")
    return value


_PAIR_TASKS, _NER_TASKS = ("mrpc", "stsb", "rte", "qnli", "snli"), ("ner", "wnut17")
# "paper": §A.3 (GLUE: §4.1, 3 epochs with batches of 32, the best of 5e-5 to 2e-5 on dev; SQuAD: §4.2, 3 epochs
# at 5e-5 with batches of 32, windows of 384 tokens). "cpu": minutes on a laptop; a run that short needs larger
# steps, and small BERTs take them (Turc et al. 2019 fine-tune theirs at up to 1e-4).
PRESETS: dict[str, dict[str, Hyperparameters]] = {
    "paper": {"sst2": Hyperparameters(lr=2e-5, batch_size=32, epochs=3, max_length=128),
              "squad": Hyperparameters(lr=5e-5, batch_size=32, epochs=3, max_length=384),
              "pos": Hyperparameters(lr=5e-5, batch_size=16, epochs=4, max_length=128),
              **{task: Hyperparameters(lr=2e-5, batch_size=32, epochs=3, max_length=128) for task in _PAIR_TASKS},
              **{task: Hyperparameters(lr=5e-5, batch_size=16, epochs=4, max_length=128) for task in _NER_TASKS}},
    "cpu": {"sst2": Hyperparameters(lr=1e-4, batch_size=32, max_steps=600, time_budget_s=600, max_length=64),
            "squad": Hyperparameters(lr=1e-4, batch_size=16, max_steps=300, time_budget_s=900, max_length=256),
            "pos": Hyperparameters(lr=1e-4, batch_size=16, epochs=3, time_budget_s=600, max_length=128),
            **{task: Hyperparameters(lr=1e-4, batch_size=32, max_steps=400, time_budget_s=600, max_length=128)
               for task in _PAIR_TASKS},
            **{task: Hyperparameters(lr=1e-4, batch_size=16, max_steps=600, time_budget_s=600, max_length=128)
               for task in _NER_TASKS}},
}


@dataclass(kw_only=True)
class FinetuneSettings:
    """A fine-tuning run as plain data, ``minibert finetune``'s flags: a preset's `Hyperparameters`
    with the ones given here on top (None: the preset's). results.json repeats them as a command."""
    task: str                            # sst2, squad, pos, mrpc, ... (`minibert.tasks.TASKS`)
    model: str                           # the pre-trained BERT: a Hub id or a folder save_pretrained wrote
    tokenizer: str | None = None         # None: the same as model
    out: str                             # the fine-tuned model and tokenizer, results.json, predictions.json, checkpoints/
    preset: str = "auto"                 # paper, cpu, or auto: paper on a CUDA GPU, cpu elsewhere
    steps: int | None = None             # optimizer updates
    epochs: float | None = None          # passes over the training data, when steps is None
    time_budget: float | None = None     # seconds of training, then evaluate and save
    lr: float | None = None              # peak learning rate
    batch_size: int | None = None        # examples per update
    max_length: int | None = None        # tokens per input (squad: per window)
    train_examples: int | None = None    # N training examples drawn with the seed
    eval_examples: int | None = None     # the first N held-out examples
    eval_every: int | None = None        # also evaluate on the held-out data every N steps
    split: str | None = None             # the held-out split (e.g. dev or test); None: the task's default
    feature_based: bool = False          # pos: first probe the frozen model's features (Table 7)
    precision: str = "auto"              # auto: bf16 on CUDA, fp32 on CPU
    unpadded: bool = False               # the encoder on the real tokens only (`minibert.unpadding`); the same model
    device: str = "auto"                 # auto: CUDA, then MPS, then CPU
    seed: int = 0                        # of the new layer, dropout, data order and train_examples
    resume: bool = False                 # go on from the latest checkpoint in out/checkpoints

    def __post_init__(self):
        get_task(self.task)
        if self.feature_based and self.task != "pos":
            raise ValueError("--feature-based compares frozen features with fine-tuning on tagging: use it with pos")
        self.model, self.out = os.fspath(self.model), os.fspath(self.out)
        self.tokenizer = None if self.tokenizer is None else os.fspath(self.tokenizer)
        for name in ("epochs", "time_budget", "lr"):  # floats, as the command line gives them: the command stays alike
            if getattr(self, name) is not None:
                setattr(self, name, float(check_positive_number(name, getattr(self, name))))
        for name in ("steps", "batch_size", "max_length", "train_examples", "eval_examples", "seed"):
            check_whole_number(name, getattr(self, name), least=0 if name == "seed" else 1)
        if self.preset not in ("auto", *PRESETS):
            raise ValueError(f"preset must be auto, {' or '.join(PRESETS)}, got {self.preset!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.eval_every is not None and (not isinstance(self.eval_every, int) or self.eval_every < 1):
            raise ValueError(f"eval_every must be a positive integer, got {self.eval_every!r}")


@dataclass(kw_only=True)
class EvaluateSettings:
    """Scoring a fine-tuned model, ``minibert evaluate``'s flags; None: as its results.json recorded."""
    task: str                            # sst2, squad, pos, mrpc, ... (`minibert.tasks.TASKS`)
    model: str                           # a folder minibert finetune wrote, or a Hub id
    tokenizer: str | None = None         # None: the same as model
    eval_examples: int | None = None     # the first N held-out examples
    max_length: int | None = None        # tokens per input
    split: str | None = None             # the held-out split; None: as results.json recorded, else the task's default
    device: str = "auto"                 # auto: CUDA, then MPS, then CPU

    def __post_init__(self):
        get_task(self.task)
        self.model = os.fspath(self.model)
        self.tokenizer = None if self.tokenizer is None else os.fspath(self.tokenizer)


def hyperparameters(settings: FinetuneSettings, device_type: str) -> tuple[str, Hyperparameters]:
    """The preset (auto: paper on CUDA, cpu elsewhere) with the settings that were given on top."""
    s = settings
    preset = s.preset if s.preset != "auto" else "paper" if device_type == "cuda" else "cpu"
    given = {"max_steps": s.steps, "epochs": s.epochs, "time_budget_s": s.time_budget, "lr": s.lr,
             "batch_size": s.batch_size, "max_length": s.max_length,
             "train_examples": s.train_examples, "eval_examples": s.eval_examples}
    chosen = PRESETS[preset][s.task]
    if s.epochs is not None and s.steps is None:
        chosen = replace(chosen, max_steps=None)  # epochs given: they, not the preset's steps, set the length
    return preset, replace(chosen, **{k: v for k, v in given.items() if v is not None})


def check_max_length(model, max_length: int, name: str) -> None:
    """Inputs of ``max_length`` tokens need that many position embeddings: refuse a longer length before any data
    is encoded (a position beyond the table would fail deep in the first batch, or be read as garbage)."""
    positions = model.config.max_position_embeddings
    if max_length > positions:
        raise ValueError(f"--max-length {max_length:,} is longer than {name} can read: it has {positions:,} "
                         f"position embeddings. Give --max-length {positions} or less")


# What a run writes in its folder, and may replace there (`minibert.out_folder`): nothing else is touched.
WRITES = ("checkpoints", "config.json", "model.safetensors", "model.int8.safetensors", "vocab.txt", "tokenizer.json",
          "tokenizer_config.json", "predictions.json", "results.json")


def check_out_folder(s: FinetuneSettings) -> bool:
    """Everything about ``out`` that can go wrong, found before anything is written; whether it holds checkpoints."""
    out = claimable(s.out, "minibert finetune", WRITES)  # a new folder, or one minibert wrote: never the user's own
    if Path(s.model).exists() and out.resolve() == Path(s.model).resolve():
        raise ValueError(f"--out {out} is the model being fine-tuned, which the result would overwrite; name a new "
                         "folder")
    if (out / "config.json").is_file() and not (out / "results.json").is_file():
        raise ValueError(f"--out {out} holds a model that `minibert finetune` did not write there; name a new folder")
    has_checkpoints = bool(find_checkpoints(out / "checkpoints"))  # a run of this folder got that far
    if not s.resume and has_checkpoints:
        raise ValueError(f"{out} already holds a fine-tuning run: --resume goes on with it, or choose another --out")
    return has_checkpoints


def finetune(settings: FinetuneSettings) -> dict:
    """Run the recipe; prints the metric and returns what results.json holds.

    The out folder is locked while the run writes it (a second run on it is refused at once), and a full
    disk ends the run with a `DiskFullError` that says which checkpoint is intact."""
    check_out_folder(settings)  # before the folder is made or locked: a refused run touches nothing
    with writing(settings.out, "minibert finetune", WRITES) as out:
        has_checkpoints = check_out_folder(settings)  # again, now that no other command can be writing it
        checkpoints = out / "checkpoints"
        with saying_what_is_intact(lambda: _last_checkpoint(checkpoints)):
            return _finetune(settings, out, has_checkpoints)


def _last_checkpoint(folder: Path) -> str:
    checkpoints = find_checkpoints(folder)
    return (f"the run's last checkpoint {checkpoints[-1]} is intact" if checkpoints
            else "no checkpoint had been saved yet")


def _finetune(s: FinetuneSettings, out: Path, has_checkpoints: bool) -> dict:
    task = get_task(s.task)
    device = pick_device(s.device)
    preset, h = hyperparameters(s, device.type)
    defining = {"task": task.name, "model": s.model, "tokenizer": s.tokenizer, "seed": s.seed, "split": s.split,
                "max_length": h.max_length, "train_examples": h.train_examples}
    record = out / "checkpoints" / "run.json"  # written when the run starts: an interrupted run is checked too
    if s.resume and has_checkpoints:
        refuse_changes(record, "settings", defining, tuple(defining), out)
    torch.manual_seed(s.seed)  # the new layer's initial weights: from the seed, not from the generator's state
    model = task.new_model(s.model)
    check_max_length(model, h.max_length, s.model)
    tokenizer = BertTokenizer.from_pretrained(s.tokenizer or s.model)
    task_inputs = task.build_data(tokenizer, model, max_length=h.max_length, train_examples=h.train_examples,
                                  eval_examples=h.eval_examples, seed=s.seed, split=s.split)
    results = {"task": task.name, "model": s.model, "command": command_line(s), "data": task_inputs.description,
               "preset": preset, "settings": asdict(h), "seed": s.seed}
    if s.feature_based:
        started = time.perf_counter()
        results["feature_based"] = tagging.feature_based(model.to(device), tokenizer, *task_inputs.examples,
                                                         seed=s.seed)
        results["feature_based_seconds"] = round(time.perf_counter() - started, 1)

    batches_per_epoch = len(task_inputs.train) // h.batch_size
    steps = h.max_steps or max(1, round(h.epochs * batches_per_epoch))
    config = TrainConfig(max_steps=steps, batch_size=h.batch_size, lr=h.lr, warmup_ratio=h.warmup_ratio,
                         eval_every=s.eval_every, precision=s.precision, device=s.device,
                         out_dir=str(out / "checkpoints"), keep_last=1, time_budget_s=h.time_budget_s, seed=s.seed,
                         group_by_length=True)  # SST-2: 3 to 66 tokens; random batches would be 2/3 padding
    # Held-out data goes to the Trainer only for evaluations during training; the final score is the task's own.
    unpadded = {"unpadded": True} if s.unpadded else {}
    trainer = Trainer(model, config, task_inputs.train, task_inputs.eval if s.eval_every else None,
                      collate_fn=task_inputs.collate, metrics_fn=task_inputs.metrics, model_kwargs=unpadded,
                      eval_model_kwargs=unpadded)
    if trainer.is_main and not has_checkpoints:
        write_json(record, {"command": command_line(s), "settings": defining,
                            "flags": {k: v for k, v in asdict(s).items() if k not in PER_CALL}})
    started = time.perf_counter()
    history = trainer.fit(resume=s.resume)
    train_seconds = time.perf_counter() - started
    if not trainer.is_main:  # under torchrun, process 0 scores and saves the model
        return {}
    started = time.perf_counter()
    predictions, metrics = task_inputs.evaluate(model)
    results |= {"metrics": metrics, "steps": trainer.step, "max_steps": steps,
                "epochs_done": round(trainer.step / max(batches_per_epoch, 1), 2),
                "stopped_by_time_budget": trainer.step < steps,
                "train_seconds_this_run": round(train_seconds, 1),
                "eval_seconds": round(time.perf_counter() - started, 1),
                "device": str(trainer.device), "precision": trainer.precision, "paper": task.paper,
                "history": history.records}
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    with atomic_path(out / "predictions.json") as tmp:  # whole or not at all, as every file of a model folder
        tmp.write_text(json.dumps(predictions) + "\n")
    write_json(out / "results.json", results)
    _report(results, out)
    return results


def command_line(settings: FinetuneSettings) -> str:
    """The ``minibert finetune`` command that repeats a run: the task, then every setting that is given."""
    argv = ["minibert", "finetune", settings.task]
    for name, value in asdict(settings).items():
        if name == "task" or value is None or value is False:
            continue
        argv += [f"--{name.replace('_', '-')}"] + ([] if value is True else [str(value)])
    return shlex.join(argv)


def _report(results: dict, out: Path | None) -> None:
    """Print the metric, where it was measured, and where the results went."""
    metrics = results["metrics"]
    shown = {k: v for k, v in metrics.items() if k != "words"}
    percent = results["task"] == "squad"  # SQuAD's official script gives 0-100; the other tasks' metrics are 0-1
    values = ", ".join(f"{k} {v:.2f}" if percent else f"{k} {v:.4f}" for k, v in shown.items())
    print(f"{results['task']}: {values} on {results['data']['eval']}")
    if results["data"].get("note"):
        print(f"note: {results['data']['note']}")
    if results.get("stopped_by_time_budget"):
        print(f"the time budget stopped training at step {results['steps']} of {results['max_steps']}; "
              "--resume goes on from there")
    if "feature_based" in results:
        probes = {k: v for k, v in results["feature_based"].items() if k != "majority_baseline"}
        print("the frozen pre-trained model's features, read by a linear probe (the paper's Table 7):")
        for variant, accuracy in probes.items():
            print(f"  {variant:<32} accuracy {accuracy:.4f}")
        print(f"  {'majority tag of each word':<32} accuracy {results['feature_based']['majority_baseline']:.4f}")
    if out is not None:
        print(f"model, tokenizer, predictions.json and results.json in {out}")


def recorded_run(model_dir, task: str) -> tuple[dict, Hyperparameters]:
    """What ``minibert finetune`` recorded in a model folder (results.json) and its hyperparameters;
    ``({}, the paper's)`` for a model from elsewhere."""
    recorded = {}
    results_file = Path(model_dir) / "results.json"
    if results_file.is_file():
        recorded = read_json(results_file, "run's results")
        if recorded.get("task") != task:
            raise ValueError(f"{model_dir} was fine-tuned on {recorded.get('task')!r}, not {task!r}")
    known = {f.name for f in fields(Hyperparameters)}
    chosen = (Hyperparameters(**{k: v for k, v in recorded["settings"].items() if k in known})
              if "settings" in recorded else PRESETS["paper"][task])
    return recorded, chosen


def held_out_score(task: str, model, tokenizer, recorded: dict, chosen: Hyperparameters, progress=True,
                   split: str | None = None):
    """(predictions, metrics, data description) on ``split``, by default the held-out data the run was scored on."""
    split = split or recorded.get("data", {}).get("split")
    if task == "squad" and split is None:
        split = "train/dev"  # a model from elsewhere: the whole dev set
    task_inputs = get_task(task).build_data(tokenizer, model, max_length=chosen.max_length,
                                            eval_examples=chosen.eval_examples, training=False, split=split)
    predictions, metrics = task_inputs.evaluate(model, progress)
    return predictions, metrics, task_inputs.description


def evaluate(settings: EvaluateSettings) -> dict:
    """Score the model; prints the metric and returns ``{metric: value}``."""
    s, task = settings, get_task(settings.task)
    recorded, chosen = recorded_run(s.model, task.name)
    chosen = replace(chosen, **{k: v for k, v in {"eval_examples": s.eval_examples,
                                                  "max_length": s.max_length}.items() if v is not None})
    model = task.model_class.from_pretrained(s.model).to(pick_device(s.device))
    check_max_length(model, chosen.max_length, s.model)
    fresh = [k for k in model.loading_info["missing_keys"] if not k.startswith("bert.")]
    if fresh:  # a head made up on the spot scores chance, and would look like a result
        raise ValueError(f"{s.model} has no {task.name} head ({', '.join(fresh[:2])} would be random): evaluate a "
                         f"model fine-tuned on {task.name}, e.g. the --out folder of `minibert finetune {task.name}`")
    tokenizer = BertTokenizer.from_pretrained(s.tokenizer or s.model)
    _, metrics, description = held_out_score(task.name, model, tokenizer, recorded, chosen, split=s.split)
    _report({"task": task.name, "metrics": metrics, "data": description}, None)
    return metrics
