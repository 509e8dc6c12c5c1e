"""Recipes: whole runs from the command line, built from the library's pieces.

``minibert pretrain`` is BERT's pre-training (Devlin et al. §3.1, §A.2) at any size: text →
WordPiece → NSP/SOP pairs or packed sentences → dynamic 15% masking → `Trainer`. Every knob of the
masking ablations (notebook 05) is a flag, and the output folder is a checkpoint that
``BertForPreTraining.from_pretrained`` (or transformers) loads, with its tokenizer beside it.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch.nn.functional as F

from ..config import ALBERT_PRESETS, PRESETS, BertConfig
from ..heads import BertForMaskedLM, BertForPreTraining
from ..pretraining import MLMMasking, build_pretraining_data, load_documents
from ..tokenizer import BertTokenizer
from ..training import TrainConfig, Trainer

DEFAULT_TOKENIZER = "sentence-transformers/all-MiniLM-L6-v2"  # the bert-base-uncased vocabulary


def pretrain_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(prog="minibert pretrain")
    p.description = "Pre-train a BERT with masked LM (+ NSP or SOP) on a text corpus."
    p.epilog = ("example (CPU, ~10 minutes): minibert pretrain --preset bert-mini --vocab-size 8000 "
                "--time-budget 600 --out runs/bert-mini")
    add = p.add_argument
    add("--out", required=True, help="output folder: checkpoints (step-N/), the tokenizer, history.json, recipe.json")
    add("--preset", default="bert-tiny", choices=[*PRESETS, *ALBERT_PRESETS],
        help="model size (default: bert-tiny); albert-* factorise the embedding and share one layer's "
             "weights (ALBERT; pair them with --objective sop)")
    add("--corpus", nargs="+", default=["wikitext2_raw/wiki.valid.raw"],
        help="training text: dataset names of minibert.data (wikitext2_raw, gutenberg, state_union, ...), "
             "DATASET/FILE, or paths to .txt files / folders (default: wikitext2_raw/wiki.valid.raw)")
    add("--eval-corpus", nargs="*", default=["wikitext2_raw/wiki.test.raw"],
        help="held-out text for evaluation, same forms (default: wikitext2_raw/wiki.test.raw; none to skip)")
    add("--tokenizer", default=DEFAULT_TOKENIZER, help="a Hub id or folder with vocab.txt/tokenizer.json")
    add("--vocab-size", type=int, help="train a new WordPiece vocabulary of this size on --corpus instead")
    add("--objective", default="nsp", choices=["nsp", "sop", "none"],
        help="nsp: BERT (MLM + next sentence); sop: ALBERT (sentence order); none: RoBERTa (MLM on packed sentences)")
    add("--max-seq-len", type=int, default=128, help="tokens per example, [CLS] and [SEP]s included (default 128)")
    add("--mlm-probability", type=float, default=0.15, help="fraction of tokens to predict (default 0.15)")
    add("--mask-same-rnd", type=float, nargs=3, default=(0.8, 0.1, 0.1), metavar=("MASK", "SAME", "RND"),
        help="of the predicted tokens: fraction replaced by [MASK], kept, replaced by a random token "
             "(default 0.8 0.1 0.1)")
    add("--whole-word", action="store_true", help="mask all pieces of a word together")
    add("--static-masking", action="store_true", help="mask once up front (BERT) instead of in every batch (RoBERTa)")
    add("--steps", type=int, default=1000, help="optimizer updates (default 1000)")
    add("--time-budget", type=float, help="stop (and save) after this many seconds; --resume goes on")
    add("--batch-size", type=int, default=32, help="examples per micro-batch and process (default 32)")
    add("--grad-accum", type=int, default=1, help="micro-batches per update")
    add("--lr", type=float, default=5e-4,
        help="peak learning rate (default 5e-4: small models take more than BERT-base's 1e-4)")
    add("--warmup-ratio", type=float, default=0.1, help="fraction of --steps of linear warmup (default 0.1)")
    add("--dropout", type=float, default=0.1,
        help="dropout on hidden states and attention weights (default 0.1, the paper's; a run far shorter than "
             "one pass over its text overfits little and learns faster without it)")
    add("--eval-every", type=int, help="evaluate every N steps (default: at the end)")
    add("--save-every", type=int, help="write a checkpoint every N steps (default: at the end; the last 2 are kept)")
    add("--precision", default="auto", choices=["auto", "bf16", "fp16", "fp32"],
        help="auto: bf16 on CUDA, fp32 on CPU (default auto)")
    add("--compile", action="store_true", help="torch.compile the model (GPU)")
    add("--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:1, mps")
    add("--seed", type=int, default=0, help="seed of the data, the masks and the initial weights (default 0)")
    add("--resume", action="store_true", help="go on from the latest checkpoint in --out")
    return p


def pretrain(args: argparse.Namespace) -> Path:
    """Run the recipe; returns the folder of the final checkpoint."""
    out = Path(args.out)
    tokenizer_dir = out / "tokenizer"
    if args.resume and tokenizer_dir.exists():
        tokenizer = BertTokenizer.from_pretrained(tokenizer_dir)  # the vocabulary the checkpoint was trained with
    elif args.vocab_size:
        tokenizer = BertTokenizer.train(
            [" ".join(sentences) for sentences in load_documents(args.corpus)], vocab_size=args.vocab_size)
    else:
        tokenizer = BertTokenizer.from_pretrained(args.tokenizer)
    masking = MLMMasking(tokenizer, args.mlm_probability, tuple(args.mask_same_rnd), whole_word=args.whole_word)
    data = dict(objective=args.objective, max_seq_len=args.max_seq_len, masking=masking,
                static_masking=args.static_masking, seed=args.seed)
    train_data = build_pretraining_data(tokenizer, args.corpus, **data)
    eval_data = build_pretraining_data(tokenizer, args.eval_corpus, **data) if args.eval_corpus else None

    config = BertConfig.from_preset(args.preset, vocab_size=tokenizer.vocab_size,
                                    max_position_embeddings=max(512, args.max_seq_len),
                                    hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.dropout)
    model = (BertForMaskedLM if args.objective == "none" else BertForPreTraining)(config)
    train_config = TrainConfig(
        max_steps=args.steps, batch_size=args.batch_size, grad_accum_steps=args.grad_accum, lr=args.lr,
        warmup_ratio=args.warmup_ratio, eval_every=args.eval_every, save_every=args.save_every,
        precision=args.precision, compile=args.compile, device=args.device, out_dir=str(out),
        time_budget_s=args.time_budget, seed=args.seed)
    trainer = Trainer(model, train_config, train_data, eval_data, collate_fn=train_data.collate,
                      metrics_fn=pretraining_metrics)
    if trainer.is_main:  # under torchrun every process built the same tokenizer; one writes it
        tokenizer.save_pretrained(tokenizer_dir)
    started = time.perf_counter()
    history = trainer.fit(resume=args.resume)
    if trainer.is_main:
        recipe = {"command": "minibert pretrain", "args": {k: v for k, v in vars(args).items() if k != "func"},
                  "train_examples": len(train_data), "eval_examples": len(eval_data or []),
                  "parameters": sum(p.numel() for p in model.parameters()), "step": trainer.step,
                  "seconds_this_run": round(time.perf_counter() - started, 1), "device": str(trainer.device),
                  "precision": trainer.precision, "final": {k: v for k, v in history.records[-1].items()}}
        (out / "recipe.json").write_text(json.dumps(recipe, indent=2, default=str) + "\n")
    return out / f"step-{trainer.step:06d}"


def pretraining_metrics(outputs, batch) -> dict[str, float]:
    """MLM loss and accuracy over the masked positions and, with NSP/SOP, that task's loss and accuracy.

    The model's own loss is their sum; apart, they show which objective is learning.
    """
    logits = getattr(outputs, "prediction_logits", None)
    logits = outputs.logits if logits is None else logits
    labels = batch["labels"]
    masked = labels != -100
    if logits.dim() == 3:  # eval: (B, T, V) over every position; training: (N_masked, V) already
        logits = logits[masked]
    targets = labels[masked]
    metrics = {"mlm_loss": F.cross_entropy(logits.float(), targets).item(),
               "mlm_accuracy": (logits.argmax(-1) == targets).float().mean().item()}
    if "next_sentence_label" in batch:
        nsp_logits, nsp_labels = outputs.seq_relationship_logits.float(), batch["next_sentence_label"]
        metrics["nsp_loss"] = F.cross_entropy(nsp_logits, nsp_labels).item()
        metrics["nsp_accuracy"] = (nsp_logits.argmax(-1) == nsp_labels).float().mean().item()
    return metrics


def export_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(prog="minibert export")
    p.description = ("Turn a `minibert pretrain` run or a `minibert finetune` folder into a model folder to share: "
                     "the weights (fp16 by default, half the size; int8, a quarter), the tokenizer, the recipe and "
                     "a model card with the held-out figures measured on the exported weights.")
    p.add_argument("run", help="the --out folder of minibert pretrain or minibert finetune")
    p.add_argument("--out", required=True, help="folder to write (config.json, model.safetensors, vocab.txt, README.md, ...)")
    p.add_argument("--dtype", default="fp16", choices=["fp16", "bf16", "fp32", "int8"],
                   help="weights' precision (default fp16; int8: one int8 per weight and a scale per row, "
                        "which only minibert reads)")
    return p


def save_weights(model, out: Path, dtype: str) -> None:
    """``save_pretrained`` in fp16, bf16, fp32 or int8 (`minibert.int8`)."""
    import torch

    if dtype == "int8":
        model.save_pretrained(out, int8_weights=True)
    else:
        model.to({"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]).save_pretrained(out)


def who_loads(model_class, dtype: str) -> str:
    """The model card's line on what reads the weights."""
    if dtype == "int8":
        return ("minibert's `from_pretrained` (int8 rows with a scale each, see `minibert.int8`; transformers "
                "cannot read them)")
    return f"`{model_class.__name__}.from_pretrained` (minibert or transformers)"


