"""The paper's table of fine-tuning results, for the course's model: one command, one results file.

Devlin et al. (2018) report BERT-base on GLUE's test server (Table 1) and on CoNLL-2003 NER (Table 7).
Here each task is fine-tuned with the paper's recipe (`minibert finetune --preset paper`: 3 epochs,
batches of 32, 10% warmup; NER 4 epochs of 16) on the course's offline model, MiniLM, and scored on
the labelled split closest to the paper's:

    mrpc  MRPC's labelled test set (1,725 pairs), as the paper      F1 of "paraphrase"
    stsb  STS-B's test set (1,379 pairs), as the paper              Spearman correlation
    rte   RTE dev (277): GLUE's test labels are secret              accuracy
    sst2  SST-2 dev (872): the same                                 accuracy
    qnli  not measured: QNLI's train set is not in the offline data
    ner   CoNLL-2003 eng.testb (3,453 sentences), as the paper      entity-level F1

What differs is written into the file beside each number (model, split, budget), so the notebook's
table can say it. Each task's run is a `minibert finetune` output folder in ``runs``; a finished one
(results.json present) is read, not run again, and an interrupted one is resumed, so running the
command twice costs nothing and an interruption loses at most one checkpoint. ``reuse`` takes a run
made elsewhere (e.g. the course's SST-2 model) for a task instead.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import atomic_path
from ..training import find_checkpoints
from .glue_benchmark import BY_KEY, metric_key

# (metric, BERT-base's figure, the split it was measured on): Table 1 (GLUE test server, `glue_benchmark`) and Table 7.
PAPER: dict[str, tuple[str, float, str]] = {
    key: (metric_key(BY_KEY[key].metric), BY_KEY[key].bert_base, "test") for key in ("mrpc", "stsb", "rte", "sst2", "qnli", "ner")}
# The labelled split we score on: the paper's where it is public, else dev.
SPLITS = {"mrpc": "test", "stsb": "test", "rte": "dev", "sst2": "dev", "qnli": "dev", "ner": "test"}
UNAVAILABLE = {"qnli": "QNLI's train set is not in the offline data: nothing to fine-tune on"}
TASKS = tuple(PAPER)


@dataclass(kw_only=True)
class GlueSettings:
    """``minibert experiment glue``'s flags, as plain data."""
    out: str                                  # the results file (JSON)
    runs: str                                 # one `minibert finetune` output folder per task: runs/TASK
    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    tasks: tuple[str, ...] = TASKS
    lr: float = 5e-5                          # the top of the paper's range (2e-5 to 5e-5): a small model's choice
    steps: int | None = None                  # None: the paper's epochs; N: a quick look of N updates per task
    seed: int = 0
    device: str = "auto"
    reuse: dict[str, str] = field(default_factory=dict)  # task -> a finished run's folder, used instead of running

    def __post_init__(self):
        unknown = sorted(set(self.tasks) - set(TASKS)) + sorted(set(self.reuse) - set(TASKS))
        if unknown:
            raise ValueError(f"unknown task(s) {', '.join(unknown)}: choose from {', '.join(TASKS)}")
        for task, folder in self.reuse.items():
            if not (Path(folder) / "results.json").is_file():
                raise FileNotFoundError(f"--reuse {task}={folder}: no results.json there; give a folder that "
                                        "`minibert finetune` finished")


def run_task(settings: GlueSettings, task: str) -> tuple[dict, str]:
    """Fine-tune ``task`` (or read its finished run); returns results.json's content and the run's folder."""
    from ..recipes.finetune import FinetuneSettings, finetune

    folder = Path(settings.reuse.get(task) or Path(settings.runs) / task)
    if not (folder / "results.json").is_file():
        resume = bool(find_checkpoints(folder / "checkpoints"))
        finetune(FinetuneSettings(task=task, model=settings.model, out=str(folder), preset="paper", lr=settings.lr,
                                  steps=settings.steps, split=SPLITS[task], seed=settings.seed,
                                  device=settings.device, resume=resume))
    return json.loads((folder / "results.json").read_text(encoding="utf-8")), folder.as_posix()


def row(task: str, results: dict | None, folder: str | None) -> dict:
    """One line of the table: ours beside the paper's, with what differs."""
    metric, paper, paper_split = PAPER[task]
    entry = {"task": task, "metric": metric, "paper": paper, "paper_split": paper_split,
             "paper_model": "BERT-base (110M), the paper's fine-tuning"}
    if results is None:
        return entry | {"ours": None, "why_not": UNAVAILABLE[task]}
    metrics = results["metrics"]
    # The run's command names its output folder as it was given; show it relative to where it was read.
    command = results["command"].replace(str(Path(folder).resolve()), folder)
    minutes = round(results["train_seconds_this_run"] / 60, 1)
    return entry | {
        "ours": round(100 * metrics[metric], 1),
        "metrics": {k: round(100 * v, 2) for k, v in metrics.items() if isinstance(v, float)},
        "model": results["model"], "data": results["data"], "split": results["data"]["eval"],
        "settings": results["settings"], "preset": results["preset"], "steps": results["steps"],
        "epochs_done": results["epochs_done"], "train_minutes": minutes, "device": results["device"],
        "command": command}


def experiment(settings: GlueSettings, command: str = "") -> Path:
    """Fine-tune (or read) every task, then write the table; returns the results file's path."""
    rows = []
    started = time.perf_counter()
    for task in settings.tasks:
        if task in UNAVAILABLE and task not in settings.reuse:
            rows.append(row(task, None, None))
            continue
        results, folder = run_task(settings, task)
        rows.append(row(task, results, folder))
        print(f"{task}: {rows[-1]['metric']} {rows[-1]['ours']} (paper, BERT-base: {rows[-1]['paper']})")
    table = {"command": command, "model": settings.model, "seconds_this_call": round(time.perf_counter() - started),
             "note": "ours: MiniLM (22M parameters) fine-tuned on one CPU core with the paper's recipe at lr "
                     f"{settings.lr:g}; the paper: BERT-base (110M), the best of several learning rates on dev, "
                     "scored by GLUE's server on secret test labels (MRPC, STS-B and CoNLL-2003 test labels are "
                     "public, so those are measured on the same test sets)",
             "rows": rows}
    with atomic_path(settings.out) as tmp:
        tmp.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"table in {os.fspath(settings.out)}")
    return Path(settings.out)
