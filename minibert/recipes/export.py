"""``minibert export``: a pre-training or fine-tuning run as a model folder to share.

The weights go out in fp16 (half the size), bf16, fp32 or int8 (a quarter), with the tokenizer, the
recipe and a model card whose held-out figures are measured on the exported weights loaded back,
so that what storage costs is measured, not assumed.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from ..heads import BertForMaskedLM, BertForPreTraining
from ..pretraining import MLMMasking, build_pretraining_data, pretraining_metrics
from ..tasks import get_task
from ..tokenizer import BertTokenizer
from ..training import evaluate, find_checkpoints
from .finetune import held_out_score, recorded_run

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "int8": None}


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
    """Write the shareable model folder; returns it."""
    run, out = Path(settings.run), Path(settings.out)
    if (run / "results.json").is_file() and (run / "model.safetensors").is_file():
        return export_finetuned(run, out, settings.dtype)
    return export_pretrained(run, out, settings.dtype)


def save_weights(model, out: Path, dtype: str) -> None:
    """``save_pretrained`` in fp16, bf16, fp32 or int8 (`minibert.hub.quantize_int8`)."""
    if dtype == "int8":
        model.save_pretrained(out, int8_weights=True)
    else:
        model.to(DTYPES[dtype]).save_pretrained(out)


def who_loads(model_class, dtype: str) -> str:
    """The model card's line on what reads the weights."""
    if dtype == "int8":
        return ("minibert's `from_pretrained` (int8 rows with a scale each, see `minibert.hub`; transformers "
                "cannot read them)")
    return f"`{model_class.__name__}.from_pretrained` (minibert or transformers)"


def export_pretrained(run: Path, out: Path, dtype: str) -> Path:
    """A ``minibert pretrain`` run's last checkpoint as a model folder, its card scored on the held-out text."""
    checkpoints = find_checkpoints(run)
    if not checkpoints or not (run / "recipe.json").exists():
        raise FileNotFoundError(f"{run} holds no finished minibert pretrain run (step-N/ and recipe.json) "
                                "and no minibert finetune output (model.safetensors and results.json)")
    recipe = json.loads((run / "recipe.json").read_text())
    model_class = BertForMaskedLM if recipe["args"]["objective"] == "none" else BertForPreTraining
    model = model_class.from_pretrained(checkpoints[-1])
    save_weights(model, out, dtype)
    tokenizer = BertTokenizer.from_pretrained(run / "tokenizer")
    tokenizer.save_pretrained(out)
    for name in ("recipe.json", "history.json"):
        shutil.copyfile(run / name, out / name)

    # What a user of the folder gets: its own weights, loaded back in fp32, on the recipe's held-out text.
    a = recipe["args"]
    reloaded = model_class.from_pretrained(out)
    masking = MLMMasking(tokenizer, a["mlm_probability"], tuple(a["mask_same_rnd"]), whole_word=a["whole_word"])
    eval_data = build_pretraining_data(tokenizer, a["eval_corpus"], a["objective"], a["max_seq_len"],
                                       masking=masking, seed=a["seed"])
    measured = evaluate(reloaded, eval_data, batch_size=min(32, len(eval_data)), collate_fn=eval_data.collate,
                        metrics_fn=pretraining_metrics, device="cpu", seed=a["seed"])
    held_out = {f"eval_{name}": value for name, value in measured.items()}  # named as in history.json
    (out / "held_out.json").write_text(json.dumps(held_out, indent=2) + "\n")
    size_mb = (out / "model.safetensors").stat().st_size / 2**20
    flags = [f"--{k.replace('_', '-')}" + ("" if v is True else " " + (" ".join(map(str, v)) if isinstance(v, list) else str(v)))
             for k, v in a.items() if v not in (None, False) and k not in ("func", "resume", "out")]
    pretrain_command = " \\\n    ".join(["minibert pretrain " + " ".join(flags), f"--out {run.as_posix()}"])
    loader = who_loads(model_class, dtype)
    pairs = a["objective"] != "none"
    task = {"nsp": " + next sentence prediction", "sop": " + sentence-order prediction",
            "none": " alone, on packed full sentences (RoBERTa)"}[a["objective"]]
    sentence_task = a["objective"].upper()
    columns = ["masked-LM loss", "masked-LM accuracy"] + ([f"{sentence_task} loss", f"{sentence_task} accuracy"] if pairs else [])
    values = [f"{held_out['eval_mlm_loss']:.3f}", f"{held_out['eval_mlm_accuracy']:.1%}"]
    if pairs:
        values += [f"{held_out['eval_nsp_loss']:.3f}", f"{held_out['eval_nsp_accuracy']:.1%}"]
    unit = "sequence pairs" if pairs else "sequences"
    card = f"""# {out.name}

A {a['preset']} ({recipe['parameters']:,} parameters) pre-trained from scratch by the course's own recipe,
so that the notebooks have a masked-LM model that works offline. Weights in {dtype}
({size_mb:.1f} MB); {loader} loads them.

## Recipe
```
{pretrain_command}
minibert export {run.as_posix()} --out {out.as_posix()} --dtype {dtype}
```
Training text: {', '.join(a['corpus'])} ({recipe['train_examples']:,} {unit} of up to {a['max_seq_len']} tokens);
held-out text: {', '.join(a['eval_corpus'])}. Objective: MLM ({a['mlm_probability']:.0%}, MASK/SAME/RND
{'/'.join(f'{x:.0%}' for x in a['mask_same_rnd'])}){task}. {recipe['step']:,} steps of
{a['batch_size']} sequences, peak learning rate {a['lr']:g}, on {recipe['device']} in {recipe['precision']}:
{recipe['seconds_this_run'] / 60:.0f} minutes (of the last `minibert pretrain` call, if the run was resumed).

## Held-out figures (the exported weights, loaded back; {len(eval_data):,} held-out {unit})
| {' | '.join(columns)} |
|{'---|' * len(columns)}
| {' | '.join(values)} |

`history.json` holds the training curve, `recipe.json` every setting and the time it took.
"""
    (out / "README.md").write_text(card)
    return out


def export_finetuned(run: Path, out: Path, dtype: str) -> Path:
    """A ``minibert finetune`` folder as a smaller model folder to ship, scored again after export.

    The card gives the held-out metric of the run and of the exported weights loaded back, so the
    cost of fp16 or int8 storage is measured, not assumed.
    """
    recorded = json.loads((run / "results.json").read_text())
    task = get_task(recorded["task"])
    save_weights(task.model_class.from_pretrained(run), out, dtype)
    tokenizer = BertTokenizer.from_pretrained(run)
    tokenizer.save_pretrained(out)
    shutil.copyfile(run / "results.json", out / "results.json")
    _, hyperparameters = recorded_run(run, task.name)
    _, metrics, description = held_out_score(task.name, task.model_class.from_pretrained(out), tokenizer, recorded,
                                             hyperparameters)
    (out / "held_out.json").write_text(json.dumps(metrics, indent=2) + "\n")
    size_mb = (out / "model.safetensors").stat().st_size / 2**20
    shown = [k for k in metrics if k != "words"]
    fmt = lambda k, v: f"{v:.2f}" if k in ("exact_match", "f1") else f"{v:.4f}"
    note = f"\n\nNote: {description['note']}.\n" if description.get("note") else ""
    loader = who_loads(task.model_class, dtype)
    card = f"""# {out.name}

{recorded['model']} fine-tuned on {task.name} by the course's own recipe. Weights in {dtype} ({size_mb:.1f} MB);
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
