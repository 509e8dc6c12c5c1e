"""Where and in what number format training runs, and how much of the GPU it uses (MFU)."""
from __future__ import annotations

import torch
from torch import nn

PRECISIONS = ("auto", "bf16", "fp16", "fp32")
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# Dense bf16/fp16 tensor-core peak per GPU, from the vendors' data sheets; first matching name wins.
PEAK_FLOPS = {"H100 PCIe": 756e12, "H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12,
              "L4": 121e12, "V100": 125e12, "T4": 65e12}


def pick_device(choice: str = "auto", local_rank: int = 0) -> torch.device:
    if choice == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", local_rank)
        return torch.device("mps" if torch.backends.mps.is_available() else "cpu")
    try:
        device = torch.device(choice)
    except (RuntimeError, TypeError):
        raise ValueError(f"device={choice!r} is not a device; use auto, cpu, cuda, cuda:1 or mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={choice!r} but PyTorch sees no CUDA GPU; use device='auto' or 'cpu'")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device={choice!r} but Apple's MPS is not available here; use device='auto' or 'cpu'")
    return torch.device("cuda", local_rank) if device.type == "cuda" and device.index is None else device


def pick_precision(choice: str, device: torch.device) -> str:
    """auto: bf16 on CUDA GPUs that have it, fp16 + gradient scaler on older ones, fp32 elsewhere (CPU bf16
    is slow on most laptops, but can be asked for); fp16 only on CUDA, where its gradient scaler belongs."""
    if choice == "auto":
        if device.type != "cuda":
            return "fp32"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if choice == "fp16" and device.type != "cuda":
        raise ValueError(f"precision='fp16' needs a CUDA GPU (fp16 training needs a gradient scaler, made for "
                         f"GPUs); on {device.type} use precision='fp32', or 'bf16' where the processor supports it")
    if choice == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError(f"{torch.cuda.get_device_name(device)} has no bf16; use precision='fp16' or 'fp32'")
    return choice


def peak_flops(device_name: str) -> float | None:
    return next((flops for key, flops in PEAK_FLOPS.items() if key in device_name), None)


def flops_per_token(model: nn.Module, seq_len: int) -> float:
    """Training FLOPs per token ≈ 6N (forward 2N, backward 4N per parameter) + 12·L·H·T for attention's
    QKᵀ and AV, which have no parameters (PaLM, Appendix B; nanoGPT's estimate_mfu)."""
    n_params = sum(p.numel() for p in model.parameters())
    return 6 * n_params + 12 * model.config.num_hidden_layers * model.config.hidden_size * seq_len
