"""BertConfig: the sizes of a BERT as plain data, with the named presets of the papers.

Field names are the ones in a Hugging Face ``config.json`` so that a checkpoint's config loads
unchanged and a minibert config is readable by transformers.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

# (layers L, hidden H, heads A). BASE and LARGE are from Devlin et al. 2018; the small ones from
# Turc et al. 2019 ("Well-Read Students Learn Better"), which keep H/A = 64 and FFN = 4H.
PRESETS: dict[str, tuple[int, int, int]] = {
    "bert-tiny": (2, 128, 2),
    "bert-mini": (4, 256, 4),
    "bert-small": (4, 512, 8),
    "bert-medium": (8, 512, 8),
    "bert-base": (12, 768, 12),
    "bert-large": (24, 1024, 16),
}


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    num_labels: int = 2
    classifier_dropout: float | None = None

    def __post_init__(self):
        self.validate()

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def validate(self) -> None:
        """Fail early, with the fix in the message, instead of a shape error deep in a matmul."""
        positive = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size", "max_position_embeddings", "type_vocab_size", "num_labels"]
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"BertConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) is not divisible by num_attention_heads "
                f"({self.num_attention_heads}): each head gets hidden_size / heads dimensions, so "
                f"choose heads among {[a for a in range(1, 33) if self.hidden_size % a == 0]}")
        for name in ["hidden_dropout_prob", "attention_probs_dropout_prob"]:
            p = getattr(self, name)
            if not 0.0 <= p < 1.0:
                raise ValueError(f"BertConfig.{name} must be in [0, 1), got {p}")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act {self.hidden_act!r} is not supported; use one of {sorted(ACTIVATIONS)}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"pad_token_id {self.pad_token_id} is outside the vocabulary (size {self.vocab_size})")

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "BertConfig":
        """A named size from the papers, e.g. ``BertConfig.from_preset("bert-tiny", vocab_size=8000)``."""
        key = name.lower().removeprefix("google/")
        if key not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        layers, hidden, heads = PRESETS[key]
        sizes = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                     intermediate_size=4 * hidden)
        return cls(**{**sizes, **overrides})

    def replace(self, **changes) -> "BertConfig":
        return replace(self, **changes)

    # --- the Hugging Face config.json -------------------------------------------------------
    def to_dict(self) -> dict:
        return {"model_type": "bert", "architectures": ["BertModel"], **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict) -> "BertConfig":
        """Keep the fields minibert knows; a Hub config carries many more (id2label, torch_dtype...)."""
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        if "id2label" in data and "num_labels" not in data:
            kwargs["num_labels"] = len(data["id2label"])
        if data.get("model_type", "bert") != "bert":
            raise ValueError(f"config has model_type {data['model_type']!r}; minibert reads BERT checkpoints only")
        if data.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("minibert supports absolute position embeddings only "
                             f"(config has {data['position_embedding_type']!r})")
        return cls(**kwargs)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "BertConfig":
        return cls.from_dict(json.loads(Path(path).read_text()))


# The activations of the BERT family, by their config.json names ("gelu" is the exact erf GELU
# that the original BERT uses; "gelu_new" the tanh approximation of GPT-2).
ACTIVATIONS = {"gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish"}
