"""Fine-tuning recipes: ``minibert finetune sst2|squad|pos`` and ``minibert evaluate``.

Fine-tuning (Devlin et al. 2018, §4 and §A.3) starts from a pre-trained BERT, adds one task layer
and trains everything for 2 to 4 epochs with a peak learning rate of 2e-5 to 5e-5, batches of 16 or
32 and a linear warmup over the first 10% of the steps. Those are the "paper" preset; the "cpu"
preset cuts a run to what a laptop does in minutes (fewer steps, a time budget, shorter inputs).

A run trains with the `Trainer` (checkpoints in ``OUT/checkpoints``, so ``--resume`` goes on after
an interruption), scores the model on held-out data with the task's own ``evaluate``, and leaves a
model folder: ``save_pretrained``'s weights, which minibert and transformers load, the tokenizer,
``predictions.json`` and ``results.json`` (the metric, every setting, the time, the device and
which data every number comes from). Held-out data, per task:

    sst2   train on GLUE SST-2 train (67,349 phrases), evaluate on its dev set (872)
    squad  train on SQuAD v1.1 train, evaluate on dev; offline, where only the dev set exists,
           split the dev set by article into train and eval (and say so)
    pos    UD English EWT has no train split offline: train on its dev split, evaluate on test
"""
from __future__ import annotations

import argparse
import json
import random
import shlex
import time
from dataclasses import asdict, dataclass, fields, replace
from functools import partial
from pathlib import Path
from typing import Callable

from .. import data
from ..heads import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from ..tasks import sst2, squad, tagging
from ..tokenizer import BertTokenizer
from ..training import PRECISIONS, TrainConfig, Trainer, find_checkpoints, pick_device

TASKS = ("sst2", "squad", "pos")
MODEL_CLASSES = {"sst2": BertForSequenceClassification, "squad": BertForQuestionAnswering,
                 "pos": BertForTokenClassification}
NUM_LABELS = {"sst2": len(sst2.LABELS), "pos": len(tagging.UPOS)}
PAPER = {"sst2": "BERT-base: SST-2 dev accuracy 92.7 (test 93.5)",
         "squad": "BERT-base: SQuAD v1.1 dev EM 80.8 / F1 88.5"}
EVAL_BATCH_SIZE = 64
SQUAD_EVAL_FRACTION, SQUAD_SPLIT_SEED = 0.2, 0  # offline: a fixed fifth of the dev set's articles is held out


@dataclass(frozen=True)
class FinetuneSettings:
    """How to fine-tune, as plain data; the defaults are the paper's (§A.3)."""
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
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name.replace('_', '-')} must be a positive integer, got {value!r}")
        if self.epochs <= 0:
            raise ValueError(f"epochs must be positive, got {self.epochs}")


# "paper": §A.3 (SQuAD: §4.2, 3 epochs at 5e-5 with batches of 32, windows of 384 tokens). "cpu": minutes on a
# laptop; a run that short needs larger steps, and small BERTs take them (Turc et al. 2019 fine-tune theirs at
# up to 1e-4).
PRESETS: dict[str, dict[str, FinetuneSettings]] = {
    "paper": {"sst2": FinetuneSettings(lr=2e-5, batch_size=32, epochs=3, max_length=128),
              "squad": FinetuneSettings(lr=5e-5, batch_size=32, epochs=3, max_length=384),
              "pos": FinetuneSettings(lr=5e-5, batch_size=16, epochs=4, max_length=128)},
    "cpu": {"sst2": FinetuneSettings(lr=1e-4, batch_size=32, max_steps=600, time_budget_s=600, max_length=64),
            "squad": FinetuneSettings(lr=1e-4, batch_size=16, max_steps=300, time_budget_s=900, max_length=256),
            "pos": FinetuneSettings(lr=1e-4, batch_size=16, epochs=3, time_budget_s=600, max_length=128)},
}


@dataclass
class TaskData:
    """What a task hands the recipe: the Trainer's data, and how to score a model on the held-out part."""
    evaluate: Callable                # (model, progress) -> (predictions, {metric: value}): the final score
    description: dict                 # what the training and held-out data are
    examples: tuple                   # (training, held-out) examples before encoding; training None if not training
    train: object = None              # for training only: the encoded training examples,
    eval: object = None               # the encoded held-out examples (for evaluations during training),
    collate: Callable | None = None   # a list of them -> a batch dict,
    metrics: Callable | None = None   # and the Trainer's metrics_fn


def _check_task(task: str) -> str:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    return task


