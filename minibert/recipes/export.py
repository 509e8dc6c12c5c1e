"""``minibert export``: a pre-training or fine-tuning run as a model folder to share.

The weights go out in fp16 (half the size), bf16, fp32 or int8 (a quarter), with the tokenizer, the
recipe and a model card whose held-out figures are measured on the exported weights loaded back,
so that what storage costs is measured, not assumed. The card is scored on at most `CARD_EXAMPLES`
held-out sequences (or task examples), spread over the held-out text, so that an export takes seconds
for a small model, not the hour a whole Wikipedia held-out set would; the card says how many.

The folder is written as a hidden sibling (``.NAME.partial``) and renamed into place, card included, in
one step (`minibert.out_folder.writing`): an export stopped half-way (Ctrl-C, a kill, a full disk)
leaves nothing that looks like a model, and the next export clears what it left.
"""
from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass, replace
from importlib import import_module
from pathlib import Path

import torch

from ..atomic import DiskFullError, disk_full
from ..config import read_json
from ..heads import BertForMaskedLM, BertForPreTraining
from ..hub import WEIGHT_FILES
from ..modernbert import ModernBertForMaskedLM, ModernBertForPreTraining
from ..out_folder import BOOKKEEPING, claimable, stage_of, writing
from ..pretraining import LECTURE_BLANKS, fill_mask
from ..tasks import get_task
from ..tokenizer import TOKENIZER_FILES, BertTokenizer
from ..training import find_checkpoints
from .finetune import held_out_score, recorded_run
from .model_card import (
    CARD_EXAMPLES,
    command_of,
    earlier_stage,
    earlier_time,
    folder_dtype,
    run_time,
    score_held_out,
    spread,
    who_loads,
)

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "int8": None}
MODEL_CLASSES = ("BertModel", "BertForPreTraining", "BertForMaskedLM", "BertForSequenceClassification",
                 "BertForQuestionAnswering", "BertForTokenClassification", "ModernBertModel", "ModernBertForMaskedLM",
                 "ModernBertForPreTraining", "ModernBertForSequenceClassification")


@dataclass(kw_only=True)
class ExportSettings:
    """What to export, where to, and in which precision (int8: one int8 per weight and a scale per row,
    which only minibert reads)."""
    run: str              # the out folder of minibert pretrain or minibert finetune
    out: str              # the model folder to write
    dtype: str = "fp16"   # fp16, bf16, fp32 or int8

    def __post_init__(self):
        self.run, self.out = os.fspath(self.run), os.fspath(self.out)
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")


def export(settings: ExportSettings) -> Path:
    """Write the shareable model folder; returns it.

    ``run`` is a pre-training run, a fine-tuning output, or a model folder (one this command wrote, or
    any ``save_pretrained`` output), which is converted to ``dtype`` with its other files copied.
    """
    run, out = Path(settings.run), Path(settings.out)
    if out.resolve() == run.resolve():
        raise ValueError(f"--out {out} is the folder being exported; give a new folder")
    claimable(out, "minibert export")  # a new folder, or one minibert wrote: never the user's own
    if any((out / name).exists() for name in ("config.json", *WEIGHT_FILES)):
        raise ValueError(f"--out {out} already holds a model; export writes a new folder: choose another --out")
    held = sorted(p.name for p in out.iterdir() if p.name not in BOOKKEEPING) if out.is_dir() else []
    if held:
        raise ValueError(f"--out {out} already holds {', '.join(held[:4])}; export writes a new folder: choose "
                         "another --out")
    if (run / "held_out.json").is_file() or ((run / "config.json").is_file() and not find_checkpoints(run)
                                             and not (run / "results.json").is_file()):
        write = convert_folder
    elif (run / "results.json").is_file() and (run / "model.safetensors").is_file():
        write = export_finetuned
    else:
        write = export_pretrained
    try:
        with writing(out, "minibert export", staged=True) as stage:  # renamed to out, card included, at the end
            write(run, stage, settings.dtype, shown_as=out)
    except Exception as e:  # a full disk: named as the file of out it was to be, not as the hidden stage's
        if not disk_full(e):
            raise
        stage, path = stage_of(out), Path(getattr(e, "filename", None) or stage_of(out))
        raise DiskFullError(out / path.relative_to(stage) if path.is_relative_to(stage) else path,
                            f"{run} is untouched", disk_full(e)) from e
    return out


