"""BertConfig: the sizes of a BERT as plain data, with the named presets of the papers.

Field names are the ones in a Hugging Face ``config.json`` so that a checkpoint's config loads
unchanged and a minibert config is readable by transformers.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import torch.nn.functional as F

from .user_files import regular_file

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

# ALBERT (Lan et al. 2019, Table 1): BERT's shapes with a factorised embedding (E = 128), one set of
# layer weights shared by every layer, and a 30,000-piece vocabulary. xxlarge has 64 heads of 64.
ALBERT_PRESETS: dict[str, tuple[int, int, int]] = {
    "albert-base": (12, 768, 12),
    "albert-large": (24, 1024, 16),
    "albert-xlarge": (24, 2048, 16),
    "albert-xxlarge": (12, 4096, 64),
}
ALBERT_SIZES = dict(vocab_size=30000, embedding_size=128, share_layers=True)

# Fields transformers' BERT lacks or treats otherwise (it could load such a model wrongly, silently): a config
# that uses one is written with this model_type, which transformers refuses, as are int8 weights (hub.py).
MINIBERT_FIELDS = ("embedding_size", "share_layers", "pruned_heads", "pre_layer_norm")
MINIBERT_ONLY = "minibert"
MAX_PARAMETERS = 20_000_000_000  # a typo (an extra zero or three) in a config, not a model anyone trains here
MAX_LAYERS = 1_000               # BERT-large has 24; a million small layers would take minutes to build, then fail


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
    # ALBERT's two parameter savings; the defaults are BERT. embedding_size E < H factorises the
    # V × H embedding into V × E + E × H; share_layers runs one layer's weights num_hidden_layers times.
    embedding_size: int | None = None
    share_layers: bool = False
    # Heads removed by pruning, {layer: [head, ...]}; the model is built without them. (The field of
    # transformers 4; transformers 5 dropped pruning, so pruned checkpoints load in minibert only.)
    pruned_heads: dict[int, list[int]] = field(default_factory=dict)
    # Pre-LN (Xiong et al. 2020; GPT-2, Cramming): each sub-layer reads LayerNorm(x) and adds its output to x
    # unnormalised, and one LayerNorm closes the stack. The gradient reaches every layer undamped, so
    # a small model takes a higher learning rate with less warmup. BERT itself is post-LN (False).
    pre_layer_norm: bool = False
    # A left-to-right model (OpenAI GPT's attention, BERT's Figure 3): each position attends to itself and
    # the positions before it only. The Hugging Face name, so transformers' BertLMHeadModel reads it alike.
    is_decoder: bool = False
    # A task head's class names by output index, {0: "negative", 1: "positive"}: stored with label2id in
    # config.json, so transformers' pipelines (and minibert's) say POSITIVE rather than LABEL_1.
    id2label: dict[int, str] | None = None

    def __post_init__(self):
        self.validate()

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def embedding_dim(self) -> int:
        """E: the width of the token embeddings (H in BERT, 128 in ALBERT)."""
        return self.embedding_size or self.hidden_size

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
        for name in ["hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"]:
            p = getattr(self, name)
            if name == "classifier_dropout" and p is None:
                continue
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
                raise ValueError(f"BertConfig.{name} must be a number in [0, 1), got {p!r}")
        for name in ["share_layers", "pre_layer_norm", "is_decoder"]:  # "yes" or 1 in a JSON file is not a choice
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"BertConfig.{name} must be true or false, got {getattr(self, name)!r}")
        r = self.initializer_range
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 < r < 1:
            raise ValueError(f"BertConfig.initializer_range must be a small positive number (BERT: 0.02), got {r!r}")
        eps = self.layer_norm_eps
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
            raise ValueError(f"BertConfig.layer_norm_eps must be a small positive number (BERT: 1e-12), got {eps!r}: "
                             "LayerNorm divides by sqrt(variance + eps), which is NaN for a negative eps")
        if self.hidden_act not in ACT2FN:
            raise ValueError(f"hidden_act {self.hidden_act!r} is not supported; use one of {sorted(ACT2FN)}")
        if self.embedding_size is not None and (not isinstance(self.embedding_size, int) or self.embedding_size < 1):
            raise ValueError(f"BertConfig.embedding_size must be a positive integer or None (= hidden_size), "
                             f"got {self.embedding_size!r}")
        self.pruned_heads = {int(layer): sorted({int(h) for h in heads}) for layer, heads in self.pruned_heads.items()}
        for layer, heads in self.pruned_heads.items():
            if not 0 <= layer < self.num_hidden_layers or not all(0 <= h < self.num_attention_heads for h in heads):
                raise ValueError(f"pruned_heads {{{layer}: {heads}}} names a layer or head that does not exist "
                                 f"({self.num_hidden_layers} layers of {self.num_attention_heads} heads)")
            if len(heads) == self.num_attention_heads:
                raise ValueError(f"pruned_heads would remove every head of layer {layer}; keep at least one")
        if self.pruned_heads and self.share_layers:
            raise ValueError("pruned_heads and share_layers do not go together: shared layers share their heads")
        if isinstance(self.pad_token_id, bool) or not isinstance(self.pad_token_id, int) or \
                not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"pad_token_id {self.pad_token_id!r} is outside the vocabulary (size {self.vocab_size})")
        self.check_labels()
        if self.num_hidden_layers > MAX_LAYERS:
            raise ValueError(f"num_hidden_layers {self.num_hidden_layers:,} is more than {MAX_LAYERS:,} (BERT-base has 12, "
                             "BERT-large 24): a typo in the config, which would take minutes to build; check it")
        weights = self.approximate_parameters()
        if weights > MAX_PARAMETERS:
            raise ValueError(f"this config describes about {weights / 1e9:,.0f} billion parameters ({weights * 4 / 2**30:,.0f} "
                             f"GiB in fp32; BERT-large has 0.34): check vocab_size ({self.vocab_size}), hidden_size "
                             f"({self.hidden_size}), intermediate_size ({self.intermediate_size}) and num_hidden_layers "
                             f"({self.num_hidden_layers})")

    def approximate_parameters(self) -> int:
        """The parameter count, from the sizes alone (the embeddings and every layer's weight matrices)."""
        E, H, I = self.embedding_dim, self.hidden_size, self.intermediate_size  # noqa: E741 (the paper's letters)
        layers = 1 if self.share_layers else self.num_hidden_layers
        embeddings = (self.vocab_size + self.max_position_embeddings + self.type_vocab_size) * E + E * H
        return embeddings + layers * (4 * H * H + 2 * H * I)

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "BertConfig":
        """A named size from the papers, e.g. ``BertConfig.from_preset("bert-tiny", vocab_size=8000)``
        or ``BertConfig.from_preset("albert-base")``."""
        key = name.lower().removeprefix("google/")
        if key not in PRESETS and key not in ALBERT_PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {', '.join([*PRESETS, *ALBERT_PRESETS])}")
        layers, hidden, heads = PRESETS.get(key) or ALBERT_PRESETS[key]
        sizes = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                     intermediate_size=4 * hidden, **(ALBERT_SIZES if key in ALBERT_PRESETS else {}))
        return cls(**{**sizes, **overrides})

    def check_labels(self) -> None:
        self.id2label = checked_labels(self.id2label, self.num_labels, "BertConfig")

    def replace(self, **changes) -> "BertConfig":
        """A copy with ``changes``; a new ``num_labels`` without new names drops the old head's names."""
        if "num_labels" in changes and "id2label" not in changes and changes["num_labels"] != self.num_labels:
            changes["id2label"] = None
        return replace(self, **changes)

    # --- the Hugging Face config.json -------------------------------------------------------
    def to_dict(self) -> dict:
        """A BERT's config.json. ALBERT's fields, pruned heads and pre-LN appear only when used, and then with
        ``model_type`` "minibert": transformers' BertModel would build such a model wrong and say nothing,
        so it must refuse it. The causal mask (``is_decoder``) is transformers' own field, written when set;
        a plain BERT's file stays exactly what it reads."""
        data = asdict(self)
        for name in (*MINIBERT_FIELDS, "is_decoder"):
            if not data[name]:
                del data[name]
        if self.pruned_heads:
            data["pruned_heads"] = {str(layer): heads for layer, heads in self.pruned_heads.items()}
        del data["id2label"]
        if self.id2label:  # transformers' two fields, written as it writes them
            data["id2label"] = {str(i): name for i, name in sorted(self.id2label.items())}
            data["label2id"] = {name: i for i, name in sorted(self.id2label.items())}
        extras = [name for name in MINIBERT_FIELDS if name in data]
        return {"model_type": MINIBERT_ONLY if extras else "bert", "architectures": ["BertModel"], **data}

    @classmethod
    def from_dict(cls, data: dict) -> "BertConfig":
        """Keep the fields minibert knows; a Hub config carries many more (id2label, torch_dtype...)."""
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        if isinstance(data.get("id2label"), dict) and "num_labels" not in data:
            kwargs["num_labels"] = len(data["id2label"])
        if data.get("model_type") == "modernbert" or "local_attention" in data:  # the int8 one says "minibert"
            raise ValueError(f"config has model_type {data.get('model_type')!r}: the folder holds a ModernBERT, not a BERT; "
                             "load it with minibert.ModernBertForMaskedLM, ModernBertModel or ModernBertConfig")
        if data.get("model_type", "bert") not in ("bert", MINIBERT_ONLY):
            raise ValueError(f"config has model_type {data['model_type']!r}; minibert reads BERT checkpoints only")
        if data.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("minibert supports absolute position embeddings only "
                             f"(config has {data['position_embedding_type']!r})")
        return cls(**kwargs)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "BertConfig":
        return cls.from_dict(read_json(Path(path), "config"))


