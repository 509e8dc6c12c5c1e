"""The Hugging Face layout: finding a checkpoint or tokenizer, reading and writing weights, int8 storage.

Parameter names are the same as in transformers, so a checkpoint moves between the two libraries
as it is: ``config.json`` + ``model.safetensors``. Weights are read with safetensors (no code runs
on load); an old ``pytorch_model.bin`` is read with ``torch.load(weights_only=True)``, which refuses
anything but tensors. `resolve` finds the files of a local folder or of a Hub model id, the one
way weights and tokenizers are found; a Hub id goes through the ordinary Hub cache (``HF_HOME``),
so a pre-filled cache works offline.
"""
from __future__ import annotations

import json
import logging
import os
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from .atomic import atomic_path
from .config import MINIBERT_ONLY, BertConfig, read_json
from .user_files import regular_file

logger = logging.getLogger("minibert")

INT8_WEIGHTS = "model.int8.safetensors"  # a name transformers never looks for: it refuses the folder
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", INT8_WEIGHTS)
BASE_MODULES = ("embeddings.", "encoder.", "pooler.")


def resolve(name_or_path: str | os.PathLike, needs: list[tuple[str, ...]], optional: tuple[str, ...] = (),
            what: str = "checkpoint") -> dict[str, Path]:
    """Local paths of the files of a checkpoint or tokenizer, from a folder or a Hub model id.

    ``needs`` lists groups of alternatives: of each, the first file there is taken, and one must
    be (``[("config.json",), WEIGHT_FILES]``); ``optional`` files are taken when there. Returns
    {file name: path}. The errors name the mistake: a folder without the files, a Hub id that is
    not in the cache while the Hub is out of reach, a name that is neither a folder nor a Hub id,
    a Hub id that does not exist (a typo).
    """
    name = str(name_or_path)
    folder = Path(name).expanduser()
    wanted = " and ".join(group[0] if len(group) == 1 else "one of " + ", ".join(group) for group in needs)
    hub = None
    if not folder.is_dir():
        if folder.exists() or name.startswith((".", "/", "~")) or name.count("/") > 1:
            raise FileNotFoundError(_not_a_folder(name, what))
        hub = _HubCache(name, what)
    found = {}
    for group in [*needs, *((filename,) for filename in optional)]:
        for filename in group:
            path = folder / filename if hub is None else hub(filename)
            if path is not None and regular_file(path).is_file():  # a FIFO or a device: refused, not read
                found[filename] = path
                break
    missing = [group for group in needs if not found.keys() & set(group)]
    if not missing:
        return found
    if hub is None:
        raise FileNotFoundError(f"{folder} is not a {what} directory: it needs {wanted} (what save_pretrained writes)")
    if not found and hub.cache_only:
        raise OSError(f"{name!r} is not in the local Hugging Face cache (HF_HOME="
                      f"{os.environ.get('HF_HOME', '~/.cache/huggingface')}) and the Hub cannot be reached"
                      f"{' (HF_HUB_OFFLINE is set)' if hub.offline else ''}; connect once to download it, "
                      "or point HF_HOME at a cache that holds it")
    lacking = " and ".join(" or ".join(group) for group in missing)
    raise OSError(f"{name!r} on the Hugging Face Hub has no {lacking}"
                  f"{' (or the local cache lacks it and the Hub cannot be reached)' if hub.cache_only else ''}; "
                  f"a {what} needs {wanted}")


def _not_a_folder(name: str, what: str) -> str:
    return (f"{name!r} is not a {what} directory, nor a model id on the Hugging Face Hub; give a directory "
            "written by save_pretrained or a Hub id such as 'bert-base-uncased'")


class _HubCache:
    """One Hub model's files through the Hugging Face cache: ``self(filename)`` is its local path,
    downloaded if need be, or None. After one miss with the Hub out of reach only the cache is asked,
    so a missing network costs one timeout, not one per file."""

    def __init__(self, model_id: str, what: str):
        from huggingface_hub import constants
        self.model_id, self.what = model_id, what
        self.offline = self.cache_only = constants.HF_HUB_OFFLINE

    def __call__(self, filename: str) -> Path | None:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import (
            EntryNotFoundError,
            HFValidationError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
        )
        try:
            return Path(hf_hub_download(self.model_id, filename, local_files_only=self.cache_only))
        except LocalEntryNotFoundError:  # not in the cache, and the Hub out of reach or not to be asked
            self.cache_only = True
        except EntryNotFoundError:  # the model has no such file
            pass
        except HFValidationError:
            raise FileNotFoundError(_not_a_folder(self.model_id, self.what)) from None
        except RepositoryNotFoundError:
            raise OSError(f"there is no model {self.model_id!r} on the Hugging Face Hub; check the spelling "
                          "(e.g. 'bert-base-uncased', 'google/bert_uncased_L-2_H-128_A-2'); a private or gated "
                          "model needs `hf auth login`") from None
        return None