def convert_folder(folder: Path, out: Path, dtype: str, shown_as: Path | None = None) -> Path:
    """A model folder in another precision, every other file copied: e.g. an int8 folder, which only
    minibert reads, as fp16 that transformers reads too. ``out``: where to write; ``shown_as``: the folder it
    will be (``out`` is renamed to it), as the card names it."""
    shown_as = shown_as or out
    config = read_json(folder / "config.json", "config")
    name = (config.get("architectures") or ["BertModel"])[0]
    if name not in MODEL_CLASSES:
        raise ValueError(f"{folder / 'config.json'} names the architecture {name!r}; minibert exports "
                         f"{', '.join(MODEL_CLASSES)}")
    model = getattr(import_module("minibert"), name).from_pretrained(folder)
    tokenizer = folder_tokenizer(folder)  # before anything is written: a folder without one is no use to share
    save_weights(model, out, dtype)
    if tokenizer is not None:
        tokenizer.save_pretrained(out)
    for file in folder.iterdir():
        if file.is_file() and file.name not in ("config.json", "README.md", *WEIGHT_FILES, *TOKENIZER_FILES,
                                                "tokenizer_config.json", *BOOKKEEPING):
            shutil.copyfile(file, out / file.name)
    card = (folder / "README.md").read_text() if (folder / "README.md").is_file() else f"# {shown_as.name}\n"
    card += (f"\n\n## Converted\nThis folder is {folder.as_posix()} with its weights in {dtype}, written by "
             f"`minibert export {folder.as_posix()} --out {shown_as.as_posix()} --dtype {dtype}`; "
             f"{who_loads(model, dtype)} loads them. The figures above were measured on the original weights.\n")
    (out / "README.md").write_text(card)
    return out


def folder_tokenizer(folder: Path) -> BertTokenizer:
    """The tokenizer a model folder goes with: its own files, or else the one of the model it was fine-tuned
    or pre-trained from (results.json's ``model``, recipe.json's ``init_from``), as the course's int8 folders
    ship without one. Without it, transformers would build a 5-token vocabulary that reads every word as [UNK]."""
    if any((folder / name).is_file() for name in TOKENIZER_FILES):
        return BertTokenizer.from_pretrained(folder)
    base = None
    if (folder / "results.json").is_file():
        base = read_json(folder / "results.json", "run's results").get("model")
    elif (folder / "recipe.json").is_file():
        args = read_json(folder / "recipe.json", "run's recipe").get("args", {})
        base = args.get("init_from") or args.get("tokenizer")
    if not base:
        raise ValueError(f"{folder} holds neither tokenizer.json nor vocab.txt, and no results.json or recipe.json "
                         "names the model it came from; copy the tokenizer files of its base model into it first")
    try:
        return BertTokenizer.from_pretrained(base)
    except (OSError, ValueError) as e:
        raise ValueError(f"{folder} has no tokenizer of its own, and that of its base model {base} could not be "
                         f"loaded ({e}); nothing was written") from None


def save_weights(model, out: Path, dtype: str) -> None:
    """``save_pretrained`` in fp16, bf16, fp32 or int8 (`minibert.hub.quantize_int8`)."""
    if dtype == "int8":
        model.save_pretrained(out, int8_weights=True)
    else:
        model.to(DTYPES[dtype]).save_pretrained(out)


def weights_mb(folder: Path) -> float:
    return sum((folder / name).stat().st_size for name in WEIGHT_FILES if (folder / name).is_file()) / 2**20


