"""Reading a saved tokenizer's two JSON files, checked at the door: ``tokenizer.json`` (the `tokenizers`
pipeline: vocabulary and normaliser) and ``tokenizer_config.json`` (transformers' settings). A broken or
hand-edited file is an error that names the file, the field and the fix, never a traceback from deep in
the tokenizer or a setting read as something it is not ("yes" is not true; -5 is not a length)."""
from __future__ import annotations

from pathlib import Path

from .config import read_json

UNSET_MAX_LENGTH = 10**18  # transformers writes about 1e30 for "no limit"
FLAGS = ("do_lower_case", "tokenize_chinese_chars")


def read_tokenizer_json(path: Path) -> tuple[dict[str, int], dict]:
    """The vocabulary and the normaliser settings of a saved ``tokenizers`` BERT pipeline."""
    spec = read_json(path, "tokenizer")
    model, norm = spec.get("model") or {}, spec.get("normalizer") or {}
    if not isinstance(model, dict) or not isinstance(norm, dict) or model.get("type") != "WordPiece" \
            or norm.get("type") != "BertNormalizer":
        kind = lambda part: part.get("type") if isinstance(part, dict) else type(part).__name__
        raise ValueError(f"{path} is not a BERT WordPiece tokenizer (model {kind(model)}, normalizer {kind(norm)}); "
                         "load it with transformers.AutoTokenizer instead")
    if not isinstance(model.get("vocab"), dict) or not model["vocab"]:
        raise ValueError(f"{path} has no WordPiece vocabulary (model.vocab); save or download the tokenizer again")
    return model["vocab"], {"do_lower_case": norm.get("lowercase", True), "strip_accents": norm.get("strip_accents"),
                            "tokenize_chinese_chars": norm.get("handle_chinese_chars", True),
                            "max_input_chars_per_word": model.get("max_input_chars_per_word", 100)}


def read_tokenizer_config(path: Path | None) -> dict:
    """The settings of ``tokenizer_config.json`` that minibert uses: the longest input (512 where the file
    is absent or silent), and the normaliser's flags the file states (lower-casing, accents, Chinese
    characters), which win over tokenizer.json's, as they do in transformers."""
    config = read_json(path, "tokenizer config") if path else {}
    for name in FLAGS:
        if name in config and not isinstance(config[name], bool):
            raise ValueError(f"{path}: {name} must be true or false, got {config[name]!r}; correct the file "
                             "(or delete the line: the default is true)")
    if config.get("strip_accents") is not None and not isinstance(config["strip_accents"], bool):
        raise ValueError(f"{path}: strip_accents must be true, false or null (follow do_lower_case), "
                         f"got {config['strip_accents']!r}")
    length = config.get("model_max_length")
    if length is not None and (isinstance(length, bool) or not isinstance(length, (int, float)) or not length >= 1):
        raise ValueError(f"{path}: model_max_length must be a positive number of tokens, got {length!r}; correct "
                         "it to the model's max_position_embeddings (512 for BERT) or delete the line")
    stated = {name: config[name] for name in FLAGS if name in config}
    if config.get("strip_accents") is not None:
        stated["strip_accents"] = config["strip_accents"]
    return {**stated, "model_max_length": 512 if length is None or length >= UNSET_MAX_LENGTH else int(length)}
