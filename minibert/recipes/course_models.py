"""The pre-trained models a notebook uses: loaded where they are, made by their recipe where they are not.

The UvA notebooks' rule, "load the checkpoint if it exists, otherwise train", with a guard: only the
course's own folder is ever trained into. Any other name is a model to load, a folder or a Hub id
(``bert-base-uncased`` brings Google's own pre-training heads), and a name that is neither gets the
error that says so, not a training run written wherever the name points.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..heads import BertForMaskedLM, BertForPreTraining
from .export import ExportSettings, export
from .pretrain import PretrainSettings, pretrain

HEADS = {"cls.predictions": "masked-LM", "cls.seq_relationship": "next-sentence"}


def load_or_pretrain(model: str, model_class=BertForPreTraining, *, course_folder: str | None = None,
                     recipe: PretrainSettings | None = None, run_dir: str | None = None,
                     time_budget: float | None = None, dtype: str = "int8") -> BertForPreTraining | BertForMaskedLM:
    """``model`` with its pre-training heads, in eval mode.

    A folder with a config.json is loaded. ``model`` naming ``course_folder`` while that folder is
    missing makes it: ``recipe`` runs in ``run_dir`` (resumed if it was started, stopped after
    ``time_budget`` seconds), then is exported there in ``dtype``. Anything else is loaded as a folder or
    a Hub id. A model without the heads ``model_class`` has (a sentence encoder, a fine-tuned classifier)
    is refused: its predictions at [MASK] would be those of a random layer.
    """
    path = Path(model)
    if (path / "config.json").is_file():
        loaded = model_class.from_pretrained(path)
    elif course_folder is not None and path.resolve() == Path(course_folder).resolve():
        if recipe is None or run_dir is None:
            raise ValueError(f"{course_folder} is missing and no recipe was given to make it")
        pretrain(replace(recipe, out=run_dir, resume=True, time_budget=time_budget))
        export(ExportSettings(run=run_dir, out=course_folder, dtype=dtype))
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
