"""ModernBERT's configuration: transformers' ``config.json`` keys, read and written both ways.

A config.json made by transformers 4.48+ (``global_attn_every_n_layers``, ``global_rope_theta``,
``local_rope_theta``) and one made by transformers 5 (``layer_types``, ``rope_parameters``) describe the same
model two ways; both are read, and both are written, so that a folder minibert saves loads in either. What the
two ways say, in the paper's words (Warner et al. 2024, §2.1):

* alternating attention: every ``global_attn_every_n_layers``-th layer (0, n, 2n, ...) attends globally, the
  others locally, within ``local_attention`` tokens (``local_attention // 2`` each side). transformers 5 spells
  this out per layer as ``layer_types``, "full_attention" or "sliding_attention", and follows that list when
  given (it may be any pattern); the every-n rule only fills it in when it is missing.
* RoPE with two bases: θ = ``global_rope_theta`` (160,000) in global layers, ``local_rope_theta`` (10,000) in
  local ones; in transformers 5, ``rope_parameters[layer type]["rope_theta"]``.
"""
from __future__ import annotations

import json
import numbers
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from ..config import ACT2FN, MAX_LAYERS, MAX_PARAMETERS, MINIBERT_ONLY, checked_labels, read_json
from ..config import PRESETS as BERT_PRESETS  # BERT's sizes, which a ModernBERT may take too

GLOBAL, LOCAL = "full_attention", "sliding_attention"  # transformers 5's names of the two layer types
MODEL_TYPE = "modernbert"

# (layers L, hidden H, heads A, GeGLU width I) of the released models, as their config.json files on the Hub say.
PRESETS: dict[str, tuple[int, int, int, int]] = {
    "modernbert-base": (22, 768, 12, 1152),
    "modernbert-large": (28, 1024, 16, 2624),
}


def every_nth_global(n: int, num_layers: int) -> list[str]:
    """The paper's pattern: layer i attends globally when i is a multiple of n (layer 0 always), else locally."""
    return [GLOBAL if i % n == 0 else LOCAL for i in range(num_layers)]


