"""Which encoder `minibert pretrain` builds: BERT (Devlin et al. 2018), or ModernBERT (Warner et al. 2024) at
one of BERT's sizes.

The recipe is the same for both (text, tokenizer, masking, trainer, held-out score); only step 3, the model,
differs. ModernBERT pre-trains with MLM alone on packed sentences, as in the paper (its default here); with
``--objective nsp`` or ``sop`` it gets BERT's pair head too (`ModernBertForPreTraining`, minibert's own: the
paper and transformers have none). It has no learned positions, so the settings that only make sense for BERT
are refused here with their reason, rather than ignored. Its folder loads in transformers'
``AutoModelForMaskedLM`` (the masked LM; a pair head is left out there).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..config import ALBERT_PRESETS, MINIBERT_ONLY, PRESETS, read_json
from ..modernbert import ModernBertConfig, ModernBertForMaskedLM, ModernBertForPreTraining

if TYPE_CHECKING:
    from .pretrain import PretrainSettings

ARCHITECTURES = ("bert", "modernbert")


def check_architecture(s: PretrainSettings) -> None:
    """Refuse what the chosen architecture cannot do, naming the setting and what to give instead."""
    family = folder_architecture(s.init_from) if s.init_from else None
    if family is not None and family != s.architecture:
        raise ValueError(f"init_from={s.init_from!r} holds a {family} model and architecture is {s.architecture!r}: "
                         f"give --architecture {family} to go on pre-training it")
    if s.architecture == "bert":
        if s.local_attention is not None:
            raise ValueError(f"local_attention={s.local_attention!r} is ModernBERT's sliding window, and BERT attends "
                             "globally: add --architecture modernbert, or leave it out")
        return
    refusals = [
        (s.preset in ALBERT_PRESETS, f"preset={s.preset!r} is ALBERT's: a ModernBERT takes one of BERT's sizes "
                                     f"({', '.join(PRESETS)})"),
        (s.pre_layer_norm, "pre_layer_norm: ModernBERT's layers are pre-LN already; leave it out"),
        (s.extend_from is not None or s.random_positions is not None,
         "extend_from and random_positions train learned position vectors, and ModernBERT has none (RoPE turns "
         "queries and keys by their positions instead): leave them out"),
        (s.local_attention is not None and (not isinstance(s.local_attention, int) or isinstance(s.local_attention, bool)
                                            or s.local_attention < 2),
         f"local_attention must be a window of at least 2 tokens, got {s.local_attention!r}")]
    for wrong, message in refusals:
        if wrong:
            raise ValueError(message)


def folder_architecture(model: str) -> str | None:
    """"bert" or "modernbert" for a model folder (int8 ones included), by its config.json; None for a Hub id,
    whose loader says what it is."""
    config = Path(model) / "config.json"
    if not config.is_file():
        return None
    data = read_json(config, "config")
    modern = data.get("model_type") == "modernbert" or (data.get("model_type") == MINIBERT_ONLY and "local_attention" in data)
    return "modernbert" if modern else "bert"


def new_modernbert(s: PretrainSettings, tokenizer, **config) -> ModernBertForMaskedLM:
    """Step 3 for ModernBERT: a new one at the preset's size (`ModernBertConfig.from_preset`) with this vocabulary
    and its special tokens, or ``init_from``'s (a pair head it lacks starts fresh); the masked LM alone, or with
    the pair head for NSP or SOP; the run's dropout on embeddings, attention and feed-forward."""
    model_class = ModernBertForMaskedLM if s.objective == "none" else ModernBertForPreTraining
    dropout = dict(embedding_dropout=s.dropout, attention_dropout=s.dropout, mlp_dropout=s.dropout)
    window = {} if s.local_attention is None else dict(local_attention=s.local_attention)
    if s.init_from:  # its own window unless one is given
        model = model_class.from_pretrained(s.init_from, **dropout, **window).train()
        if s.max_seq_len > model.config.max_position_embeddings:
            raise ValueError(f"max_seq_len={s.max_seq_len} is longer than the {model.config.max_position_embeddings} "
                             f"positions {s.init_from} was made for")
        return model
    special = dict(pad_token_id=tokenizer.pad_token_id, cls_token_id=tokenizer.cls_token_id,
                   bos_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                   eos_token_id=tokenizer.sep_token_id)
    return model_class(ModernBertConfig.from_preset(
        s.preset, **{**dict(vocab_size=tokenizer.vocab_size, max_position_embeddings=max(512, s.max_seq_len)),
                     **special, **dropout, **window, **config}))