def export_pretrained(run: Path, out: Path, dtype: str, shown_as: Path | None = None) -> Path:
    """A ``minibert pretrain`` run's last checkpoint as a model folder, its card scored on the held-out text."""
    shown_as = shown_as or out
    checkpoints = find_checkpoints(run)
    if not checkpoints or not (run / "recipe.json").exists():
        raise FileNotFoundError(f"{run} holds no finished minibert pretrain run (step-N/ and recipe.json) "
                                "and no minibert finetune output (model.safetensors and results.json)")
    recipe = read_json(run / "recipe.json", "run's recipe")
    if "step" not in recipe:  # written when the run started; the rest comes when a call of it ends
        raise ValueError(f"{run} holds a pre-training run that has not ended (stopped before the end of any "
                         f"`minibert pretrain` call, e.g. by a kill): go on with it, `minibert pretrain ... --out "
                         f"{run} --resume` with its flags (recipe.json lists them), then export")
    if not recipe["args"].get("eval_corpus"):  # --eval-corpus none: the card has nothing to be scored on
        pairs = recipe["args"]["objective"] != "none"
        raise ValueError(f"{run} was pre-trained without held-out text (--eval-corpus), and the model card scores "
                         f"the exported weights on it{', sentence pairs included' if pairs else ''}: resume the run "
                         f"with --eval-corpus TEXT{' (two or more documents)' if pairs else ''} for one more step, "
                         "then export it")
    modern = recipe["args"].get("architecture") == "modernbert"  # a run from before --architecture is a BERT
    model_class = {(False, True): BertForMaskedLM, (False, False): BertForPreTraining, (True, True): ModernBertForMaskedLM,
                   (True, False): ModernBertForPreTraining}[modern, recipe["args"]["objective"] == "none"]
    model = model_class.from_pretrained(checkpoints[-1])
    save_weights(model, out, dtype)
    tokenizer = BertTokenizer.from_pretrained(run / "tokenizer")
    tokenizer.save_pretrained(out)
    for file in ("recipe.json", "history.json"):
        shutil.copyfile(run / file, out / file)

    # What a user of the folder gets: its own weights, loaded back in fp32, on the recipe's held-out text.
    a = recipe["args"]
    reloaded = model_class.from_pretrained(out)
    held_out, examples, total = score_held_out(reloaded, tokenizer, a)
    (out / "held_out.json").write_text(json.dumps(held_out, indent=2) + "\n")
    size_mb = weights_mb(out)
    pretrain_command = command_of(a, run)
    earlier = earlier_stage(a)  # init_from made by an earlier `minibert pretrain` + `export`: its command too
    if earlier is not None:
        pretrain_command = (command_of(earlier["args"], Path(earlier["args"]["out"])) + "\n"
                            + f"minibert export {earlier['args']['out']} --out {a['init_from']} --dtype "
                            f"{folder_dtype(Path(a['init_from']))}\n" + pretrain_command)
    loader = who_loads(model, dtype)
    pairs = a["objective"] != "none"
    task = {"nsp": " + next sentence prediction", "sop": " + sentence-order prediction",
            "none": f" alone, on packed full sentences ({'ModernBERT, ' if modern else ''}RoBERTa)"}[a["objective"]]
    sentence_task = a["objective"].upper()
    columns = ["fill-in-the-blank accuracy", "top-5", "loss", "unigram plateau", "80/10/10 accuracy"]
    values = [f"{held_out['eval_mlm_accuracy']:.1%}", f"{held_out['eval_mlm_top5']:.1%}",
              f"{held_out['eval_mlm_loss']:.3f}", f"{held_out['unigram_loss']:.3f}",
              f"{held_out['eval_mlm_accuracy_80_10_10']:.1%}"]
    if "eval_mlm_accuracy_as_stored" in held_out:
        columns.insert(2, "as stored")
        values.insert(2, f"{held_out['eval_mlm_accuracy_as_stored']:.1%}")
    if pairs:
        columns += [f"{sentence_task} accuracy", f"{sentence_task}, no blanks"]
        values += [f"{held_out['eval_nsp_accuracy']:.1%}", f"{held_out['eval_nsp_accuracy_unmasked']:.1%}"]
    train_unit = "sequence pairs" if pairs else "sequences"
    blanks = "\n".join(f"| {text} | " + "; ".join(", ".join(f"{token} {p:.2f}" for token, p in guesses)
                                                  for guesses in fill_mask(reloaded, tokenizer, text)) + " |"
                       for text in LECTURE_BLANKS)
    notes = ""
    if "eval_mlm_accuracy_as_stored" in held_out:
        notes += ("\nWikiText is scored in plain form, its tokenisation marks undone (`1 @,@ 000` read as `1,000`), "
                  "and, under \"as stored\", with the marks kept, as the file holds it (accuracy).")
    if pairs:
        notes += (f"\n{sentence_task} accuracy: on pairs of held-out sentences (the same text, made into pairs as in "
                  "training), 15% of their tokens blanked; \"no blanks\": the same pairs with every token as written.")
    heads = "a masked-LM head" if not pairs else f"masked-LM and {sentence_task} heads"
    if earlier is not None:
        first_size = (f"ModernBERT at {earlier['args']['preset']}'s size"
                      if earlier["args"].get("architecture") == "modernbert" else earlier["args"]["preset"])
        first = (f"{earlier['args']['init_from']} continued" if earlier["args"].get("init_from") else
                 f"A {first_size} pre-trained from scratch")
        origin = (f"{first} by the course's own recipe in two runs: {earlier['step']:,} steps on sequences of up to "
                  f"{earlier['args']['max_seq_len']} tokens, then this run from its weights ({a['init_from']}), "
                  f"with {heads} ({recipe['parameters']:,} parameters)")
    elif a.get("init_from"):
        origin = (f"{a['init_from']} ({recipe['parameters']:,} parameters) with {heads}, made by continued "
                  f"pre-training with the course's own recipe (the encoder trained too, the heads fresh, the "
                  f"masked-LM decoder tied to the word embeddings)")
    else:
        size = f"ModernBERT at {a['preset']}'s size" if modern else a["preset"]
        origin = f"A {size} ({recipe['parameters']:,} parameters) pre-trained from scratch by the course's own recipe"
    card = f"""# {shown_as.name}

{origin}, so that the notebooks have a masked-LM model that works offline. Weights in {dtype}
({size_mb:.1f} MB); {loader} loads them.

## Recipe
```
{pretrain_command}
minibert export {run.as_posix()} --out {shown_as.as_posix()} --dtype {dtype}
```
Training text: {', '.join(a['corpus'])} ({recipe['train_examples']:,} {train_unit} of up to {a['max_seq_len']} tokens);
held-out text: {', '.join(a['eval_corpus'])}. Objective: MLM ({a['mlm_probability']:.0%}, MASK/SAME/RND
{'/'.join(f'{x:.0%}' for x in a['mask_same_rnd'])}){task}. {recipe['step']:,} steps of
{a['batch_size']} sequences, peak learning rate {a['lr']:g}, on {recipe['device']} in {recipe['precision']}:
{run_time(recipe)} (of the last `minibert pretrain` call, if the run was resumed).{earlier_time(earlier)}

## Held-out figures (the exported weights, loaded back; {spread(examples, total)})
| {' | '.join(columns)} |
|{'---|' * len(columns)}
| {' | '.join(values)} |

Fill-in-the-blank: 15% of the held-out tokens (the held-out text packed into sequences of up to
{a['max_seq_len']} tokens, whatever the training objective), each replaced by [MASK]; the model must name the
original token (accuracy: its first guess; top-5: among its first five; loss: mean cross-entropy in
nats). The unigram plateau is the loss of always answering with the training text's token
frequencies: a model below it reads the context. The 80/10/10 accuracy scores the training
corruption instead, where a tenth of the scored tokens are left in place (free answers), so it
reads higher; it is given for comparison with older cards only.{notes}

## The lectures' blanks (the exported weights)
| sentence | first five guesses, with their probabilities |
|---|---|
{blanks}

`history.json` holds the training curve, `recipe.json` every setting and the time it took.
"""
    (out / "README.md").write_text(card)
    return out


