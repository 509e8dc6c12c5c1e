"""Reading and writing checkpoints in the Hugging Face layout: ``config.json`` + ``model.safetensors``.

Parameter names are the same as in transformers, so a checkpoint moves between the two libraries
as it is. Weights are read with safetensors (no code runs on load); an old ``pytorch_model.bin`` is
read with ``torch.load(weights_only=True)``, which refuses anything but tensors. A Hub id goes
through the ordinary Hub cache (``HF_HOME``), so a pre-filled cache works offline.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from . import int8
from .atomic import atomic_path
from .config import BertConfig

logger = logging.getLogger("minibert")

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
BASE_MODULES = ("embeddings.", "encoder.", "pooler.")


def resolve_checkpoint(name_or_path: str | os.PathLike) -> tuple[Path, Path]:
    """(config.json, weights file) of a local directory or a Hub model id."""
    path = Path(name_or_path)
    if path.is_dir():
        weights = next((path / f for f in WEIGHT_FILES if (path / f).exists()), None)
        if not (path / "config.json").exists() or weights is None:
            raise FileNotFoundError(f"{path} is not a checkpoint directory: it needs config.json and one of "
                                    f"{', '.join(WEIGHT_FILES)} (what save_pretrained writes)")
        return path / "config.json", weights
    if path.exists() or str(name_or_path).startswith((".", "/", "~")) or str(name_or_path).count("/") > 1:
        raise FileNotFoundError(f"{name_or_path!r} is not a checkpoint directory; give a directory written "
                                "by save_pretrained or a model id on the Hugging Face Hub such as 'bert-base-uncased'")
    return _download(str(name_or_path))


def _download(model_id: str) -> tuple[Path, Path]:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (EntryNotFoundError, LocalEntryNotFoundError,
                                        RepositoryNotFoundError)
    try:
        config = Path(hf_hub_download(model_id, "config.json"))
    except RepositoryNotFoundError:
        raise OSError(f"{model_id!r} is neither a local directory nor a model id on the Hugging Face Hub; "
                      "check the spelling (e.g. 'bert-base-uncased', 'google/bert_uncased_L-2_H-128_A-2')") from None
    except LocalEntryNotFoundError:
        raise OSError(f"{model_id!r} is not in the local Hugging Face cache (HF_HOME="
                      f"{os.environ.get('HF_HOME', '~/.cache/huggingface')}) and the Hub cannot be reached"
                      f"{' (HF_HUB_OFFLINE is set)' if os.environ.get('HF_HUB_OFFLINE') else ''}; connect once "
                      "to download it, or point HF_HOME at a cache that holds it") from None
    for filename in WEIGHT_FILES:
        try:
            return config, Path(hf_hub_download(model_id, filename))
        except (EntryNotFoundError, LocalEntryNotFoundError):
            continue
    raise OSError(f"{model_id!r} has a config.json but none of {', '.join(WEIGHT_FILES)} could be found "
                  "(not on the Hub, or not in the offline cache)")


def load_state_dict(weights: Path) -> dict[str, torch.Tensor]:
    if weights.name.endswith(".index.json"):  # a sharded checkpoint: the index maps names to shard files
        shards = sorted(set(json.loads(weights.read_text())["weight_map"].values()))
        if not all((weights.parent / s).exists() for s in shards):
            raise FileNotFoundError(f"{weights} lists shards {shards} that are not all beside it")
        state = {k: v for s in shards for k, v in load_file(weights.parent / s).items()}
    elif weights.suffix == ".safetensors":
        state = load_file(weights)
    else:
        state = torch.load(weights, map_location="cpu", weights_only=True)
    return int8.dequantize(state) if int8.is_quantized(state) else state


def normalize_keys(state: dict[str, torch.Tensor], has_prefix: bool) -> dict[str, torch.Tensor]:
    """Map a checkpoint's names onto this model's: old TF-era LayerNorm names, and the ``bert.`` prefix
    that task models have and a bare BertModel has not."""
    out = {}
    for key, value in state.items():
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        if has_prefix and key.startswith(BASE_MODULES):
            key = "bert." + key
        elif not has_prefix and key.startswith("bert."):
            key = key.removeprefix("bert.")
        out[key] = value
    return out


def tied_aliases(model: torch.nn.Module) -> dict[str, str]:
    """Names that are a second name of a tensor already listed (the tied MLM decoder): name -> first name."""
    seen, aliases = {}, {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        if tensor.data_ptr() in seen:
            aliases[name] = seen[tensor.data_ptr()]
        else:
            seen[tensor.data_ptr()] = name
    return aliases


class PretrainedMixin:
    """``from_pretrained`` / ``save_pretrained`` for BertModel and the task models."""

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, config: BertConfig | None = None,
                        dtype: torch.dtype | None = None, **config_overrides):
        """Load a checkpoint; a head the checkpoint lacks is freshly initialised and reported.

        ``config_overrides`` change the stored config, e.g. ``num_labels=3`` for a new classifier.
        """
        config_file, weights = resolve_checkpoint(name_or_path)
        config = (config or BertConfig.load(config_file)).replace(**config_overrides)
        model = cls(config)
        has_prefix = hasattr(model, "bert")
        state = normalize_keys(load_state_dict(weights), has_prefix)
        if "cls.predictions.decoder.bias" in state:  # transformers' second name for cls.predictions.bias
            state.setdefault("cls.predictions.bias", state.pop("cls.predictions.decoder.bias"))
        expected = model.state_dict()
        aliases = tied_aliases(model)

        mismatched = [f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(expected[k].shape)}"
                      for k, v in state.items() if k in expected and v.shape != expected[k].shape]
        missing = [k for k in expected if k not in state and k not in aliases]
        in_base = lambda k: (k.startswith("bert.") or not has_prefix) and ".pooler." not in f".{k}"
        missing_base = [k for k in missing if in_base(k)]
        if mismatched or missing_base:
            problems = [f"shape mismatch {m}" for m in mismatched] + [f"missing {k}" for k in missing_base]
            raise ValueError(f"{name_or_path} does not fit {cls.__name__} with this config:\n  "
                             + "\n  ".join(problems)
                             + "\nIs it a BERT checkpoint of this size? (config_overrides change sizes too)")
        unexpected = [k for k in state if k not in expected and k != "embeddings.position_ids"
                      and not k.endswith(".position_ids")]
        model.load_state_dict({k: v for k, v in state.items() if k in expected}, strict=False)
        model.tie_weights()
        if missing:
            logger.warning("%s: newly initialised from scratch (not in %s): %s. Train this model on a "
                           "task before using its predictions.", cls.__name__, name_or_path, ", ".join(missing))
        if unexpected:
            logger.warning("%s: checkpoint weights not used by this model (expected when the checkpoint has "
                           "heads this model lacks): %s", cls.__name__, ", ".join(unexpected))
        model.loading_info = {"missing_keys": missing, "unexpected_keys": unexpected}
        if dtype is not None:
            model.to(dtype)
        return model.eval()

    def save_pretrained(self, directory: str | os.PathLike, int8_weights: bool = False) -> Path:
        """Write config.json + model.safetensors; each file appears whole or not at all.

        ``int8_weights``: store the matrices as int8 rows with a scale each (a quarter of fp32's size;
        only minibert reads it back, see ``minibert.int8``).
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        aliases = tied_aliases(self)
        state = {k: v.detach().contiguous() for k, v in self.state_dict().items() if k not in aliases}
        if int8_weights:
            state = int8.quantize(state)
        config = {**self.config.to_dict(), "architectures": [type(self).__name__]}
        with atomic_path(directory / "model.safetensors") as tmp:
            save_file(state, tmp, metadata={"format": "pt"})
        with atomic_path(directory / "config.json") as tmp:
            tmp.write_text(json.dumps(config, indent=2) + "\n")
        return directory