def export(args: argparse.Namespace) -> Path:
    """Write the shareable model folder; returns it."""
    import shutil

    from ..training import find_checkpoints

    run, out = Path(args.run), Path(args.out)
    if (run / "results.json").is_file() and (run / "model.safetensors").is_file():
        from .finetune import export_finetuned
        return export_finetuned(run, out, args.dtype)
    checkpoints = find_checkpoints(run)
    if not checkpoints or not (run / "recipe.json").exists():
        raise FileNotFoundError(f"{run} holds no finished minibert pretrain run (step-N/ and recipe.json) "
                                "and no minibert finetune output (model.safetensors and results.json)")
    recipe = json.loads((run / "recipe.json").read_text())
    model_class = BertForMaskedLM if recipe["args"]["objective"] == "none" else BertForPreTraining
    model = model_class.from_pretrained(checkpoints[-1])
    save_weights(model, out, args.dtype)
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
    trainer = Trainer(reloaded, TrainConfig(max_steps=1, batch_size=min(32, len(eval_data)), device="cpu",
                                            progress=False, seed=a["seed"]),
                      eval_data, eval_data, collate_fn=eval_data.collate, metrics_fn=pretraining_metrics)
    held_out = trainer.evaluate()
    (out / "held_out.json").write_text(json.dumps(held_out, indent=2) + "\n")
    size_mb = (out / "model.safetensors").stat().st_size / 2**20
    flags = [f"--{k.replace('_', '-')}" + ("" if v is True else " " + (" ".join(map(str, v)) if isinstance(v, list) else str(v)))
             for k, v in a.items() if v not in (None, False) and k not in ("func", "resume", "out")]
    pretrain_command = " \\\n    ".join(["minibert pretrain " + " ".join(flags), f"--out {run.as_posix()}"])
    loader = who_loads(model_class, args.dtype)
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
so that the notebooks have a masked-LM model that works offline. Weights in {args.dtype}
({size_mb:.1f} MB); {loader} loads them.

## Recipe
```
{pretrain_command}
minibert export {run.as_posix()} --out {out.as_posix()} --dtype {args.dtype}
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