def _subset(items, n: int | None, seed: int | None = None):
    """``n`` of the items, in their order: the first n (seed None) or n drawn with the seed; all when n is None."""
    if n is None or n >= len(items):
        return items
    indices = range(n) if seed is None else sorted(random.Random(seed).sample(range(len(items)), n))
    return items.select(indices) if hasattr(items, "select") else [items[i] for i in indices]


def task_data(task: str, model, tokenizer, settings: FinetuneSettings, seed: int = 0, training: bool = True,
              squad_split: str | None = None) -> TaskData:
    """Load, subset and (when ``training``) encode a task's data.

    ``squad_split``: ``"train/dev"`` (the real train set), ``"dev by article"`` (the offline split)
    or None: the real train set where it is in the data folder, else the offline split.
    """
    _check_task(task)
    if task == "sst2":
        return _sst2_data(tokenizer, settings, seed, training)
    if task == "pos":
        return _pos_data(model, tokenizer, settings, seed, training)
    return _squad_data(tokenizer, settings, seed, training, squad_split)


def _sst2_data(tokenizer, s: FinetuneSettings, seed: int, training: bool) -> TaskData:
    held_out = _subset(sst2.load_sst2("dev"), s.eval_examples)

    def evaluate(model, progress=True):
        predicted, metrics = sst2.evaluate(model, tokenizer, held_out, max_length=s.max_length,
                                           batch_size=EVAL_BATCH_SIZE, progress=progress)
        return [sst2.LABELS[i] for i in predicted.tolist()], metrics

    task = TaskData(evaluate, {"train": None, "eval": f"SST-2 dev (GLUE): {len(held_out):,} of 872 phrases"},
                    (None, held_out))
    if training:
        train = _subset(sst2.load_sst2("train"), s.train_examples, seed)
        task.description["train"] = f"SST-2 train (GLUE): {len(train):,} of 67,349 phrases"
        task.examples = (train, held_out)
        task.train = sst2.encode(train, tokenizer, s.max_length)
        task.eval = sst2.encode(held_out, tokenizer, s.max_length)
        task.collate, task.metrics = partial(sst2.collate, pad_token_id=tokenizer.pad_token_id), sst2.metrics
    return task


def _pos_data(model, tokenizer, s: FinetuneSettings, seed: int, training: bool) -> TaskData:
    held_out = _subset(tagging.load_pos(tagging.SPLITS["eval"]), s.eval_examples)

    def evaluate(model, progress=True):
        return tagging.evaluate(model, tokenizer, held_out, batch_size=EVAL_BATCH_SIZE, progress=progress)

    description = {"train": None, "eval": f"UD English EWT test split: {len(held_out):,} of 2,077 sentences",
                   "note": "EWT's train split is not in the offline data: fine-tuned on dev, evaluated on test"}
    task = TaskData(evaluate, description, (None, held_out))
    if training:
        train = _subset(tagging.load_pos(tagging.SPLITS["train"]), s.train_examples, seed)
        task.description["train"] = f"UD English EWT dev split: {len(train):,} of 2,001 sentences"
        task.examples = (train, held_out)
        task.train = tagging.encode(train, tokenizer, s.max_length)
        task.eval = tagging.encode(held_out, tokenizer, model.config.max_position_embeddings)  # whole sentences
        task.collate = partial(tagging.collate, pad_token_id=tokenizer.pad_token_id)
        task.metrics = tagging.metrics_for(task.eval)
    return task


def _squad_data(tokenizer, s: FinetuneSettings, seed: int, training: bool, split: str | None) -> TaskData:
    if split is None:
        split = "train/dev" if (data.ensure(squad.DATASET) / "train-v1.1.json").is_file() else "dev by article"
    if split == "train/dev":
        train, held_out = (squad.load_squad("train") if training else None), squad.load_squad("dev")
        description = {"split": split, "train": "SQuAD v1.1 train", "eval": "SQuAD v1.1 dev"}
    else:
        train, held_out = squad.split_by_article(squad.load_squad("dev"), SQUAD_EVAL_FRACTION, seed=SQUAD_SPLIT_SEED)
        articles = sorted({example.title for example in held_out})
        description = {"split": split,
                       "train": f"SQuAD v1.1 dev, {len({example.title for example in train})} of its 48 articles",
                       "eval": f"SQuAD v1.1 dev, the other {len(articles)} articles", "eval_articles": articles,
                       "note": "SQuAD's train set is not in the offline data: trained and evaluated on disjoint "
                               "articles of the dev set, so EM/F1 are not the paper's dev-set numbers"}
    held_out = _subset(held_out, s.eval_examples)
    description["eval"] += f": {len(held_out):,} questions"
    doc_stride = s.max_length // 3  # BERT: windows of 384 tokens, 128 of them shared with the next window

    def evaluate(model, progress=True):
        return squad.evaluate(model, tokenizer, held_out, max_length=s.max_length, doc_stride=doc_stride,
                              batch_size=EVAL_BATCH_SIZE, progress=progress)

    task = TaskData(evaluate, description, (None, held_out))
    if training:
        train = _subset(train, s.train_examples, seed)
        description["train"] += f": {len(train):,} questions"
        task.examples = (train, held_out)
        task.train = squad.SquadFeatures(train, tokenizer, s.max_length, doc_stride)
        task.eval = squad.SquadFeatures(held_out, tokenizer, s.max_length, doc_stride)
        task.collate = task.train.collate
    else:
        description["train"] = None
    return task


