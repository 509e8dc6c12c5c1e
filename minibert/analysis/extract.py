"""Run a model over many inputs and collect every head's attention probabilities, batch by batch.

Inputs are sorted by length and padded per batch (so little is spent on padding), the model runs
once per batch under ``torch.inference_mode()`` with ``output_attentions=True``, and the L layers'
(B, heads, T, T) maps come back stacked as one (B, L, heads, T, T) tensor. Padding keys get
probability 0 (the attention mask), so every real row still sums to 1.

Inputs longer than ``max_length`` pieces (by default the model's position embeddings) are skipped,
not truncated, as Clark et al. (2019) skip examples over their 128-token limit: a cut sentence would
lose the heads of its last words. The callers report how many were skipped.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..modes import eval_mode


def check_compatible(model, tokenizer) -> None:
    """Catch the mismatches that would otherwise give an index error or silently wrong attention."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "num_attention_heads"):
        raise TypeError(f"expected a BERT model with a .config (e.g. minibert.BertModel.from_pretrained(...)), "
                        f"got {type(model).__name__}")
    if tokenizer.vocab_size > config.vocab_size:
        raise ValueError(f"the tokenizer has {tokenizer.vocab_size} word pieces but the model only embeds "
                         f"{config.vocab_size}: they come from different checkpoints. Load both from the same "
                         "one: BertTokenizer.from_pretrained(name) and BertModel.from_pretrained(name)")


def fits(tokenizer, inputs: Sequence, max_length: int, split_into_words: bool = False) -> list[bool]:
    """Whether each input can be analysed: at most ``max_length`` pieces with [CLS] and [SEP], and,
    for pre-split words, at least one piece per word (a word the normaliser erases has no attention)."""
    # Cutting at max_length + 1 marks the long ones without the tokenizer refusing them.
    encoding = tokenizer(list(inputs), is_split_into_words=split_into_words, truncation=True,
                         max_length=max_length + 1)
    return [len(ids) <= max_length and (not split_into_words or
                                        len({w for w in encoding.word_ids(i) if w is not None}) == len(inputs[i]))
            for i, ids in enumerate(encoding["input_ids"])]


def attention_batches(model, tokenizer, inputs: Sequence, *, batch_size: int = 32, split_into_words: bool = False,
                      return_offsets_mapping: bool = False, progress: bool = True,
                      desc: str = "attention") -> Iterator[tuple[list[int], dict, Tensor]]:
    """Yield ``(indices, encoding, attentions)`` per batch: which inputs, their tokenizer output,
    and the attention probabilities of every layer and head, (B, L, heads, T, T) float32.

    ``inputs`` must fit the model (see `fits`). The model runs in eval mode (no attention dropout)
    and is put back in the mode it was in.
    """
    check_compatible(model, tokenizer)
    device = next(model.parameters()).device
    order = sorted(range(len(inputs)), key=lambda i: len(inputs[i]))  # similar lengths share a batch
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    with eval_mode(model):
        for indices in tqdm(batches, desc=desc, disable=not progress, dynamic_ncols=True):
            encoding = tokenizer([inputs[i] for i in indices], is_split_into_words=split_into_words,
                                 padding=True, return_tensors="pt", return_offsets_mapping=return_offsets_mapping)
            with torch.inference_mode():
                out = model(input_ids=encoding["input_ids"].to(device),
                            attention_mask=encoding["attention_mask"].to(device),
                            token_type_ids=encoding["token_type_ids"].to(device), output_attentions=True)
            attentions = stack_attentions(out, model.config)
            del out  # the stack is a copy: free the per-layer maps before the caller works on it
            yield indices, encoding, attentions


def stack_attentions(out, config) -> Tensor:
    """The output's per-layer attentions as one (B, L, heads, T, T) float32 tensor on the CPU."""
    attentions = getattr(out, "attentions", None)
    if not attentions or any(a is None for a in attentions):
        raise ValueError(f"the model returned no attention probabilities ({type(out).__name__}.attentions is "
                         f"{attentions!r}). "
                         "Use a model whose forward honours output_attentions=True: a minibert model, or with "
                         "transformers one loaded with attn_implementation='eager'")
    if len(attentions) != config.num_hidden_layers or attentions[0].size(1) != config.num_attention_heads:
        raise ValueError(f"expected {config.num_hidden_layers} layers of (batch, {config.num_attention_heads} heads, "
                         f"T, T) attention, got {len(attentions)} of {tuple(attentions[0].shape)}")
    return torch.stack(attentions, dim=1).float().cpu()  # L x (B, nh, T, T) -> (B, L, nh, T, T)
