"""The recipe commands' flags: ``minibert pretrain``, ``export``, ``finetune`` and ``evaluate``.

The recipes take settings objects (`minibert.recipes`); a parser here only says which flags were given
(argument_default=SUPPRESS), so every default has one home: the settings class. The help texts repeat the
defaults for the reader.
"""
import argparse
from dataclasses import fields
from pathlib import Path


def _parser(prog: str, description: str, epilog: str | None = None) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=prog, description=description, epilog=epilog,
                                   argument_default=argparse.SUPPRESS)


def pretrain_parser() -> argparse.ArgumentParser:
    from ..config import ALBERT_PRESETS, PRESETS
    from ..recipes.pretrain import PretrainSettings

    p = _parser("minibert pretrain", "Pre-train a BERT with masked LM (+ NSP or SOP) on a text corpus.",
                "example (CPU, ~10 minutes): minibert pretrain --preset bert-mini --vocab-size 8000 "
                "--time-budget 600 --out runs/bert-mini")
    add = p.add_argument
    add("--out", required=True, help="output folder: checkpoints (step-N/), the tokenizer, history.json, recipe.json")
    add("--preset", choices=[*PRESETS, *ALBERT_PRESETS],
        help="model size (default: bert-tiny); albert-* factorise the embedding and share one layer's "
             "weights (ALBERT; pair them with --objective sop)")
    add("--architecture", choices=["bert", "modernbert"],
        help="bert (default): Devlin et al. 2018; modernbert: Warner et al. 2024's encoder (pre-LN, GeGLU, RoPE, "
             "no biases, sliding-window attention, unpadding) at --preset's size; MLM alone unless --objective nsp "
             "or sop adds BERT's pair head")
    add("--local-attention", type=int, metavar="TOKENS",
        help="--architecture modernbert: the sliding window of its local layers (default: 128, ModernBERT's; with "
             "--init-from, that model's)")
    add("--init-from", metavar="MODEL",
        help="go on pre-training this BERT (Hub id or folder) instead of starting from scratch: its weights, size "
             "and vocabulary; heads it lacks (e.g. the MLM head of a sentence-embedding model) start fresh")
    add("--extend-from", type=int, metavar="LENGTH",
        help="--init-from was trained on inputs of LENGTH tokens and one segment: its positions beyond LENGTH start "
             "as copies of the first LENGTH, segment B as a copy of segment A (for a second stage on longer pairs)")
    add("--random-positions", type=int, metavar="N",
        help="place each training sequence at a random offset within the first N positions, so that a stage on "
             "short sequences trains every position a later stage on N tokens reads")
    add("--tokenizer", help="a Hub id or folder with vocab.txt/tokenizer.json")
    add("--objective", choices=["nsp", "sop", "none"],
        help="nsp: BERT (MLM + next sentence; the default for bert); sop: ALBERT (sentence order); none: RoBERTa "
             "and ModernBERT (MLM on packed sentences; the default for modernbert)")
    add("--mlm-probability", type=float, help="fraction of tokens to predict (default 0.15)")
    add("--mask-same-rnd", type=float, nargs=3, metavar=("MASK", "SAME", "RND"),
        help="of the predicted tokens: fraction replaced by [MASK], kept, replaced by a random token "
             "(default 0.8 0.1 0.1)")
    add("--whole-word", action="store_true", help="mask all pieces of a word together")
    add("--span-masking", action="store_true", help="mask runs of whole words, 3.8 on average (SpanBERT)")
    add("--static-masking", action="store_true", help="mask once up front (BERT) instead of in every batch (RoBERTa)")
    add("--time-budget", type=float, help="stop (and save) after this many seconds; --resume goes on")
    add("--grad-accum", type=int, help="micro-batches per update")
    add("--eval-every", type=int, help="evaluate every N steps (default: at the end)")
    add("--save-every", type=int, help="write a checkpoint every N steps (default: at the end; the last 2 are kept)")
    add("--compile", action="store_true", help="torch.compile the model (GPU)")
    add("--unpadded", action="store_true",
        help="bert: run the layers on the real tokens only, skipping the padding (the same model and losses)")
    add("--num-workers", type=int, metavar="N",
        help="processes that make the batches beside the training, for a GPU the host cannot feed (default 0)")
    add("--seed", type=int, help="seed of the data, the masks and the initial weights (default 0)")
    add("--resume", action="store_true", help="go on from the latest checkpoint in --out")
    _add_training_flags(p, PretrainSettings)
    return p