def checked_labels(id2label, num_labels: int, owner: str) -> dict[int, str] | None:
    """A task head's class names, ``{0: "negative", 1: "positive"}``, with JSON's string keys made indices;
    a map that does not name each of the ``num_labels`` outputs once is refused (``owner``: the config class)."""
    if id2label is None:
        return None
    if not isinstance(id2label, dict) or not all(isinstance(v, str) and v for v in id2label.values()):
        raise ValueError(f"{owner}.id2label must map output indices to class names, got {id2label!r}")
    try:
        id2label = {int(i): name for i, name in id2label.items()}  # JSON's keys are strings
    except (TypeError, ValueError):
        raise ValueError(f"{owner}.id2label's keys must be output indices 0, 1, ..., got {list(id2label)}") from None
    if sorted(id2label) != list(range(num_labels)) or len(set(id2label.values())) < num_labels:
        raise ValueError(f"{owner}.id2label must name each of the num_labels={num_labels} outputs 0.."
                         f"{num_labels - 1} once, with different names; got {id2label}")
    return id2label


def read_json(path: Path, what: str = "file", expect: type = dict):
    """The JSON value in ``path``, an ``expect`` (an object unless told otherwise); a broken file is an error
    that names it and says what to do."""
    try:
        data = json.loads(regular_file(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}): the {what} is "
                         "damaged or was cut off; restore it, or save or download the model again") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text: the {what} is damaged; save or download it again") from None
    if not isinstance(data, expect):
        raise ValueError(f"{path} holds a JSON {type(data).__name__}, not the {expect.__name__} a {what} is; "
                         "restore it")
    return data



# The activations of the BERT family by their config.json names, the one table the feed-forward
# network and the MLM head look ``hidden_act`` up in. "gelu" is the exact erf GELU of the original
# BERT; "gelu_new" and "gelu_pytorch_tanh" are GPT-2's tanh approximation under its two names.
ACT2FN = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}
