"""The pre-trained models a notebook uses: loaded where they are, made by their recipe where they are not.

The UvA notebooks' rule, "load the checkpoint if it exists, otherwise train", with a guard: only the
course's own folder is ever trained into. Any other name is a model to load, a folder or a Hub id
(``bert-base-uncased`` brings Google's own pre-training heads), and a name that is neither gets the
error that says so, not a training run written wherever the name points.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ..heads import BertForPreTraining
from .export import ExportSettings, export
from .pretrain import PretrainSettings, pretrain

HEADS = {"cls.predictions": "masked-LM", "cls.seq_relationship": "next-sentence",      # BERT's names
         "head": "masked-LM", "sentence_head": "next-sentence", "seq_relationship": "next-sentence"}  # ModernBERT's


def load_or_pretrain(model: str, model_class=BertForPreTraining, *, course_folder: str | None = None,
                     recipe: PretrainSettings | Sequence[PretrainSettings] | None = None, run_dir: str | None = None,
                     time_budget: float | None = None, dtype: str = "int8"):
    """``model`` with its pre-training heads, in eval mode.

    A folder with a config.json is loaded. ``model`` naming ``course_folder`` while that folder is
    missing makes it: ``recipe`` runs in ``run_dir`` (resumed if it was started, stopped after
    ``time_budget`` seconds), then is exported there in ``dtype``. A recipe in stages (a sequence of
    settings) runs each in its own folder (``run_dir``-s1, -s2, ...) from the model the one before
    exported. Anything else is loaded as a folder or a Hub id. A model without the heads ``model_class``
    has (a sentence encoder, a fine-tuned classifier) is refused: its predictions at [MASK] would be
    those of a random layer.
    """
    path = Path(model)
    if (path / "config.json").is_file():
        loaded = model_class.from_pretrained(path)
    elif course_folder is not None and path.resolve() == Path(course_folder).resolve():
        if recipe is None or run_dir is None:
            raise ValueError(f"{course_folder} is missing and no recipe was given to make it")
        last_run = pretrain_stages(recipe, run_dir, time_budget)
        export(ExportSettings(run=last_run, out=course_folder, dtype=dtype))
        loaded = model_class.from_pretrained(course_folder)
    else:
        loaded = model_class.from_pretrained(model)  # a Hub id, or an error that says what the name is not
    lacking = sorted({HEADS[head] for head in HEADS for key in loaded.loading_info["missing_keys"]
                      if key.startswith(head + ".")})
    if lacking:
        raise ValueError(f"{model} has no pre-trained {' or '.join(lacking)} head (it was trained for something "
                         "else, e.g. sentence embeddings): name a BERT with its pre-training heads, such as "
                         "the course's folder or 'bert-base-uncased'")
    return loaded.eval()


def pretrain_stages(recipe: PretrainSettings | Sequence[PretrainSettings], run_dir: str,
                    time_budget: float | None = None) -> Path:
    """Run a recipe, resumably, and return the folder of its last run.

    In stages, each goes on from the fp32 export of the one before, as BERT's 128-then-512 did. The time
    budget is shared out by the tokens each stage reads (steps x batch x length), a fair proxy of its
    cost. A stage the budget stopped early is an error, not a weaker start for the next: the next stage's
    starting point would be frozen at that step. Running again goes on where it stopped.
    """
    stages = [recipe] if isinstance(recipe, PretrainSettings) else list(recipe)
    if not stages:
        raise ValueError("the recipe has no stages: give PretrainSettings, or a list of them")
    if len(stages) == 1:
        pretrain(replace(stages[0], out=run_dir, resume=True, time_budget=time_budget))
        return Path(run_dir)
    tokens = [s.steps * s.batch_size * s.max_seq_len for s in stages]
    start = {}  # the first stage starts as its settings say; each later one from the export of the one before
    for i, stage in enumerate(stages, 1):
        out = Path(f"{run_dir}-s{i}")
        budget = None if time_budget is None else time_budget * tokens[i - 1] / sum(tokens)
        done = pretrain(replace(stage, out=out, resume=True, time_budget=budget, **start))
        if i < len(stages) and done.name != f"step-{stage.steps:06d}":
            raise RuntimeError(f"stage {i} of the recipe stopped at {done.name} of {stage.steps}, after its share of "
                               f"the time budget ({budget:.0f} s): run again to go on where it stopped, or give a "
                               "larger budget")
        model = Path(f"{run_dir}-s{i}-model")
        if i < len(stages) and not (model / "config.json").exists():
            export(ExportSettings(run=out, out=model, dtype="fp32"))
        start = {"init_from": str(model)}
    return out