def _add_training_flags(parser: argparse.ArgumentParser, settings_class, held_out_optional: bool = True,
                        without: tuple[str, ...] = ()) -> None:
    """The flags of the recipe's shared `TrainingSettings`, for `minibert pretrain` and every grid; the help
    gives ``settings_class``'s defaults. ``held_out_optional``: whether a run may go without held-out text
    (`minibert pretrain` may; a grid scores every run on it). ``without``: flags the command sets itself
    (``"steps"`` where a CPU budget sets them), left out so that none is shown and then ignored."""
    from dataclasses import MISSING, fields

    d = {f.name: f.default if f.default is not MISSING else f.default_factory() for f in fields(settings_class)
         if f.default is not MISSING or f.default_factory is not MISSING}
    add = parser.add_argument
    add("--corpus", nargs="+",
        help="training text: dataset names of minibert.data (wikipedia_2015, wikitext2_raw, gutenberg, state_union, "
             "...), DATASET/FILE or DATASET/FOLDER (wikipedia_2015/AA), or paths to .txt files / folders "
             f"(default: {' '.join(d['corpus'])})")
    skip = ("; none, or the flag alone, to skip held-out evaluation" if held_out_optional
            else "; every run is scored on it, so it cannot be skipped")
    add("--eval-corpus", nargs="*",
        help=f"held-out text for evaluation, same forms (default: {' '.join(d['eval_corpus'])}{skip})")
    add("--vocab-size", type=int, help="train a new WordPiece vocabulary of this size on --corpus"
                                       + (f" (default {d['vocab_size']})" if d["vocab_size"] else " instead"))
    add("--max-seq-len", type=int, help=f"tokens per example, [CLS] and [SEP]s included (default {d['max_seq_len']})")
    if "steps" not in without:
        add("--steps", type=int, help=f"optimizer updates (default {d['steps']})")
    add("--batch-size", type=int, help=f"examples per micro-batch and process (default {d['batch_size']})")
    add("--lr", type=float, help=f"peak learning rate (default {d['lr']:g}; small models take more than BERT-base's 1e-4)")
    add("--warmup-ratio", type=float, help=f"fraction of the steps of linear warmup (default {d['warmup_ratio']})")
    add("--dropout", type=float,
        help=f"dropout on hidden states and attention weights (default {d['dropout']}; the paper's is 0.1, and a run "
             "far shorter than one pass over its text overfits little and learns faster without it)")
    add("--pre-ln", dest="pre_layer_norm", action=argparse.BooleanOptionalAction,
        help="pre-LN layers (LayerNorm before each sub-layer, one after the stack) instead of BERT's post-LN: "
             f"trains stably at higher learning rates (default {'pre-LN' if d['pre_layer_norm'] else 'post-LN'})")
    add("--precision", choices=["auto", "bf16", "fp16", "fp32"], help="auto: bf16 on CUDA, fp32 on CPU (default auto)")
    add("--device", help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:1, mps")


def export_parser() -> argparse.ArgumentParser:
    p = _parser("minibert export",
                "Turn a `minibert pretrain` run or a `minibert finetune` folder into a model folder to share: the "
                "weights (fp16 by default, half the size; int8, a quarter), the tokenizer, the recipe and a model "
                "card with the held-out figures measured on the exported weights. Given a model folder, convert "
                "it to --dtype (e.g. a shipped int8 folder into fp16 that transformers reads).")
    p.add_argument("run", help="the --out folder of minibert pretrain or minibert finetune, or a model folder")
    p.add_argument("--out", required=True, help="folder to write (config.json, model.safetensors, vocab.txt, README.md, ...)")
    p.add_argument("--dtype", choices=["fp16", "bf16", "fp32", "int8"],
                   help="weights' precision (default fp16; int8: one int8 per weight and a scale per row, "
                        "which only minibert reads: transformers refuses such a folder)")
    return p


def finetune_parser() -> argparse.ArgumentParser:
    from ..recipes.finetune import PRESETS
    from ..training import PRECISIONS

    p = _parser("minibert finetune",
                "Fine-tune a pre-trained BERT on a task, score it on held-out data and save it with its tokenizer, "
                "results.json and predictions.json.",
                "example (CPU, ~10 minutes): minibert finetune sst2 --model sentence-transformers/all-MiniLM-L6-v2 "
                "--out runs/sst2")
    add = p.add_argument
    add("task", help="sst2: sentence classification (GLUE SST-2); squad: answer spans (SQuAD v1.1); "
                     "pos: part-of-speech tagging (UD English EWT); sentence pairs: mrpc (paraphrase, GLUE MRPC), "
                     "stsb (similarity 0-5, a regression), rte (entailment, GLUE RTE), snli (3-way entailment; "
                     "trained on SNLI dev, scored on test), qnli (evaluate only: no train split offline); "
                     "named entities: ner (CoNLL-2003), wnut17 (WNUT-17)")
    add("--model", required=True, help="the pre-trained BERT: a Hub id (bert-base-uncased, "
                                       "sentence-transformers/all-MiniLM-L6-v2) or a folder save_pretrained wrote")
    add("--tokenizer", help="a Hub id or folder with vocab.txt/tokenizer.json (default: the same as --model)")
    add("--out", required=True, help="output folder: the fine-tuned model and tokenizer, results.json, "
                                     "predictions.json, checkpoints/")
    add("--preset", choices=["auto", *PRESETS],
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
    add("--split", help="the held-out split to score on: dev (default) or test for mrpc, stsb, ner and wnut17 (the "
                        "paper's figures are on test); squad: 'train/dev' or 'dev by article' (default: what the "
                        "data folder allows)")
    add("--feature-based", action="store_true",
        help="pos only: first train linear probes on the frozen model's features (the paper's Table 7: "
             "embeddings, last, second to last, last four, weighted sums) to compare with fine-tuning")
    add("--precision", choices=PRECISIONS, help="auto: bf16 on CUDA, fp32 on CPU (default auto)")
    add("--unpadded", action="store_true",
        help="run the encoder on the real tokens only, skipping the padding (the same model and scores; squad: the "
             "padding is no candidate answer in the loss)")
    add("--device", help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:1, mps")
    add("--seed", type=int, help="seed of the new layer, dropout, data order and --train-examples")
    add("--resume", action="store_true", help="go on from the latest checkpoint in OUT/checkpoints")
    return p


def evaluate_parser() -> argparse.ArgumentParser:
    from ..tasks import TASKS

    p = _parser("minibert evaluate",
                "Score a fine-tuned model on a task's held-out data. A folder written by minibert finetune is "
                "scored on the data it was evaluated on there (its results.json says which).",
                "example: minibert evaluate sst2 --model runs/sst2")
    add = p.add_argument
    add("task", help=", ".join(TASKS))
    add("--model", required=True, help="the fine-tuned model: a folder (minibert finetune --out) or a Hub id")
    add("--tokenizer", help="a Hub id or folder with vocab.txt/tokenizer.json (default: the same as --model)")
    add("--eval-examples", type=int, metavar="N", help="only the first N held-out examples (default: as in results.json, or all)")
    add("--max-length", type=int, help="tokens per input (default: as in results.json, or the task's default)")
    add("--split", help="the held-out split: dev or test for mrpc, stsb, ner and wnut17 (default: as in results.json, "
                        "or the task's own: dev; snli: test)")
    add("--device", help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:1, mps")
    return p


def _pretrain(given: dict):
    """With --resume, the flags not given are the run's own (recipe.json, written when it started)."""
    from ..recipes import PretrainSettings, pretrain
    from ..recipes.run_record import with_recorded
    if given.get("resume"):
        names = {f.name for f in fields(PretrainSettings)}
        given = with_recorded(given, Path(given["out"]) / "recipe.json", "args", names)
    return pretrain(PretrainSettings(**given))


def _export(given: dict):
    from ..recipes import ExportSettings, export
    return export(ExportSettings(**given))


def _finetune(given: dict):
    """With --resume, the flags not given are the run's own (checkpoints/run.json, written when it started)."""
    from ..recipes import FinetuneSettings, finetune
    from ..recipes.run_record import with_recorded
    if given.get("resume"):
        names = {f.name for f in fields(FinetuneSettings)}
        given = with_recorded(given, Path(given["out"]) / "checkpoints" / "run.json", "flags", names)
    return finetune(FinetuneSettings(**given))


def _evaluate(given: dict):
    from ..recipes import EvaluateSettings, evaluate
    return evaluate(EvaluateSettings(**given))


# command -> (its parser, what runs it on the given flags, what to call the path it returns when printing it,
#             what to do after an interruption or a full disk)
RESUME, AGAIN = "run the same command with --resume to go on", "run the same command again"
RECIPES = {"pretrain": (pretrain_parser, _pretrain, "checkpoint", RESUME),
           "export": (export_parser, _export, "model", f"{AGAIN} (nothing was left in its --out)"),
           "finetune": (finetune_parser, _finetune, None, RESUME),
           "evaluate": (evaluate_parser, _evaluate, None, AGAIN)}
