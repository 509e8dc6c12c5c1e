"""Fine-tuning at the same wall-clock budget: minibert's recipe against a plain transformers loop.

Both start from the same checkpoint (all-MiniLM-L6-v2 from the Hub cache), train on the same
examples with the same settings (the `cpu` preset of `minibert finetune`: learning rate, batch size,
input length, warmup and the planned number of steps for the linear decay), stop when the budget
is spent, and are scored by the same evaluation code on the same held-out data. The difference is
everything a budget buys: how many examples each loop gets through in the time.

The plain loop is the one the Hugging Face course teaches: `AutoTokenizer` + `Dataset.map`,
a shuffled `DataLoader` (SST-2: `DataCollatorWithPadding`, padded per batch; SQuAD: windows padded
to max_length as in the course's `prepare_train_features`), `AutoModelFor...`, `torch.optim.AdamW`,
`get_linear_schedule_with_warmup`, clipping at 1.0. minibert's is `minibert finetune`'s: its
tokenizer and task data, batches grouped by length, the `Trainer`.

    python benchmarks/finetune.py                         # both tasks, 240 s of training each
    python benchmarks/finetune.py --task sst2 --budget 60
"""
import argparse
import json
import platform
import time
from dataclasses import replace

import torch
import transformers
from transformers import (
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    get_linear_schedule_with_warmup,
)

import minibert
from minibert.recipes.finetune import PRESETS
from minibert.tasks import get_task, squad, sst2
from minibert.tokenizer import BertTokenizer
from minibert.training import TrainConfig, Trainer

CHECKPOINT = "sentence-transformers/all-MiniLM-L6-v2"


def train_minibert(task, settings, budget, seed):
    """`minibert finetune`'s recipe, stopped by the budget: (model, task data, examples, real tokens, steps, seconds)."""
    tokenizer = BertTokenizer.from_pretrained(CHECKPOINT)
    model = get_task(task).new_model(CHECKPOINT)
    data = get_task(task).build_data(tokenizer, model, max_length=settings.max_length,
                                     train_examples=settings.train_examples, eval_examples=settings.eval_examples,
                                     seed=seed, split="dev by article")
    config = TrainConfig(max_steps=settings.max_steps, batch_size=settings.batch_size, lr=settings.lr,
                         warmup_ratio=settings.warmup_ratio, device="cpu", progress=False, time_budget_s=budget,
                         seed=seed, group_by_length=True)
    trainer = Trainer(model, config, data.train, collate_fn=data.collate)
    tokens = 0
    collate = trainer.collate_fn

    def counting(items):  # real (unpadded) tokens, to compare with the plain loop
        nonlocal tokens
        batch = collate(items)
        tokens += int(batch["attention_mask"].sum())
        return batch
    trainer.collate_fn = counting
    started = time.perf_counter()
    trainer.fit()
    return model, data, trainer.step * settings.batch_size, tokens, trainer.step, time.perf_counter() - started


def hf_squad_features(tokenizer, examples, max_length, stride):
    """The Hugging Face course's `prepare_train_features`: windows padded to max_length, answer token positions."""
    enc = tokenizer([e.question for e in examples], [e.context for e in examples], truncation="only_second",
                    max_length=max_length, stride=stride, return_overflowing_tokens=True,
                    return_offsets_mapping=True, padding="max_length")
    starts, ends = [], []
    for i, offsets in enumerate(enc["offset_mapping"]):
        example = examples[enc["overflow_to_sample_mapping"][i]]
        start_char = example.answer_starts[0]
        end_char = start_char + len(example.answers[0])
        sequence_ids = enc.sequence_ids(i)
        first = sequence_ids.index(1)
        last = len(sequence_ids) - 1 - sequence_ids[::-1].index(1)
        if not (offsets[first][0] <= start_char and offsets[last][1] >= end_char):
            starts.append(0), ends.append(0)
            continue
        s = first
        while s <= last and offsets[s][0] <= start_char:
            s += 1
        e = last
        while e >= first and offsets[e][1] >= end_char:
            e -= 1
        starts.append(s - 1), ends.append(e + 1)
    return [{"input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i],
             "attention_mask": enc["attention_mask"][i], "start_positions": starts[i], "end_positions": ends[i]}
            for i in range(len(starts))]


