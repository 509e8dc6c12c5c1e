"""Where a student's BERT first parts from the library's: feedback a student can act on.

"max |difference| 2.4" says that the capstone's BERT is wrong, not where. Positions off by one, pre-LN
instead of post-LN, a padding mask left out and segments ignored all give that one line. `first_difference`
narrows it down the way one would by hand: which inputs make it differ (one segment without padding, two
segments, padding), and then how deep: the same weights in models of 0, 1, 2, ... layers, the student's and
the library's, until the first depth at which they part. That names the part: the embeddings, layer k, or
the pooler.
"""
from __future__ import annotations

import copy

import torch

from ..model import BertModel


def _truncated(reference: BertModel, layers: int) -> BertModel:
    """``reference`` with only its first ``layers`` layers (0: the embeddings alone), the same weights."""
    config = copy.deepcopy(reference.config)
    config.num_hidden_layers = layers
    model = BertModel(config).eval()
    own = model.state_dict()
    model.load_state_dict({name: tensor for name, tensor in reference.state_dict().items() if name in own})
    return model


def _gap(my_bert_class, load_weights, reference: BertModel, inputs: dict) -> tuple[float, float]:
    """Max |difference| of the sequence output (real tokens only) and of the pooled output."""
    mine = my_bert_class(reference.config)
    load_weights(mine, reference.state_dict())
    with torch.no_grad():
        sequence, pooled = mine.eval()(inputs["input_ids"], inputs["token_type_ids"], inputs["attention_mask"])
        expected = reference(**inputs)
    real = inputs["attention_mask"].bool()
    return ((sequence[real] - expected.last_hidden_state[real]).abs().max().item(),
            (pooled - expected.pooler_output).abs().max().item())


def first_difference(my_bert_class, load_weights, reference: BertModel, input_ids, token_type_ids=None,
                     attention_mask=None, atol: float = 1e-5) -> str | None:
    """None if ``my_bert_class`` holding ``reference``'s weights (put there by ``load_weights``) gives its
    outputs on these inputs; else which inputs and which part make the first difference, in a sentence.

    ``my_bert_class(config)`` must build a model of any depth the config says, 0 layers included (a
    `nn.ModuleList` of none is fine); where it cannot, the search starts at one layer."""
    reference = reference.eval()
    token_type_ids = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
    attention_mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
    given = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask}
    sequence_gap, pooled_gap = _gap(my_bert_class, load_weights, reference, given)
    if sequence_gap <= atol and pooled_gap <= atol:
        return None
    # which inputs: one segment and no padding first, then the segments, then the padding
    plain = {**given, "token_type_ids": torch.zeros_like(input_ids), "attention_mask": torch.ones_like(input_ids)}
    segments = {**plain, "token_type_ids": token_type_ids}
    cases = [(plain, ""),
             (segments, " with two segments (token_type_ids 0 and 1), though it agrees with one: are the segment "
                        "embeddings added, looked up by token_type_ids?"),
             (given, " with padding, though it agrees without: padded positions (attention_mask 0) must get no "
                     "attention from any token (a (B, 1, 1, T) mask on the scores before the softmax)")]
    inputs, where = next(((case, why) for case, why in cases if max(_gap(my_bert_class, load_weights, reference,
                                                                         case)) > atol), (given, ""))
    # how deep: the first number of layers at which the two part
    for layers in range(reference.config.num_hidden_layers + 1):
        try:
            gap, _ = _gap(my_bert_class, load_weights, _truncated(reference, layers), inputs)
        except Exception:  # the student's model may not build without layers: start at one
            if layers == 0:
                continue
            raise
        if gap > atol:
            part = ("the embeddings already differ (token + position + segment embeddings, summed, then LayerNorm; "
                    "positions 0 to T-1)" if layers == 0 else
                    f"the embeddings agree; layer {layers} of {reference.config.num_hidden_layers} is the first "
                    "that differs (attention: Q, K, V split into heads, scores / sqrt(head size), softmax, heads "
                    "merged, output dense; then x = LayerNorm(x + sublayer(x)) twice, post-LN, with the GELU "
                    "feed-forward)")
            return f"{part}: max |difference| {gap:.2e}{where}"
    return (f"every layer agrees; the pooled output differs (max |difference| {pooled_gap:.2e}): tanh of the pooler's "
            "dense layer on position 0, the [CLS] vector")
