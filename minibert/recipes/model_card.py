"""What a model card says and how its figures are measured, for `minibert export`.

A card's held-out figures are measured on the exported weights loaded back, on at most `CARD_EXAMPLES`
held-out sequences (or task examples) spread evenly over the held-out data (`spread_over`): the same
ones every time, within about a point of the whole set's figures, and seconds of work for a small model
instead of the hour a whole Wikipedia held-out set would take (a progress bar shows each test). The
card also gives the commands that made the model (`command_of`, `earlier_stage`) and what loads it.
"""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from safetensors import safe_open

from ..config import read_json
from ..heads import BertForPreTraining
from ..hub import INT8_WEIGHTS
from ..modernbert import ModernBertForPreTraining
from ..pretraining import (
    MLMMasking,
    WikiTextAsStored,
    build_pretraining_data,
    fill_in_the_blank_data,
    next_sentence_accuracy,
)
from ..pretraining.dataset import FILL_IN_THE_BLANK_SEED
from .pretrain import PretrainSettings, held_out_data, plateau, score, training_data

CARD_EXAMPLES = 512  # held-out sequences (task examples) a card is scored on: its figures within about a point


def who_loads(model, dtype: str) -> str:
    """The model card's line on what reads the weights (``model``: the class or an instance)."""
    name = model.__name__ if isinstance(model, type) else type(model).__name__
    if dtype == "int8":
        return (f"minibert's `{name}.from_pretrained` (int8 rows with a scale each, see `minibert.hub`; "
                f"transformers refuses the folder: `minibert export FOLDER --out NEW --dtype fp16` converts it "
                f"into one that transformers reads)")
    if name == "ModernBertForPreTraining":
        return (f"`{name}.from_pretrained` (minibert; transformers' `AutoModelForMaskedLM` reads the masked LM and "
                "leaves the sentence-pair head out, having no ModernBERT class with one)")
    if getattr(model, "config", None) is not None and model.config.to_dict()["model_type"] not in ("bert", "modernbert"):
        return f"minibert's `{name}.from_pretrained` (its config goes beyond BERT's, so transformers refuses it)"
    return f"`{name}.from_pretrained` (minibert or transformers)"


def command_of(args: dict, run: Path) -> str:
    """The `minibert pretrain` command line that repeats a run, from its recipe.json's settings."""
    flags = [f"--{k.replace('_', '-')}" + ("" if v is True else " " + (" ".join(map(str, v)) if isinstance(v, list) else str(v)))
             for k, v in sorted(args.items(), key=lambda kv: kv[0] not in ("preset", "init_from"))  # the model first
             if v is not None and v is not False and k not in ("func", "resume", "out", "time_budget")
             and (k, v) != ("architecture", "bert")]  # the default, and what every run before the flag was
    flags = [f.replace("--pre-layer-norm", "--pre-ln") for f in flags
             if not (args.get("init_from") and f.startswith(("--preset", "--tokenizer")))]  # init_from's own
    return " \\\n    ".join(["minibert pretrain " + " ".join(flags), f"--out {run.as_posix()}"])


def earlier_stage(args: dict) -> dict | None:
    """The recipe of the run that made ``init_from``, where it is a folder this project exported (a model
    pre-trained in stages, as BERT was: its card then gives every stage's command, not only the last)."""
    init_from = args.get("init_from")
    recipe = Path(init_from) / "recipe.json" if init_from else None
    if recipe is None or not recipe.is_file():
        return None
    earlier = read_json(recipe, "earlier stage's recipe")
    return earlier if earlier.get("command") == "minibert pretrain" and "args" in earlier else None


def folder_dtype(folder: Path) -> str:
    """How an exported folder stores its weights: int8, or the number format of its safetensors file."""
    if (folder / INT8_WEIGHTS).is_file():
        return "int8"
    with safe_open(folder / "model.safetensors", framework="pt") as weights:
        first = weights.get_slice(next(iter(weights.keys()))).get_dtype()
    return {"F16": "fp16", "BF16": "bf16"}.get(first, "fp32")


def run_time(recipe: dict) -> str:
    """A run's minutes; on a CPU also its process's CPU-minutes, the work done whatever else the machine ran
    (older runs recorded wall time only)."""
    wall = f"{recipe['seconds_this_run'] / 60:.0f} minutes"
    if recipe.get("device") != "cpu" or "cpu_seconds_this_run" not in recipe:
        return wall
    return f"{wall} ({recipe['cpu_seconds_this_run'] / 60:.0f} CPU-minutes)"