# --- minibert finetune ------------------------------------------------------------------------------------

def finetune_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(prog="minibert finetune")
    p.description = ("Fine-tune a pre-trained BERT on a task, score it on held-out data and save it with its "
                     "tokenizer, results.json and predictions.json.")
    p.epilog = ("example (CPU, ~10 minutes): minibert finetune sst2 --model sentence-transformers/all-MiniLM-L6-v2 "
                "--out runs/sst2")
    add = p.add_argument
    add("task", help="sst2: sentence classification (GLUE SST-2); squad: answer spans (SQuAD v1.1); "
                     "pos: part-of-speech tagging (UD English EWT)")
    add("--model", required=True, help="the pre-trained BERT: a Hub id (bert-base-uncased, "
                                       "sentence-transformers/all-MiniLM-L6-v2) or a folder save_pretrained wrote")
    add("--tokenizer", help="a Hub id or folder with vocab.txt/tokenizer.json (default: the same as --model)")
    add("--out", required=True, help="output folder: the fine-tuned model and tokenizer, results.json, "
                                     "predictions.json, checkpoints/")
    add("--preset", default="auto", choices=["auto", *PRESETS],
        help="paper: the paper's settings (2e-5 to 5e-5, batches of 16-32, 3-4 epochs, 10%% warmup); cpu: a few "
             "hundred steps at 1e-4 on shorter inputs, stopped after 10-15 minutes; auto: paper on a CUDA GPU, "
             "cpu elsewhere (default)")
    add("--steps", type=int, metavar="N", help="optimizer updates (default: the preset's, or its epochs)")
    add("--epochs", type=float, help="passes over the training data, when --steps is not given")
    add("--time-budget", type=float, metavar="SECONDS", help="stop training after this many seconds, then evaluate and save")
    add("--lr", type=float, help="peak learning rate (the paper: 2e-5 to 5e-5)")
    add("--batch-size", type=int, help="examples per update")
    add("--max-length", type=int, help="tokens per input (squad: per window)")
    add("--train-examples", type=int, metavar="N", help="train on only N training examples, drawn with --seed "
                                           "(squad: questions, pos: sentences)")
    add("--eval-examples", type=int, metavar="N", help="evaluate on only the first N held-out examples")
    add("--eval-every", type=int, metavar="N", help="also evaluate on the held-out data every N steps (default: only at the end)")
    add("--feature-based", action="store_true",
        help="pos only: first train linear probes on the frozen model's features (the paper's Table 7: "
             "embeddings, last, second to last, last four, weighted sums) to compare with fine-tuning")
    add("--precision", default="auto", choices=PRECISIONS, help="auto: bf16 on CUDA, fp32 on CPU (default auto)")
    add("--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:1, mps")
    add("--seed", type=int, default=0, help="seed of the new layer, dropout, data order and --train-examples")
    add("--resume", action="store_true", help="go on from the latest checkpoint in OUT/checkpoints")
    return p


def settings_from(args: argparse.Namespace, device_type: str) -> tuple[str, FinetuneSettings]:
    """The preset (auto: paper on CUDA, cpu elsewhere) with the flags that were given on top."""
    preset = args.preset if args.preset != "auto" else "paper" if device_type == "cuda" else "cpu"
    flags = {"max_steps": args.steps, "epochs": args.epochs, "time_budget_s": args.time_budget, "lr": args.lr,
             "batch_size": args.batch_size, "max_length": args.max_length,
             "train_examples": args.train_examples, "eval_examples": args.eval_examples}
    settings = PRESETS[preset][args.task]
    if args.epochs is not None and args.steps is None:
        settings = replace(settings, max_steps=None)  # epochs given: they, not the preset's steps, set the length
    return preset, replace(settings, **{k: v for k, v in flags.items() if v is not None})


