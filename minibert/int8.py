"""Weight-only int8 storage: a checkpoint a quarter of its fp32 size, for shipping, not for computing.

Each large matrix (linear weights, embedding tables) is stored as int8 with one fp32 scale per row:
``W ≈ q · s`` with ``s = max|W_row| / 127`` and ``q = round(W / s)``, so every weight is off by at most
half a step, ``s / 2``. Per row rather than per tensor because rows differ a lot in size (a rare
token's embedding against a frequent one's); one scale for the whole table would round the small
rows to zero. Vectors (biases, LayerNorm) stay in fp16: they are few and sensitive.

Loading turns the rows back into fp32 before the model sees them, so the model computes exactly
as it would with the rounded fp32 weights: this is about the size of a download or a repository,
unlike the *dynamic* quantisation of notebook 09, which computes in int8 to run faster. The file is
still plain safetensors (no pickle), but only minibert reads it: transformers does not know the
``.int8_scale`` tensors. Loading one with minibert and calling ``save_pretrained`` gives back a
checkpoint transformers reads.
"""
from __future__ import annotations

import torch

SCALE_SUFFIX = ".int8_scale"
MIN_NUMEL = 4096  # smaller tensors are not worth a scale per row


def quantize(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict with its float matrices as int8 rows plus ``name.int8_scale``; the rest in fp16."""
    out = {}
    for name, tensor in state.items():
        if not tensor.is_floating_point():
            out[name] = tensor
        elif tensor.dim() == 2 and tensor.numel() >= MIN_NUMEL:
            w = tensor.detach().float()
            scale = w.abs().amax(dim=1).clamp_min(1e-12) / 127  # (rows,): one step per row
            out[name] = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
            out[name + SCALE_SUFFIX] = scale.contiguous()
        else:
            out[name] = tensor.detach().half().contiguous()
    return out


def is_quantized(state: dict[str, torch.Tensor]) -> bool:
    return any(name.endswith(SCALE_SUFFIX) for name in state)


def dequantize(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Undo ``quantize``: int8 rows times their scales, everything as fp32."""
    out = {}
    for name, tensor in state.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        scale = state.get(name + SCALE_SUFFIX)
        if scale is not None:
            if tensor.dtype != torch.int8 or scale.shape != tensor.shape[:1]:
                raise ValueError(f"{name}: an int8 matrix with one scale per row was expected, found "
                                 f"{tensor.dtype} {tuple(tensor.shape)} with scales {tuple(scale.shape)}; "
                                 "the checkpoint is damaged: download or export it again")
            out[name] = tensor.float() * scale.float()[:, None]
        else:
            out[name] = tensor.float() if tensor.is_floating_point() else tensor
    return out
