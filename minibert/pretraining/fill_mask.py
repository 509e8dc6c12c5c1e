"""A masked LM as a user meets it: the model's first guesses at each [MASK] of a sentence.

transformers calls this the ``fill-mask`` pipeline. Each blank is scored on its own, given everything
that is not masked (the model does not fill several blanks jointly: notebook 04, "BERT is not a
generator"). Model cards and the notebooks show it on the paper's and the lectures' sentences.
"""
from __future__ import annotations

import torch

from ..modes import eval_mode

# The blanks of the paper (§3.1) and of the lectures: a fact, an article, a preposition, a plural
# ending and two blanks at once.
LECTURE_BLANKS = ("paris is the [MASK] of france .",
                  "the man went to [MASK] store .",
                  "he bought a gallon [MASK] milk .",
                  "penguin [MASK] are flightless birds .",
                  "the [MASK] hopkins university is located in [MASK] city .")


@torch.no_grad()
def fill_mask(model, tokenizer, text: str, k: int = 5) -> list[list[tuple[str, float]]]:
    """For each [MASK] in ``text``, left to right: the ``k`` likeliest tokens and their probabilities.

    ``model``: a ``BertForMaskedLM`` or ``BertForPreTraining`` (minibert's, or transformers').
    """
    encoding = tokenizer(text, return_tensors="pt")
    blanks = (encoding["input_ids"][0] == tokenizer.mask_token_id).nonzero()[:, 0]
    if len(blanks) == 0:
        raise ValueError(f"{text!r} has no {tokenizer.mask_token}: put one where the model should guess a word")
    with eval_mode(model):
        device = next(model.parameters()).device
        outputs = model(**{name: value.to(device) for name, value in encoding.items()})
    logits = getattr(outputs, "prediction_logits", None)
    logits = outputs.logits if logits is None else logits                  # (1, T, V)
    top = logits[0, blanks].float().softmax(-1).topk(k)                    # (N_blanks, k)
    return [[(tokenizer.convert_ids_to_tokens(int(i)), p.item()) for p, i in zip(ps, ids)]
            for ps, ids in zip(top.values, top.indices)]