def _safetensors(path: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(regular_file(path))
    except SafetensorError as e:
        raise ValueError(f"{path} is not a readable safetensors file ({e}); it is empty, cut off or damaged: "
                         "save, export or download the model again") from None


def load_state_dict(weights: Path) -> dict[str, torch.Tensor]:
    if weights.name.endswith(".index.json"):  # a sharded checkpoint: the index maps names to shard files
        index = read_json(weights, "shard index")
        if not isinstance(index.get("weight_map"), dict):
            raise ValueError(f"{weights} has no 'weight_map' (tensor name -> shard file): it is not a complete "
                             "shard index; download the model again")
        shards = sorted(set(map(str, index["weight_map"].values())))
        # Named beside the index, judged by the names alone: in the Hugging Face cache every file of a snapshot
        # is a link into blobs/, which a check through the links would take for "outside".
        outside = [s for s in shards if os.path.isabs(s) or os.path.normpath(s).startswith(os.pardir)]
        if outside:
            raise ValueError(f"{weights} points at shards outside its folder ({', '.join(outside)}); refusing to "
                             "read them: a shard index names files beside it")
        if not all((weights.parent / s).exists() for s in shards):
            raise FileNotFoundError(f"{weights} lists shards {shards} that are not all beside it")
        state = {k: v for s in shards for k, v in _safetensors(weights.parent / s).items()}
    elif weights.suffix == ".safetensors":
        state = _safetensors(weights)
    else:
        state = torch.load(regular_file(weights), map_location="cpu", weights_only=True)
    return dequantize_int8(state) if is_int8(state) else state


def saved_together(config_file: Path, stored: dict, weights: Path) -> None:
    """Refuse a folder whose config.json and weights come from two different `save_pretrained` calls.

    Each save writes the weights, then config.json, each file atomically; an interruption between the two
    (or a stale weights file of the other format) would otherwise pair new weights with an old config and
    compute garbage without a word. Both files carry the same random save id; folders written elsewhere
    (transformers, older minibert) have none and are not checked. ``stored``: config.json as read.
    """
    saved = stored.get(SAVE_ID)
    if saved is None or weights.suffix != ".safetensors":
        return
    try:
        with safe_open(weights, framework="pt") as f:
            written = (f.metadata() or {}).get(SAVE_ID)
    except SafetensorError:
        return  # load_state_dict says what is wrong with the file
    if written is not None and written != saved:
        raise ValueError(f"{config_file} and {weights.name} come from two different saves (a save_pretrained that "
                         "was interrupted, or files copied in from another model): save the model again")


def normalize_keys(state: dict[str, torch.Tensor], has_prefix: bool, prefix: str = "bert",
                   base_modules: tuple[str, ...] = BASE_MODULES) -> dict[str, torch.Tensor]:
    """Map a checkpoint's names onto this model's: old TF-era LayerNorm names, and the ``bert.`` prefix
    (``prefix``: the encoder's name in task models) that task models have and a bare encoder has not."""
    out = {}
    for key, value in state.items():
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        if has_prefix and key.startswith(base_modules):
            key = f"{prefix}.{key}"
        elif not has_prefix and key.startswith(f"{prefix}."):
            key = key.removeprefix(f"{prefix}.")
        out[key] = value
    return out


def not_finite(tensors: dict[str, torch.Tensor]) -> list[str]:
    """The names of the floating-point tensors holding a NaN or an infinity (one check, then one per name)."""
    floats = {name: t for name, t in tensors.items() if t.is_floating_point() and t.numel()}
    if not floats or torch.stack([t.isfinite().all() for t in floats.values()]).all():
        return []
    return [name for name, t in floats.items() if not t.isfinite().all()]


def refuse_not_finite(tensors: dict[str, torch.Tensor], source: Path, why: str) -> None:
    """A ValueError naming ``source`` and its first tensors holding a NaN or an infinity, then ``why``."""
    broken = not_finite(tensors)
    if broken:
        raise ValueError(f"{source} holds values that are not finite numbers (NaN or inf) in "
                         f"{', '.join(broken[:3])}{' ...' if len(broken) > 3 else ''}: {why}")


def tied_aliases(model: torch.nn.Module) -> dict[str, str]:
    """Names that are a second name of a tensor already listed (the tied MLM decoder): name -> first name."""
    seen: dict[int, str] = {}
    aliases: dict[str, str] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        if tensor.data_ptr() in seen:
            aliases[name] = seen[tensor.data_ptr()]
        else:
            seen[tensor.data_ptr()] = name
    return aliases


if TYPE_CHECKING:  # the mixin is only ever mixed into an nn.Module: say so to the type checker
    from torch import nn
    _Module = nn.Module
else:
    _Module = object


class PretrainedMixin(_Module):
    """``from_pretrained`` / ``save_pretrained`` for BertModel and the task models.

    The class attributes name the model family, for another family (ModernBERT) to reuse the same loading
    and checks: its config class, the encoder's attribute in task models (transformers' ``base_model_prefix``)
    and its top-level modules in a bare encoder's checkpoint, and the pattern of an encoder layer's keys.
    """

    config: BertConfig
    config_class: ClassVar[type[BertConfig]] = BertConfig
    family: ClassVar[str] = "BERT"
    base_model_prefix: ClassVar[str] = "bert"
    base_modules: ClassVar[tuple[str, ...]] = BASE_MODULES
    layer_key: ClassVar[str] = r"encoder\.layer\.(\d+)\."

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, config: BertConfig | None = None,
                        dtype: torch.dtype | None = None, **config_overrides):
        """Load a checkpoint; a head the checkpoint lacks is freshly initialised and reported.

        ``config_overrides`` change the stored config, e.g. ``num_labels=3`` for a new classifier.
        """
        files = resolve(name_or_path, [("config.json",), WEIGHT_FILES])
        config_file, weights = files["config.json"], next(files[f] for f in WEIGHT_FILES if f in files)
        stored = read_json(config_file, "config")
        saved_together(config_file, stored, weights)
        config = (config or cls.config_class.from_dict(stored)).replace(**config_overrides)
        model: Any = cls(config)  # a BertPreTrainedModel subclass
        prefix = cls.base_model_prefix
        has_prefix = hasattr(model, prefix)
        state = normalize_keys(load_state_dict(weights), has_prefix, prefix, cls.base_modules)
        if "cls.predictions.decoder.bias" in state:  # transformers' second name for cls.predictions.bias
            state.setdefault("cls.predictions.bias", state.pop("cls.predictions.decoder.bias"))
        expected = model.state_dict()
        aliases = tied_aliases(model)

        mismatched = [f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(expected[k].shape)}"
                      for k, v in state.items() if k in expected and v.shape != expected[k].shape]
        missing = [k for k in expected if k not in state and k not in aliases]
        in_base = lambda k: (k.startswith(f"{prefix}.") or not has_prefix) and ".pooler." not in f".{k}"
        missing_base = [k for k in missing if in_base(k)]
        if mismatched or missing_base:
            problems = [f"shape mismatch {m}" for m in mismatched] + [f"missing {k}" for k in missing_base]
            raise ValueError(f"{name_or_path} does not fit {cls.__name__} with this config:\n  "
                             + "\n  ".join(problems)
                             + f"\nIs it a {cls.family} checkpoint of this size? (config_overrides change sizes too)")
        unexpected = [k for k in state if k not in expected and k != "embeddings.position_ids"
                      and not k.endswith(".position_ids")]
        layers = {int(m.group(1)) for k in state if (m := re.search(cls.layer_key, k))}
        if layers and max(layers) >= config.num_hidden_layers:  # not a head it lacks: part of the encoder left out
            raise ValueError(f"{weights} holds {max(layers) + 1} encoder layers, and its config (or your overrides) "
                             f"{config.num_hidden_layers}: loading would silently drop layers "
                             f"{config.num_hidden_layers} to {max(layers)}. Fix num_hidden_layers in {config_file}, "
                             "or keep the layers you want explicitly (as notebook 12's distillation does)")
        refuse_not_finite(state, weights, "the file is damaged, or the training that wrote it had diverged; load "
                                          "another checkpoint")
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

        ``int8_weights``: store the matrices as int8 rows with a scale each (a quarter of fp32's size) in
        ``model.int8.safetensors``, with ``model_type`` "minibert": only minibert reads it, and
        transformers refuses the folder instead of computing with the raw int8 numbers (see `quantize_int8`).
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        aliases = tied_aliases(self)
        state = {k: v.detach().contiguous() for k, v in self.state_dict().items() if k not in aliases}
        save_id = uuid.uuid4().hex
        config = {**self.config.to_dict(), "architectures": [type(self).__name__], SAVE_ID: save_id}
        weights, stale = "model.safetensors", INT8_WEIGHTS
        if int8_weights:
            state, weights, stale = quantize_int8(state), INT8_WEIGHTS, "model.safetensors"
            config = {**config, "model_type": MINIBERT_ONLY}
        with atomic_path(directory / weights) as tmp:
            save_file(state, tmp, metadata={"format": "pt", SAVE_ID: save_id})
        with atomic_path(directory / "config.json") as tmp:
            tmp.write_text(json.dumps(config, indent=2) + "\n")
        (directory / stale).unlink(missing_ok=True)  # our own other-format weights, which would be read first
        return directory


# --- int8 storage ---------------------------------------------------------------------------
# Weight-only int8: a checkpoint a quarter of its fp32 size, for shipping, not for computing.
#
# Each large matrix (linear weights, embedding tables) is stored as int8 with one fp32 scale per row:
# ``W ≈ q · s`` with ``s = max|W_row| / 127`` and ``q = round(W / s)``, so every weight is off by at
# most half a step, ``s / 2``. Per row rather than per tensor because rows differ a lot in size (a
# rare token's embedding against a frequent one's); one scale for the whole table would round the
# small rows to zero. Vectors (biases, LayerNorm) stay in fp16: they are few and sensitive.
#
# Loading turns the rows back into fp32 before the model sees them, so the model computes exactly as
# it would with the rounded fp32 weights: this is about the size of a download or a repository,
# unlike the *dynamic* quantisation of notebook 12, which computes in int8 to run faster. The file is
# still plain safetensors (no pickle), but only minibert reads it: transformers does not know the
# ``.int8_scale`` tensors and would compute with the raw integers. So the file is named
# ``model.int8.safetensors`` and config.json says ``"model_type": "minibert"``: transformers' Auto
# classes and pipelines refuse the model type, its BertModel finds no weights file. ``minibert export
# FOLDER --out NEW --dtype fp16`` converts such a folder into one transformers reads.

INT8_SCALE_SUFFIX = ".int8_scale"
SAVE_ID = "minibert_save_id"  # in config.json and in the weights' metadata: one save wrote both
INT8_MIN_NUMEL = 4096  # smaller tensors are not worth a scale per row


def quantize_int8(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict with its float matrices as int8 rows plus ``name.int8_scale``; the rest in fp16."""
    out = {}
    for name, tensor in state.items():
        if not tensor.is_floating_point():
            out[name] = tensor
        elif tensor.dim() == 2 and tensor.numel() >= INT8_MIN_NUMEL:
            w = tensor.detach().float()
            scale = w.abs().amax(dim=1).clamp_min(1e-12) / 127  # (rows,): one step per row
            out[name] = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
            out[name + INT8_SCALE_SUFFIX] = scale.contiguous()
        else:
            out[name] = tensor.detach().half().contiguous()
    return out


def is_int8(state: dict[str, torch.Tensor]) -> bool:
    return any(name.endswith(INT8_SCALE_SUFFIX) for name in state)


def dequantize_int8(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Undo `quantize_int8`: int8 rows times their scales, everything as fp32."""
    out = {}
    for name, tensor in state.items():
        if name.endswith(INT8_SCALE_SUFFIX):
            continue
        scale = state.get(name + INT8_SCALE_SUFFIX)
        if scale is not None:
            if tensor.dtype != torch.int8 or scale.shape != tensor.shape[:1]:
                raise ValueError(f"{name}: an int8 matrix with one scale per row was expected, found "
                                 f"{tensor.dtype} {tuple(tensor.shape)} with scales {tuple(scale.shape)}; "
                                 "the checkpoint is damaged: download or export it again")
            out[name] = tensor.float() * scale.float()[:, None]
        else:
            out[name] = tensor.float() if tensor.is_floating_point() else tensor
    return out