@dataclass
class ModernBertConfig:
    vocab_size: int = 50368
    hidden_size: int = 768
    intermediate_size: int = 1152       # I: the GeGLU's width; Wi projects to 2I (input and gate)
    num_hidden_layers: int = 22
    num_attention_heads: int = 12
    hidden_activation: str = "gelu"
    max_position_embeddings: int = 8192  # the length trained for; RoPE has no table, so this is a limit, not a size
    initializer_range: float = 0.02
    initializer_cutoff_factor: float = 2.0
    norm_eps: float = 1e-5
    norm_bias: bool = False
    pad_token_id: int | None = 50283
    bos_token_id: int | None = 50281
    eos_token_id: int | None = 50282
    cls_token_id: int | None = 50281
    sep_token_id: int | None = 50282
    attention_bias: bool = False
    attention_dropout: float = 0.0
    local_attention: int = 128           # the local window: a token sees local_attention // 2 tokens each side
    global_attn_every_n_layers: int = 3
    layer_types: list[str] | None = None  # None: every_nth_global(global_attn_every_n_layers)
    global_rope_theta: float = 160_000.0
    local_rope_theta: float = 10_000.0
    embedding_dropout: float = 0.0
    mlp_bias: bool = False
    mlp_dropout: float = 0.0
    decoder_bias: bool = True
    classifier_pooling: str = "cls"      # "cls": the first token's vector; "mean": the mean over real tokens
    classifier_dropout: float = 0.0
    classifier_bias: bool = False
    classifier_activation: str = "gelu"
    sparse_prediction: bool = False      # with labels, the MLM decoder runs at the masked positions only
    sparse_pred_ignore_index: int = -100
    tie_word_embeddings: bool = True     # the MLM decoder's weight is the token embedding matrix
    num_labels: int = 2
    id2label: dict[int, str] | None = None  # a task head's class names, as in BertConfig

    def __post_init__(self):
        if self.layer_types is None and _positive_int(self.num_hidden_layers) and \
                _positive_int(self.global_attn_every_n_layers):
            self.layer_types = every_nth_global(self.global_attn_every_n_layers, self.num_hidden_layers)
        self.validate()

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def rope_theta(self, layer_type: str) -> float:
        return self.global_rope_theta if layer_type == GLOBAL else self.local_rope_theta

    def validate(self) -> None:
        """Refuse a config that would build a wrong or broken model, naming the bad value and the fix."""
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                     "max_position_embeddings", "global_attn_every_n_layers", "num_labels"):
            if not _positive_int(getattr(self, name)):
                raise ValueError(f"ModernBertConfig.{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"ModernBertConfig.hidden_size ({self.hidden_size}) is not divisible by num_attention_heads "
                             f"({self.num_attention_heads}): each head gets hidden_size / heads dimensions; choose heads "
                             f"among {[a for a in range(1, 33) if self.hidden_size % a == 0]}")
        if self.head_dim % 2:
            raise ValueError(f"ModernBertConfig: the head size hidden_size / num_attention_heads = {self.head_dim} is odd; "
                             "RoPE turns dimensions in pairs, so it must be even")
        if not _positive_int(self.local_attention):  # odd is allowed: the window is local_attention // 2 each side
            raise ValueError(f"ModernBertConfig.local_attention must be a positive number of tokens (the window: "
                             f"local_attention // 2 tokens each side of a token, and the token), got {self.local_attention!r}")
        if not isinstance(self.layer_types, list) or len(self.layer_types) != self.num_hidden_layers \
                or not set(self.layer_types) <= {GLOBAL, LOCAL}:
            raise ValueError(f"ModernBertConfig.layer_types must list {GLOBAL!r} or {LOCAL!r} for each of the "
                             f"num_hidden_layers={self.num_hidden_layers} layers, got {self.layer_types!r} (give "
                             "layer_types=None to derive it from global_attn_every_n_layers)")
        for name in ("global_rope_theta", "local_rope_theta", "norm_eps", "initializer_range", "initializer_cutoff_factor"):
            value = getattr(self, name)
            if not _number(value) or value <= 0:
                raise ValueError(f"ModernBertConfig.{name} must be a positive number, got {value!r}")
        for name in ("attention_dropout", "embedding_dropout", "mlp_dropout", "classifier_dropout"):
            p = getattr(self, name)
            if not _number(p) or not 0.0 <= p < 1.0:
                raise ValueError(f"ModernBertConfig.{name} must be a number in [0, 1), got {p!r}")
        for name in ("norm_bias", "attention_bias", "mlp_bias", "decoder_bias", "classifier_bias", "sparse_prediction",
                     "tie_word_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"ModernBertConfig.{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("hidden_activation", "classifier_activation"):
            if getattr(self, name) not in ACT2FN:
                raise ValueError(f"ModernBertConfig.{name} {getattr(self, name)!r} is not supported; use one of "
                                 f"{sorted(ACT2FN)}")
        if self.classifier_pooling not in ("cls", "mean"):
            raise ValueError(f"ModernBertConfig.classifier_pooling must be 'cls' or 'mean', got {self.classifier_pooling!r}")
        if self.pad_token_id is not None and (not _int(self.pad_token_id) or not 0 <= self.pad_token_id < self.vocab_size):
            raise ValueError(f"ModernBertConfig.pad_token_id {self.pad_token_id!r} is outside the vocabulary "
                             f"(size {self.vocab_size})")
        if not _int(self.sparse_pred_ignore_index):
            raise ValueError(f"ModernBertConfig.sparse_pred_ignore_index must be an integer, got "
                             f"{self.sparse_pred_ignore_index!r}")
        self.id2label = checked_labels(self.id2label, self.num_labels, "ModernBertConfig")
        if self.num_hidden_layers > MAX_LAYERS:
            raise ValueError(f"ModernBertConfig.num_hidden_layers {self.num_hidden_layers:,} is more than {MAX_LAYERS:,} "
                             "(ModernBERT-large has 28): a typo in the config; check it")
        if self.approximate_parameters() > MAX_PARAMETERS:
            raise ValueError(f"this config describes about {self.approximate_parameters() / 1e9:,.0f} billion parameters "
                             f"(ModernBERT-large has 0.4): check vocab_size ({self.vocab_size}), hidden_size "
                             f"({self.hidden_size}) and intermediate_size ({self.intermediate_size})")

    def approximate_parameters(self) -> int:
        """The embeddings and each layer's matrices: Wqkv and Wo (4 H²), Wi and Wo of the GeGLU (3 H I)."""
        H, I = self.hidden_size, self.intermediate_size  # noqa: E741 (the paper's letters)
        return self.vocab_size * H + self.num_hidden_layers * (4 * H * H + 3 * H * I)

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "ModernBertConfig":
        """A released size, e.g. ``ModernBertConfig.from_preset("answerdotai/ModernBERT-base")``, or one of BERT's
        sizes (``"bert-mini"``: its layers, width and heads) with a GeGLU of BERT's feed-forward parameters: BERT's
        two H × 4H matrices hold 8H², the GeGLU's H × 2I and I × H hold 3HI, so I = 8H/3. A grid that sets
        2018 against 2024 at one size, or a course model, then compares designs, not sizes."""
        key = name.lower().removeprefix("answerdotai/")
        if key in PRESETS:
            layers, hidden, heads, intermediate = PRESETS[key]
        elif key in BERT_PRESETS:
            layers, hidden, heads = BERT_PRESETS[key]
            intermediate = round(8 * hidden / 3)
        else:
            raise ValueError(f"unknown preset {name!r}; choose one of {', '.join([*PRESETS, *BERT_PRESETS])}")
        return cls(**{**dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                             intermediate_size=intermediate), **overrides})

    def replace(self, **changes) -> "ModernBertConfig":
        """A copy with ``changes``; a new ``num_labels`` without new names drops the old head's names, and a new
        depth (or n) re-derives layer types that follow the every-n rule (other patterns must be given anew)."""
        if "num_labels" in changes and "id2label" not in changes and changes["num_labels"] != self.num_labels:
            changes["id2label"] = None
        if {"num_hidden_layers", "global_attn_every_n_layers"} & changes.keys() and "layer_types" not in changes \
                and self.layer_types == every_nth_global(self.global_attn_every_n_layers, self.num_hidden_layers):
            changes["layer_types"] = None
        return replace(self, **changes)

    # --- the Hugging Face config.json -------------------------------------------------------
    def to_dict(self) -> dict:
        """config.json in transformers 5's keys (``layer_types``, ``rope_parameters``), plus the older keys that
        transformers 4.x reads (``global_rope_theta``, ``local_rope_theta``, and ``global_attn_every_n_layers``
        when the layer types follow it; transformers 5 takes ``layer_types`` over it)."""
        data = asdict(self)
        assert self.layer_types is not None  # filled in by __post_init__
        if self.layer_types != every_nth_global(self.global_attn_every_n_layers, self.num_hidden_layers):
            del data["global_attn_every_n_layers"]  # no n describes these layers: only layer_types may speak
        data["rope_parameters"] = {GLOBAL: {"rope_theta": self.global_rope_theta, "rope_type": "default"},
                                   LOCAL: {"rope_theta": self.local_rope_theta, "rope_type": "default"}}
        del data["id2label"]
        if self.id2label:  # transformers' two fields, written as it writes them
            data["id2label"] = {str(i): name for i, name in sorted(self.id2label.items())}
            data["label2id"] = {name: i for i, name in sorted(self.id2label.items())}
        return {"model_type": MODEL_TYPE, "architectures": ["ModernBertModel"], **data}

    @classmethod
    def from_dict(cls, data: dict) -> "ModernBertConfig":
        """Keep the fields minibert knows (a Hub config carries more: dtype, transformers_version...); refuse
        a BERT's config, and RoPE variants (scaled, YaRN...) that this model does not compute."""
        model_type = data.get("model_type")
        int8_modernbert = model_type == MINIBERT_ONLY and "local_attention" in data  # save_pretrained(int8_weights=True)
        if model_type != MODEL_TYPE and not int8_modernbert:
            hint = ("a BERT: load it with minibert.BertForMaskedLM, BertModel or BertConfig"
                    if model_type in (None, "bert", MINIBERT_ONLY) else "another architecture, which minibert does not read")
            raise ValueError(f"config has model_type {model_type!r}, not {MODEL_TYPE!r}: the folder holds {hint}")
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        if isinstance(data.get("id2label"), dict) and "num_labels" not in data:
            kwargs["num_labels"] = len(data["id2label"])
        if data.get("rope_scaling"):
            raise ValueError(f"config has rope_scaling {data['rope_scaling']!r}; minibert's ModernBERT computes plain "
                             "RoPE only")
        rope = data.get("rope_parameters") or {}
        if not isinstance(rope, dict):
            raise ValueError(f"config's rope_parameters must map layer types to RoPE settings, got {rope!r}")
        for layer_type, name in ((GLOBAL, "global_rope_theta"), (LOCAL, "local_rope_theta")):
            params = rope.get(layer_type) or {}
            if params.get("rope_type", "default") != "default":
                raise ValueError(f"config's rope_parameters[{layer_type!r}] has rope_type {params['rope_type']!r}; "
                                 "minibert's ModernBERT computes plain RoPE ('default') only")
            if "rope_theta" in params:  # transformers 5 reads rope_parameters first, the old keys only without it
                kwargs[name] = params["rope_theta"]
        return cls(**kwargs)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "ModernBertConfig":
        return cls.from_dict(read_json(Path(path), "config"))


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON's true is not 1 layer


def _positive_int(value) -> bool:
    return _int(value) and value >= 1


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