def finetune(args: argparse.Namespace) -> dict:
    """Run the recipe; prints the metric and returns what results.json holds."""
    task = _check_task(args.task)
    if args.feature_based and task != "pos":
        raise ValueError("--feature-based compares frozen features with fine-tuning on tagging: use it with pos")
    out = Path(args.out)
    if not args.resume and find_checkpoints(out / "checkpoints"):
        raise ValueError(f"{out} already holds a fine-tuning run: --resume goes on with it, or choose another --out")
    device = pick_device(args.device)
    preset, s = settings_from(args, device.type)
    new_head = {"num_labels": NUM_LABELS[task]} if task in NUM_LABELS else {}
    model = MODEL_CLASSES[task].from_pretrained(args.model, **new_head)
    tokenizer = BertTokenizer.from_pretrained(args.tokenizer or args.model)
    task_inputs = task_data(task, model, tokenizer, s, args.seed)
    results = {"task": task, "model": args.model, "command": shlex.join(["minibert", "finetune", *_argv(args)]),
               "data": task_inputs.description, "preset": preset, "settings": asdict(s), "seed": args.seed}
    if args.feature_based:
        started = time.perf_counter()
        results["feature_based"] = tagging.feature_based(model.to(device), tokenizer, *task_inputs.examples,
                                                         seed=args.seed)
        results["feature_based_seconds"] = round(time.perf_counter() - started, 1)

    batches_per_epoch = len(task_inputs.train) // s.batch_size
    steps = s.max_steps or max(1, round(s.epochs * batches_per_epoch))
    config = TrainConfig(max_steps=steps, batch_size=s.batch_size, lr=s.lr, warmup_ratio=s.warmup_ratio,
                         eval_every=args.eval_every, precision=args.precision, device=args.device,
                         out_dir=str(out / "checkpoints"), keep_last=1, time_budget_s=s.time_budget_s, seed=args.seed,
                         group_by_length=True)  # SST-2: 3 to 66 tokens; random batches would be 2/3 padding
    # Held-out data goes to the Trainer only for evaluations during training; the final score is the task's own.
    trainer = Trainer(model, config, task_inputs.train, task_inputs.eval if args.eval_every else None,
                      collate_fn=task_inputs.collate, metrics_fn=task_inputs.metrics)
    started = time.perf_counter()
    history = trainer.fit(resume=args.resume)
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
                "device": str(trainer.device), "precision": trainer.precision, "paper": PAPER.get(task),
                "history": history.records}
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "predictions.json").write_text(json.dumps(predictions) + "\n")
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    _report(results, out)
    return results


def _argv(args: argparse.Namespace) -> list[str]:
    """The flags of a run, to repeat it."""
    argv = [args.task]
    for name, value in vars(args).items():
        if name == "task" or value is None or value is False:
            continue
        argv += [f"--{name.replace('_', '-')}"] + ([] if value is True else [str(value)])
    return argv


def _report(results: dict, out: Path | None) -> None:
    """Print the metric, where it was measured, and where the results went."""
    metrics = results["metrics"]
    shown = {k: v for k, v in metrics.items() if k != "words"}
    values = ", ".join(f"{k} {v:.2f}" if k in ("exact_match", "f1") else f"{k} {v:.4f}" for k, v in shown.items())
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


# --- minibert evaluate ------------------------------------------------------------------------------------

def evaluate_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(prog="minibert evaluate")
    p.description = ("Score a fine-tuned model on a task's held-out data. A folder written by minibert finetune "
                     "is scored on the data it was evaluated on there (its results.json says which).")
    p.epilog = "example: minibert evaluate sst2 --model runs/sst2"
    add = p.add_argument
    add("task", help="sst2, squad or pos")
    add("--model", required=True, help="the fine-tuned model: a folder (minibert finetune --out) or a Hub id")
    add("--tokenizer", help="a Hub id or folder with vocab.txt/tokenizer.json (default: the same as --model)")
    add("--eval-examples", type=int, metavar="N", help="only the first N held-out examples (default: as in results.json, or all)")
    add("--max-length", type=int, help="tokens per input (default: as in results.json, or the task's default)")
    add("--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:1, mps")
    return p