def export_finetuned(run: Path, out: Path, dtype: str, shown_as: Path | None = None) -> Path:
    """A ``minibert finetune`` folder as a smaller model folder to ship, scored again after export.

    The card gives the held-out metric of the run and of the exported weights loaded back, so the
    cost of fp16 or int8 storage is measured, not assumed.
    """
    shown_as = shown_as or out
    recorded = read_json(run / "results.json", "run's results")
    task = get_task(recorded["task"])
    model = task.model_class.from_pretrained(run)
    save_weights(model, out, dtype)
    tokenizer = BertTokenizer.from_pretrained(run)
    tokenizer.save_pretrained(out)
    shutil.copyfile(run / "results.json", out / "results.json")
    _, hyperparameters = recorded_run(run, task.name)
    capped = replace(hyperparameters, eval_examples=min(hyperparameters.eval_examples or CARD_EXAMPLES, CARD_EXAMPLES))
    predictions, metrics, description = held_out_score(task.name, task.model_class.from_pretrained(out), tokenizer,
                                                       recorded, capped)  # with a progress bar
    fine_tuned, both = recorded["metrics"], ""
    if len(predictions) >= CARD_EXAMPLES and (hyperparameters.eval_examples or math.inf) > CARD_EXAMPLES:
        # the run was scored on more examples than the card: its fp32 weights are scored on the card's too
        _, fine_tuned, _ = held_out_score(task.name, task.model_class.from_pretrained(run), tokenizer, recorded,
                                          capped)
        both = (f"\n\nBoth rows on the first {CARD_EXAMPLES:,} held-out examples, to keep an export short; the run's "
                "score on all of them is in `results.json`.")
    (out / "held_out.json").write_text(json.dumps(metrics, indent=2) + "\n")
    size_mb = weights_mb(out)
    shown = [k for k in metrics if k != "words"]
    fmt = lambda k, v: f"{v:.2f}" if task.name == "squad" else f"{v:.4f}"  # SQuAD's metrics are 0-100
    note = f"\n\nNote: {description['note']}.\n" if description.get("note") else ""
    loader = who_loads(model, dtype)
    card = f"""# {shown_as.name}

{recorded['model']} fine-tuned on {task.name} by the course's own recipe. Weights in {dtype} ({size_mb:.1f} MB);
{loader} loads them.

## Recipe
```
{recorded['command']}
minibert export {run.as_posix()} --out {shown_as.as_posix()} --dtype {dtype}
```
Trained on {recorded['data']['train']};
{recorded['steps']:,} steps ({recorded['epochs_done']} epochs) on {recorded['device']} in {recorded['precision']},
{recorded['train_seconds_this_run'] / 60:.0f} minutes of training (of the last `minibert finetune` call).

## Held-out figures ({description['eval']}){note}{both}

| weights | {' | '.join(shown)} |
|---|{'---|' * len(shown)}
| fine-tuned (fp32) | {' | '.join(fmt(k, fine_tuned[k]) for k in shown)} |
| exported ({dtype}), loaded back | {' | '.join(fmt(k, metrics[k]) for k in shown)} |

`results.json` holds every setting and the training curve.
"""
    (out / "README.md").write_text(card)
    return out