def train_transformers(task, settings, budget, seed, train_examples):
    """The plain loop, stopped by the budget: (model, examples, real tokens, steps, seconds)."""
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    if task == "sst2":
        model = AutoModelForSequenceClassification.from_pretrained(CHECKPOINT, num_labels=2)
        encoded = train_examples.map(lambda b: tokenizer(b["sentence"], truncation=True, max_length=settings.max_length),
                                     batched=True, remove_columns=["sentence"]).rename_column("label", "labels")
        features = [dict(row) for row in encoded]
        collate = DataCollatorWithPadding(tokenizer)
    else:
        model = AutoModelForQuestionAnswering.from_pretrained(CHECKPOINT)
        features = hf_squad_features(tokenizer, train_examples, settings.max_length, settings.max_length // 3)
        collate = transformers.default_data_collator
    loader = torch.utils.data.DataLoader(features, batch_size=settings.batch_size, shuffle=True, drop_last=True,
                                         collate_fn=collate, generator=torch.Generator().manual_seed(seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimizer, round(settings.warmup_ratio * settings.max_steps),
                                               settings.max_steps)
    model.train()
    steps = tokens = 0
    started = time.perf_counter()
    while steps < settings.max_steps and time.perf_counter() - started < budget:
        for batch in loader:
            loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            steps += 1
            tokens += int(batch["attention_mask"].sum())
            if steps >= settings.max_steps or time.perf_counter() - started >= budget:
                break
    return model.eval(), steps * settings.batch_size, tokens, steps, time.perf_counter() - started


def run(args):
    results = []
    for task in args.task:
        settings = replace(PRESETS["cpu"][task], eval_examples=args.eval_examples.get(task), time_budget_s=None)
        row = {"task": task, "budget_s": args.budget, "settings": {"lr": settings.lr, "batch": settings.batch_size,
                                                                    "max_length": settings.max_length,
                                                                    "planned_steps": settings.max_steps}}
        for library in args.order:
            if library == "minibert":
                model, data, examples, tokens, steps, seconds = train_minibert(task, settings, args.budget, args.seed)
                evaluate = data.evaluate
            else:
                model, examples, tokens, steps, seconds = train_transformers(task, settings, args.budget, args.seed,
                                                                             train_examples(task))
                evaluate = evaluator(task, settings)
            _, metrics = evaluate(model, progress=False)
            row[library] = {"steps": steps, "examples": examples, "train_seconds": round(seconds, 1),
                            "real_tokens_per_s": round(tokens / seconds),
                            **{k: round(v, 4) for k, v in metrics.items()}}
            print(task, library, row[library], flush=True)
        row["steps_ratio"] = round(row["minibert"]["steps"] / row["transformers"]["steps"], 2)
        results.append(row)
    return results


def train_examples(task):
    """The examples minibert's recipe trains on (offline SQuAD: the dev set's training articles), for the plain loop."""
    if task == "sst2":
        return sst2.load_sst2("train")
    return squad.finetuning_split("dev by article")[0]


def evaluator(task, settings):
    """minibert's evaluation of the task, on the held-out data both libraries are scored on."""
    tokenizer = BertTokenizer.from_pretrained(CHECKPOINT)
    return get_task(task).build_data(tokenizer, max_length=settings.max_length, eval_examples=settings.eval_examples,
                                     training=False, split="dev by article").evaluate


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", nargs="+", default=["sst2", "squad"], choices=["sst2", "squad"])
    parser.add_argument("--budget", type=float, default=240, help="seconds of training for each library and task")
    parser.add_argument("--squad-eval-examples", type=int, help="held-out SQuAD questions to score (default all)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--order", nargs=2, default=["transformers", "minibert"], help="which library trains first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    args.eval_examples = {"squad": args.squad_eval_examples}
    torch.set_num_threads(args.threads)
    results = run(args)
    versions = {"python": platform.python_version(), "torch": torch.__version__,
                "transformers": transformers.__version__, "minibert": minibert.__version__,
                "threads": args.threads, "cpu": platform.processor() or platform.machine()}
    print(json.dumps(versions))
    print("| task | budget | library | steps | examples | training time | real tokens/s | metric |")
    print("|---|---|---|---|---|---|---|---|")
    for row in results:
        for library in ("minibert", "transformers"):
            r = row[library]
            metric = (f"accuracy {r['accuracy']:.1%}" if row["task"] == "sst2"
                      else f"EM {r['exact_match']:.1f} / F1 {r['f1']:.1f}")
            print(f"| {row['task']} | {row['budget_s']:.0f} s | {library} | {r['steps']} | {r['examples']:,} | "
                  f"{r['train_seconds']:.0f} s | {r['real_tokens_per_s']:,} | {metric} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"versions": versions, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
