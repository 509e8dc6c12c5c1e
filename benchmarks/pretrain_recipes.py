"""Which recipe gets a from-scratch BERT off the unigram plateau fastest on a CPU: one budget, one test.

Every recipe pre-trains the same size of model on the same text for the same CPU time and is scored
on the same held-out fill-in-the-blank test (WikiText-2 test, 15% of the tokens, every one a [MASK]).
The levers are `minibert pretrain` settings (pre-LN, learning rate, warmup, dropout, vocabulary,
sequence length, NSP or not, in-domain text); BERT's own recipe and transformers' masked-LM recipe
(``BertForMaskedLM`` + ``DataCollatorForLanguageModeling`` + a plain AdamW loop with linear warmup and
decay) run beside them on the same examples; so does transformers' ``ModernBertForMaskedLM`` in that loop,
beside the course's ModernBERT recipe, to tell what the design buys from what minibert's code buys.

A budget is CPU time of training on one thread. Each run first times a few updates, then sets its
number of steps so that the whole learning-rate schedule (warmup, then decay to zero) fits the
budget: a run cut off by a clock in mid-schedule would be judged on an unfinished recipe.

    python benchmarks/pretrain_recipes.py --budgets 3 15                 # every recipe, 3 and 15 CPU-minutes
    python benchmarks/pretrain_recipes.py --recipes pre-ln bert --budgets 60

The recipes named "04: ..." are notebook 04's own run (a bert-tiny on WikiText-2 test, held out on
its validation articles) at four sequence lengths, each batch holding 1,024 tokens; their curves are
the notebook's picture of the plateau:

    python benchmarks/pretrain_recipes.py --recipes "04: 16 tokens" "04: 32 tokens" "04: 64 tokens" \
        "04: 128 tokens" --budgets 3 --results notebooks/results/plateau.json

Results go to ``--results`` as each run ends; running the command again skips what is there, and an
interrupted minibert run goes on from its last checkpoint (in ``--work``); a transformers run starts again.
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import time
from datetime import date
from pathlib import Path

import torch

from minibert.atomic import atomic_path
from minibert.config import PRESETS
from minibert.pretraining import build_pretraining_data, fill_in_the_blank_data, pretraining_metrics, unigram_loss
from minibert.recipes.export import ExportSettings, export
from minibert.recipes.pretrain import PretrainSettings, make_model, make_tokenizer, pretrain
from minibert.tokenizer import BertTokenizer
from minibert.training import evaluate

TEXT = ("wikipedia_2015",)  # 7,586 Wikipedia articles, about 21M tokens (the 2026-11-25 table: WikiText-2 valid + books)
HELD_OUT = ("wikitext2_raw/wiki.test.raw",)
BASE = dict(preset="bert-mini", corpus=TEXT, eval_corpus=HELD_OUT, max_seq_len=128, batch_size=32)
BERT = dict(objective="nsp", lr=1e-4, warmup_ratio=0.1, dropout=0.1)          # the paper's recipe, scaled down
RECIPES: dict[str, dict] = {
    "bert": BERT,
    "bert, lr 5e-4": {**BERT, "lr": 5e-4},                                        # the course's old default
    "mlm only": dict(objective="none", lr=5e-4, warmup_ratio=0.1, dropout=0.0),
    "pre-ln": dict(objective="none", lr=1e-3, warmup_ratio=0.1, dropout=0.0, pre_layer_norm=True),
    "pre-ln, lr 2e-3": dict(objective="none", lr=2e-3, warmup_ratio=0.1, dropout=0.0, pre_layer_norm=True),
    "pre-ln, nsp": dict(objective="nsp", lr=1e-3, warmup_ratio=0.1, dropout=0.0, pre_layer_norm=True),
    "pre-ln, vocab 8k": dict(objective="none", lr=1e-3, warmup_ratio=0.1, dropout=0.0, pre_layer_norm=True,
                             vocab_size=8000),
    "pre-ln, seq 64": dict(objective="none", lr=1e-3, warmup_ratio=0.1, dropout=0.0, pre_layer_norm=True,
                           max_seq_len=64, batch_size=64),
    "pre-ln, bert-tiny": dict(objective="none", lr=2e-3, warmup_ratio=0.1, dropout=0.0, pre_layer_norm=True,
                              preset="bert-tiny"),
    "seq 16": dict(objective="none", lr=1e-3, warmup_ratio=0.1, dropout=0.0, max_seq_len=16, batch_size=64),
    "seq 32": dict(objective="none", lr=1e-3, warmup_ratio=0.1, dropout=0.0, max_seq_len=32, batch_size=32),
    "seq 16, pre-ln": dict(objective="none", lr=1e-3, warmup_ratio=0.1, dropout=0.0, max_seq_len=16, batch_size=64,
                           pre_layer_norm=True),
    "seq 16, nsp": dict(objective="nsp", lr=1e-3, warmup_ratio=0.1, dropout=0.0, max_seq_len=16, batch_size=64),
    "transformers": dict(objective="none", lr=1e-4, warmup_ratio=0.1, dropout=0.1),  # see transformers_run
    "transformers, seq 16": dict(objective="none", lr=1e-3, warmup_ratio=0.1, dropout=0.0, max_seq_len=16,
                                 batch_size=64),
    # 128-token pairs from the first step, 8 an update (many updates), MosaicBERT's 30%: still on the plateau
    # after 18 CPU-minutes (2026-11-28), which is why bert-mini-course's recipe (STAGED) starts on 16 tokens
    "seq 128, batch 8": dict(objective="nsp", lr=1e-3, warmup_ratio=0.05, dropout=0.0, batch_size=8, vocab_size=8000,
                             mlm_probability=0.3),
    # transformers' masked-LM recipe (DataCollatorForLanguageModeling, 15%, MLM alone) on the course's text,
    # length, vocabulary and learning rate
    "transformers, course": dict(objective="none", lr=1e-3, warmup_ratio=0.05, dropout=0.0, batch_size=16,
                                 vocab_size=8000),
}
# Recipes in stages: (share of the budget, settings); a stage goes on from the one before (`init_from`). The course
# checkpoint's (modernbert-mini-course): a ModernBERT (window 32) on 128-token sequences from the first step, MosaicBERT's
# 30% masking, then pairs of 128 with NSP; the shares are the shipped run's (48 and 10 CPU-minutes).
MODERN = dict(architecture="modernbert", dropout=0.0, warmup_ratio=0.05, mlm_probability=0.3)
STAGED = {
    "course": ((0.83, dict(MODERN, objective="none", lr=1e-3, vocab_size=8000, batch_size=8, local_attention=32)),
               (0.17, dict(MODERN, objective="nsp", lr=5e-4, batch_size=16))),
    # bert-mini-course's: 16-token sequences spread over the first 128 positions (every position trained), then pairs
    "course, bert": ((0.6, dict(objective="none", lr=1e-3, warmup_ratio=0.1, dropout=0.0, vocab_size=8000,
                                max_seq_len=16, batch_size=64, random_positions=128)),
                     (0.4, dict(objective="nsp", lr=1e-3, warmup_ratio=0.05, dropout=0.0, max_seq_len=128,
                                batch_size=16))),
}
# transformers' ModernBertForMaskedLM (sdpa attention) in the same loop, with the course recipe's first stage: the same
# model, masking, batches and learning rate, the whole budget on the masked LM. Set beside "course", it tells what
# the design buys from what minibert's implementation buys.
RECIPES["transformers, modern"] = dict(STAGED["course"][0][1])
for name, stages in STAGED.items():
    for i, (_, knobs) in enumerate(stages, 1):
        RECIPES[f"{name}, stage {i}"] = knobs
# Notebook 04's run: BERT's post-LN bert-tiny, MLM only, its own 8,000-piece vocabulary, 1,024 tokens a step.
NOTEBOOK_04 = dict(preset="bert-tiny", corpus=("wikitext2_raw/wiki.test.raw",),
                   eval_corpus=("wikitext2_raw/wiki.valid.raw",), vocab_size=8000, objective="none", lr=1e-3,
                   warmup_ratio=0.1, dropout=0.0)
for tokens in (16, 32, 64, 128):
    RECIPES[f"04: {tokens} tokens"] = dict(NOTEBOOK_04, max_seq_len=tokens, batch_size=1024 // tokens)
CALIBRATION_STEPS = 24  # a few updates are a noisy clock: 8 once overestimated a step by 30%


def settings(recipe: str, out: Path, steps: int) -> PretrainSettings:
    knobs = {**BASE, **RECIPES[recipe]}
    # Notebook 04's runs are drawn as curves; the others are scored once, at the end (a held-out pass
    # costs as much as many training steps of a bert-mini).
    curve = max(1, steps // 12) if recipe.startswith("04: ") else None
    return PretrainSettings(out=out, steps=steps, save_every=max(1, steps // 10), eval_every=curve, **knobs)


def cpu_seconds_per_step(recipe: str, work: Path) -> float:
    """Time a few updates (the first one, which warms caches up, left out)."""
    folder = work / "calibration"
    shutil.rmtree(folder, ignore_errors=True)
    if recipe.startswith("transformers"):
        return transformers_run(recipe, folder, CALIBRATION_STEPS, time_only=True)
    s = settings(recipe, folder, CALIBRATION_STEPS)
    s.eval_corpus, s.eval_every, s.save_every = (), None, None
    pretrain(s)
    records = json.loads((folder / "history.json").read_text())
    shutil.rmtree(folder)
    return next(r["cpu_s_per_step"] for r in reversed(records) if "cpu_s_per_step" in r)


def minibert_run(recipe: str, folder: Path, steps: int, init_from: Path | None = None) -> dict:
    s = settings(recipe, folder, steps)
    s.resume = any(folder.glob("step-*"))
    if init_from is not None:  # a later stage: that model's weights and vocabulary
        s.init_from, s.vocab_size, s.preset = str(init_from), None, "bert-tiny"
    pretrain(s)
    recipe_file = json.loads((folder / "recipe.json").read_text())
    final = recipe_file["final"]
    curve = [[r["step"], round(r["eval_mlm_loss"], 4), round(r["eval_mlm_accuracy"], 4)]
             for r in json.loads((folder / "history.json").read_text()) if "eval_mlm_loss" in r]
    return {**({"curve": curve} if len(curve) > 1 else {}), "eval_mlm_loss": final["eval_mlm_loss"],
            "eval_mlm_accuracy": final["eval_mlm_accuracy"], "eval_mlm_top5": final["eval_mlm_top5"],
            "unigram_loss": recipe_file["unigram_loss"],
            **({"eval_nsp_accuracy": final["eval_nsp_accuracy"]} if "eval_nsp_accuracy" in final else {})}


def transformers_run(recipe: str, folder: Path, steps: int, time_only: bool = False):
    """transformers' own masked-LM recipe on the course's packed examples, scored by the same test."""
    import transformers
    from transformers import DataCollatorForLanguageModeling, get_linear_schedule_with_warmup

    r = {**BASE, **RECIPES[recipe]}
    if r.get("vocab_size"):  # the vocabulary minibert's recipe trains on the same text, the same for both
        tokenizer = make_tokenizer(PretrainSettings(out=folder, corpus=r["corpus"], vocab_size=r["vocab_size"]))
        tokenizer.save_pretrained(folder / "tokenizer")
        hf_tokenizer = transformers.BertTokenizerFast.from_pretrained(folder / "tokenizer")
    else:
        tokenizer = BertTokenizer.from_pretrained("sentence-transformers/all-MiniLM-L6-v2")
        hf_tokenizer = transformers.AutoTokenizer.from_pretrained("sentence-transformers/all-MiniLM-L6-v2")
    examples = build_pretraining_data(tokenizer, list(r["corpus"]), "none", r["max_seq_len"]).examples
    if r.get("architecture") == "modernbert":  # the config minibert builds for these settings, read by transformers
        ours = make_model(settings(recipe, folder, steps), tokenizer).config.to_dict()
        model_class, config = transformers.ModernBertForMaskedLM, transformers.ModernBertConfig.from_dict(ours)
        examples = [{"input_ids": e["input_ids"]} for e in examples]  # ModernBERT has no token types
    else:
        layers, hidden, heads = PRESETS[r["preset"]]
        model_class, config = transformers.BertForMaskedLM, transformers.BertConfig(
            vocab_size=tokenizer.vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=4 * hidden, hidden_dropout_prob=r["dropout"], attention_probs_dropout_prob=r["dropout"])
    torch.manual_seed(0)
    model = model_class(config)
    collator = DataCollatorForLanguageModeling(hf_tokenizer, mlm_probability=r.get("mlm_probability", 0.15),
                                               return_tensors="pt")
    loader = torch.utils.data.DataLoader(examples, r["batch_size"],  # dicts of input_ids and token_type_ids
                                         shuffle=True, drop_last=True, collate_fn=collator,
                                         generator=torch.Generator().manual_seed(0))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=r["lr"], eps=1e-6)
    schedule = get_linear_schedule_with_warmup(optimizer, round(r["warmup_ratio"] * steps), steps)
    model.train()
    step, started = 0, None
    while step < steps:
        for batch in loader:
            if step == 1:
                started = time.process_time()
            loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step == steps:
                break
    if time_only:
        return (time.process_time() - started) / (steps - 1)
    held_out = fill_in_the_blank_data(tokenizer, list(r["eval_corpus"]), "none", r["max_seq_len"])
    def collate(examples: list[dict]) -> dict:  # the same batches; ModernBERT is not given token types
        batch = held_out.collate(examples)
        if r.get("architecture") == "modernbert":
            del batch["token_type_ids"]
        return batch

    metrics = evaluate(model, held_out, batch_size=32, collate_fn=collate, metrics_fn=pretraining_metrics,
                       device="cpu")
    return {"eval_mlm_loss": metrics["mlm_loss"], "eval_mlm_accuracy": metrics["mlm_accuracy"],
            "eval_mlm_top5": metrics["mlm_top5"],
            "unigram_loss": unigram_loss(examples, held_out.examples, tokenizer.vocab_size)}


def staged_run(recipe: str, folder: Path, budget: float, work: Path) -> tuple[int, float, dict]:
    """A recipe in stages, each its share of the budget (its steps from its own calibration), each stage
    exported and continued by the next. Returns (steps in all, CPU-s per step of the last stage, the
    last stage's measures)."""
    plan_file, previous, total = folder / "plan.json", None, 0
    plan = json.loads(plan_file.read_text()) if plan_file.exists() else {}
    for i, (share, _) in enumerate(STAGED[recipe], 1):
        stage = f"{recipe}, stage {i}"
        if stage not in plan:  # an interrupted run resumes with the steps it was planned with
            per_step = cpu_seconds_per_step(stage, work) if previous is None else staged_calibration(stage, work, previous)
            plan[stage] = {"cpu_s_per_step": per_step, "steps": max(10, round(share * budget * 60 / per_step))}
            folder.mkdir(parents=True, exist_ok=True)
            with atomic_path(plan_file) as tmp:
                tmp.write_text(json.dumps(plan) + "\n")
        steps = plan[stage]["steps"]
        measured = minibert_run(stage, folder / f"stage-{i}", steps, init_from=previous)
        total += steps
        previous = folder / f"stage-{i}-model"
        if not (previous / "config.json").exists():
            export(ExportSettings(run=folder / f"stage-{i}", out=previous, dtype="fp32"))
    return total, plan[stage]["cpu_s_per_step"], measured


def staged_calibration(stage: str, work: Path, init_from: Path) -> float:
    """Time a few updates of a later stage, from the model the stage before made."""
    folder = work / "calibration"
    shutil.rmtree(folder, ignore_errors=True)
    s = settings(stage, folder, CALIBRATION_STEPS)
    s.eval_corpus, s.eval_every, s.save_every = (), None, None
    s.init_from, s.vocab_size, s.preset = str(init_from), None, "bert-tiny"
    pretrain(s)
    records = json.loads((folder / "history.json").read_text())
    shutil.rmtree(folder)
    return next(r["cpu_s_per_step"] for r in reversed(records) if "cpu_s_per_step" in r)


def load(path: Path) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    return {"command": "python " + " ".join(sys.argv), "base": BASE, "recipes": RECIPES, "runs": [],
            "machine": f"{platform.processor() or platform.machine()}, 1 thread", "torch": torch.__version__,
            "date": date.today().isoformat()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    whole = [name for name in RECIPES if "stage" not in name] + list(STAGED)  # a stage runs within its recipe
    parser.add_argument("--recipes", nargs="+", choices=whole, metavar="RECIPE",
                        default=[name for name in whole if not name.startswith("04: ")],
                        help=f"which recipes (default all but notebook 04's): {', '.join(whole)}")
    parser.add_argument("--budgets", nargs="+", type=float, default=[3, 15], metavar="MINUTES",
                        help="CPU-minutes of training per run (default 3 15)")
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/pretrain_recipes_wikipedia.json"))
    parser.add_argument("--work", type=Path, default=Path("runs/pretrain_recipes"),
                        help="checkpoints of the runs, so an interrupted one goes on")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = load(args.results)
    for budget in args.budgets:
        for recipe in args.recipes:
            if any(r["recipe"] == recipe and r["budget_minutes"] == budget for r in results["runs"]):
                continue
            folder = args.work / f"{recipe.replace(', ', '_').replace(' ', '-')}_{budget:g}min"
            plan = folder / "plan.json"  # an interrupted run resumes with the steps it was planned with
            if recipe in STAGED:
                started = time.process_time()
                steps, per_step, measured = staged_run(recipe, folder, budget, args.work)
            elif plan.exists():
                per_step, steps = (json.loads(plan.read_text())[k] for k in ("cpu_s_per_step", "steps"))
            else:
                per_step = cpu_seconds_per_step(recipe, args.work)
                steps = max(10, round(budget * 60 / per_step))
                folder.mkdir(parents=True, exist_ok=True)
                with atomic_path(plan) as tmp:
                    tmp.write_text(json.dumps({"cpu_s_per_step": per_step, "steps": steps}) + "\n")
            if recipe not in STAGED:
                print(f"\n== {recipe}, {budget:g} CPU-minutes: {steps} steps of {per_step:.2f} s", flush=True)
                started = time.process_time()
                measured = (transformers_run(recipe, folder, steps) if recipe.startswith("transformers")
                            else minibert_run(recipe, folder, steps))
            run = {"recipe": recipe, "budget_minutes": budget, "steps": steps, "cpu_s_per_step": round(per_step, 3),
                   "cpu_minutes": round((time.process_time() - started) / 60, 1), **measured,
                   "below_plateau": measured["unigram_loss"] - measured["eval_mlm_loss"]}
            print(json.dumps(run), flush=True)
            results = load(args.results)  # read again: another process may have added its rows to the same file
            results["runs"].append(run)
            args.results.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(args.results) as tmp:
                tmp.write_text(json.dumps(results, indent=1) + "\n")
    print(f"\n{'recipe':26s} {'min':>4s} {'steps':>6s} {'loss':>6s} {'below':>6s} {'acc':>6s} {'top5':>6s}")
    for r in sorted(results["runs"], key=lambda r: (r["budget_minutes"], r["eval_mlm_loss"])):
        print(f"{r['recipe']:26s} {r['budget_minutes']:4g} {r['steps']:6d} {r['eval_mlm_loss']:6.3f} "
              f"{r['below_plateau']:6.3f} {r['eval_mlm_accuracy']:6.1%} {r['eval_mlm_top5']:6.1%}")


if __name__ == "__main__":
    main()
