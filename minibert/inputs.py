"""What a forward pass accepts: the usual mistakes with a model's inputs, turned into messages.

Kept beside the model rather than in it, so that the file students read (`minibert.model`) shows the
architecture, and this one the guard rails every model and the Trainer share.
"""
from __future__ import annotations

import torch
from torch import Tensor

from .config import BertConfig


def check_inputs(config: BertConfig, input_ids: Tensor, attention_mask: Tensor | None = None,
                 token_type_ids: Tensor | None = None, position_ids: Tensor | None = None,
                 packed_positions: Tensor | None = None) -> None:
    """Turn the usual mistakes into messages that say what to do, not an index error in an embedding.

    Shapes and dtypes are checked always. Token and segment ids are checked against the vocabulary
    only on the CPU, where reading them is free: on a GPU, ``.min()`` would wait for the device at
    every forward pass. So the Trainer checks each batch here before moving it to the device.
    ``packed_positions`` (`minibert.unpadding`) can only be one thing, the attention mask's real tokens; on
    the CPU they are checked to be that, since any other would quietly mix padding into the layers.
    """
    if not isinstance(input_ids, Tensor):
        raise TypeError(f"input_ids must be a torch.Tensor of token ids, got {type(input_ids).__name__}; "
                        "use tokenizer(..., return_tensors='pt')")
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must have shape (batch, seq_len), got {tuple(input_ids.shape)}; "
                         "for a single sequence use input_ids.unsqueeze(0)")
    if input_ids.dtype not in (torch.long, torch.int32):
        raise TypeError(f"input_ids must be integer token ids, got dtype {input_ids.dtype}")
    if input_ids.size(1) == 0:
        raise ValueError(f"input_ids has no tokens (shape {tuple(input_ids.shape)}); every sequence needs at least "
                         "[CLS]: encode text with the tokenizer, which adds it")
    for name, other in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids),
                        ("position_ids", position_ids)):
        if other is not None and not isinstance(other, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor like input_ids, got {type(other).__name__}; "
                            f"use torch.tensor({name}) or tokenizer(..., return_tensors='pt')")
        if other is not None and other.shape != input_ids.shape:
            raise ValueError(f"{name} has shape {tuple(other.shape)} but input_ids has "
                             f"{tuple(input_ids.shape)}; they must match token for token")
    if token_type_ids is not None and (token_type_ids.is_floating_point() or token_type_ids.is_complex()):
        raise TypeError(f"token_type_ids must be integer segment ids (0 for A, 1 for B), got dtype "
                        f"{token_type_ids.dtype}; use token_type_ids.long()")
    if input_ids.size(1) > config.max_position_embeddings:
        raise ValueError(f"sequence length {input_ids.size(1)} is longer than max_position_embeddings="
                         f"{config.max_position_embeddings}; truncate the input "
                         f"(tokenizer(..., truncation=True, max_length={config.max_position_embeddings}))")
    if packed_positions is not None and (not isinstance(packed_positions, Tensor) or packed_positions.dim() != 1
                                         or packed_positions.dtype != torch.long):
        raise TypeError(f"packed_positions must be a 1-D tensor of longs, got {_described(packed_positions)}; "
                        "make them with minibert.unpadding.packed_positions(attention_mask), or leave them out")
    if input_ids.device.type != "cpu" or torch.compiler.is_compiling() or input_ids.numel() == 0:
        return  # reading values would wait for the device, or break a compiled graph
    if packed_positions is not None:
        real = (attention_mask.flatten() if attention_mask is not None
                else torch.ones(input_ids.numel(), dtype=torch.bool)).nonzero().flatten()  # (B·T,) -> (N,)
        if not torch.equal(packed_positions.cpu(), real):
            raise ValueError(f"packed_positions ({packed_positions.numel()} of them) are not the real tokens of the "
                             f"attention mask ({real.numel()}, at the flat positions b·T + t); make them with "
                             "minibert.unpadding.packed_positions(attention_mask), or leave them out")
    if input_ids.min() < 0 or input_ids.max() >= config.vocab_size:
        bad = input_ids[(input_ids < 0) | (input_ids >= config.vocab_size)].unique()[:5].tolist()
        raise ValueError(f"token ids {bad} are outside the vocabulary [0, {config.vocab_size}); was the "
                         "input made with a tokenizer for another vocabulary?")
    if attention_mask is not None and attention_mask.dtype != torch.bool:
        bad = attention_mask[(attention_mask != 0) & (attention_mask != 1)]
        if bad.numel():
            raise ValueError(f"attention_mask must hold 1 (a real token) and 0 (padding), got values "
                             f"{sorted(set(bad.unique()[:4].tolist()))}; an additive mask (0 and -10000) must be "
                             "turned back first: attention_mask = (additive_mask == 0).long()")
    if position_ids is not None and (position_ids.min() < 0 or position_ids.max() >= config.max_position_embeddings):
        raise ValueError(f"position_ids must be in [0, {config.max_position_embeddings}) (max_position_embeddings), got "
                         f"{position_ids.min().item()} to {position_ids.max().item()}; leave position_ids out for 0, 1, ..., or keep "
                         "offset + length within the table")
    if token_type_ids is not None and (token_type_ids.min() < 0 or token_type_ids.max() >= config.type_vocab_size):
        raise ValueError(f"token_type_ids must be in [0, {config.type_vocab_size}): 0 for sentence A, 1 for B")


def _described(value) -> str:
    if isinstance(value, Tensor):
        return f"a {value.dim()}-D tensor of {value.dtype}"
    return type(value).__name__