def _recorded(model_dir, task: str) -> tuple[dict, FinetuneSettings]:
    """What ``minibert finetune`` recorded in a model folder (results.json) and its settings; ``({}, the
    paper's settings)`` for a model from elsewhere."""
    recorded = {}
    results_file = Path(model_dir) / "results.json"
    if results_file.is_file():
        recorded = json.loads(results_file.read_text())
        if recorded.get("task") != task:
            raise ValueError(f"{model_dir} was fine-tuned on {recorded.get('task')!r}, not {task!r}")
    known = {f.name for f in fields(FinetuneSettings)}
    settings = (FinetuneSettings(**{k: v for k, v in recorded["settings"].items() if k in known})
                if "settings" in recorded else PRESETS["paper"][task])
    return recorded, settings


def _held_out_score(task: str, model, tokenizer, recorded: dict, settings: FinetuneSettings, progress=True):
    """(predictions, metrics, data description) on the held-out data the run was scored on."""
    squad_split = recorded.get("data", {}).get("split", "train/dev")  # a model from elsewhere: the whole dev set
    task_inputs = task_data(task, model, tokenizer, settings, training=False, squad_split=squad_split)
    predictions, metrics = task_inputs.evaluate(model, progress)
    return predictions, metrics, task_inputs.description


def evaluate(args: argparse.Namespace) -> dict:
    """Score the model; prints the metric and returns ``{metric: value}``."""
    task = _check_task(args.task)
    recorded, settings = _recorded(args.model, task)
    settings = replace(settings, **{k: v for k, v in {"eval_examples": args.eval_examples,
                                                      "max_length": args.max_length}.items() if v is not None})
    model = MODEL_CLASSES[task].from_pretrained(args.model).to(pick_device(args.device))
    tokenizer = BertTokenizer.from_pretrained(args.tokenizer or args.model)
    _, metrics, description = _held_out_score(task, model, tokenizer, recorded, settings)
    _report({"task": task, "metrics": metrics, "data": description}, None)
    return metrics


# --- minibert export of a fine-tuned model ----------------------------------------------------------------

def export_finetuned(run: Path, out: Path, dtype: str) -> Path:
    """A ``minibert finetune`` folder as a smaller model folder to ship, scored again after export.

    The card gives the held-out metric of the run and of the exported weights loaded back, so the
    cost of fp16 or int8 storage is measured, not assumed.
    """
    import shutil

    from .pretrain import save_weights, who_loads

    recorded = json.loads((run / "results.json").read_text())
    task = _check_task(recorded["task"])
    save_weights(MODEL_CLASSES[task].from_pretrained(run), out, dtype)
    tokenizer = BertTokenizer.from_pretrained(run)
    tokenizer.save_pretrained(out)
    shutil.copyfile(run / "results.json", out / "results.json")
    _, settings = _recorded(run, task)
    _, metrics, description = _held_out_score(task, MODEL_CLASSES[task].from_pretrained(out), tokenizer,
                                              recorded, settings)
    (out / "held_out.json").write_text(json.dumps(metrics, indent=2) + "\n")
    size_mb = (out / "model.safetensors").stat().st_size / 2**20
    shown = [k for k in metrics if k != "words"]
    fmt = lambda k, v: f"{v:.2f}" if k in ("exact_match", "f1") else f"{v:.4f}"
    note = f"\n\nNote: {description['note']}.\n" if description.get("note") else ""
    loader = who_loads(MODEL_CLASSES[task], dtype)
    card = f"""# {out.name}

{recorded['model']} fine-tuned on {task} by the course's own recipe. Weights in {dtype} ({size_mb:.1f} MB);
{loader} loads them.

## Recipe
```
{recorded['command']}
minibert export {run.as_posix()} --out {out.as_posix()} --dtype {dtype}
```
Trained on {recorded['data']['train']};
{recorded['steps']:,} steps ({recorded['epochs_done']} epochs) on {recorded['device']} in {recorded['precision']},
{recorded['train_seconds_this_run'] / 60:.0f} minutes of training (of the last `minibert finetune` call).

## Held-out figures ({description['eval']}){note}

| weights | {' | '.join(shown)} |
|---|{'---|' * len(shown)}
| fine-tuned (fp32) | {' | '.join(fmt(k, recorded['metrics'][k]) for k in shown)} |
| exported ({dtype}), loaded back | {' | '.join(fmt(k, metrics[k]) for k in shown)} |

`results.json` holds every setting and the training curve.
"""
    (out / "README.md").write_text(card)
    return out