def earlier_time(earlier: dict | None) -> str:
    if earlier is None:
        return ""
    return (f" The first run: {earlier['step']:,} steps of {earlier['args']['batch_size']} sequences, peak learning "
            f"rate {earlier['args']['lr']:g}, {run_time(earlier)} on {earlier['device']}.")


def score_held_out(model, tokenizer, args: dict, most: int = CARD_EXAMPLES) -> tuple[dict[str, float], int, int]:
    """A pre-trained model on its recipe's held-out text (the recipe's `score`): fill-in-the-blank figures
    (every scored token a [MASK]) and the unigram plateau; WikiText also as stored, its tokenisation marks
    kept; NSP (or SOP) on held-out pairs, with the test's blanks and with no token masked; and the
    accuracy under the training corruption, labelled as such. Returns the figures, how many held-out
    sequences were scored, and how many the text makes.

    Fill in the blank is scored on the held-out text packed into sequences (`fill_in_the_blank_data`'s
    ``objective="none"``), the same test whatever the model's objective: in sentence pairs, half the
    blanks would have another article's text beside them. Each test takes at most ``most`` sequences,
    spread over the text (`spread_over`), the same ones for the same text: a card costs seconds, not
    hours, and its figures stay within about a point of the whole text's.
    """
    s = PretrainSettings(**{k: v for k, v in args.items() if k in {f.name for f in fields(PretrainSettings)}})
    sources = list(s.eval_corpus)
    blanks = fill_in_the_blank_data(tokenizer, sources, "none", s.max_seq_len)
    total = len(blanks)
    blanks = spread_over(blanks, most)
    held_out = {f"eval_{name}": value for name, value in  # as in history.json
                score(s, model, blanks, 32, "cpu", progress="card: fill in the blank").items()}
    stored = [WikiTextAsStored(source) for source in sources if str(source).startswith("wikitext")]
    if stored:
        as_stored = score(s, model, spread_over(fill_in_the_blank_data(tokenizer, stored, "none", s.max_seq_len), most),
                          32, "cpu", progress="card: WikiText as stored")
        held_out.update(eval_mlm_accuracy_as_stored=as_stored["mlm_accuracy"], eval_mlm_top5_as_stored=as_stored["mlm_top5"])
    if s.objective != "none" and isinstance(model, (BertForPreTraining, ModernBertForPreTraining)):
        paired = score(s, model, spread_over(held_out_data(s, tokenizer), most), 32, "cpu",  # the held-out pairs
                       progress=f"card: {s.objective.upper()}")
        held_out.update(eval_nsp_accuracy=paired["nsp_accuracy"], eval_nsp_loss=paired["nsp_loss"])
        # the same pairs (the test's seed, the same spread), without its blanks
        pairs = spread_over(build_pretraining_data(tokenizer, sources, s.objective, s.max_seq_len,
                                                   seed=FILL_IN_THE_BLANK_SEED), most)
        held_out["eval_nsp_accuracy_unmasked"] = next_sentence_accuracy(model, pairs.examples, tokenizer.pad_token_id)
    corruption = MLMMasking(tokenizer, s.mlm_probability, s.mask_same_rnd, whole_word=s.whole_word,
                            spans=s.span_masking)
    corrupted = build_pretraining_data(tokenizer, sources, "none", s.max_seq_len, masking=corruption,
                                       static_masking=True, seed=s.seed)
    held_out["eval_mlm_accuracy_80_10_10"] = score(s, model, spread_over(corrupted, most), 32, "cpu",
                                                   progress="card: 80/10/10")["mlm_accuracy"]
    held_out["unigram_loss"] = plateau(training_data(s, tokenizer), blanks, tokenizer.vocab_size)
    return held_out, len(blanks), total


def spread_over(data, most: int):
    """``data`` with at most ``most`` of its examples, evenly spaced over it (every part of the held-out
    text, not only its first articles); the same ones every time for the same data."""
    total = len(data.examples)
    if total > most:
        data.examples = [data.examples[i * total // most] for i in range(most)]
    return data


def spread(scored: int, total: int) -> str:
    """What a card says of the held-out sequences it was scored on."""
    if scored == total:
        return f"{total:,} held-out sequences"
    return f"{scored:,} of the {total:,} held-out sequences, evenly spread over the text"
