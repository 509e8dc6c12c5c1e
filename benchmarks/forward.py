"""Speed of minibert against transformers on the same work, in one run.

Both models hold the same weights (a transformers model saved and loaded into minibert) and see the
same batches; we time inference (no grad, the fused attention path on both sides) and a training
step (forward + backward). The ratio minibert / transformers is what we track: below 1 is faster.

    python benchmarks/forward.py                     # CPU, small sizes (a few minutes on 2 cores)
    python benchmarks/forward.py --device cuda --presets bert-base bert-large --batch 32 --seq 512
"""
import argparse
import platform
import statistics
import tempfile
import time

import torch
import transformers

import minibert


def timed_pair(fns, repeats, sync):
    """Median seconds of each function, timed in alternating rounds so that neither side gets the
    machine's warm-up, turbo or a background job to itself."""
    for fn in fns.values():  # warm-up: allocator, kernel selection, first-touch of weights
        for _ in range(2):
            fn()
    sync()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def bench(preset, batch, seq, device, dtype, repeats):
    cfg = minibert.BertConfig.from_preset(preset)
    hf_cfg = transformers.BertConfig(**{k: v for k, v in cfg.to_dict().items() if k != "architectures"},
                                     attn_implementation="sdpa")
    torch.manual_seed(0)
    theirs = transformers.BertModel(hf_cfg)
    with tempfile.TemporaryDirectory() as d:
        theirs.save_pretrained(d)
        ours = minibert.BertModel.from_pretrained(d)
    ours, theirs = ours.to(device, dtype), theirs.to(device, dtype)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, cfg.vocab_size, (batch, seq), generator=g).to(device)
    mask = torch.ones_like(ids)
    mask[: batch // 2, seq * 3 // 4:] = 0  # half the batch padded: the masked path is the common one
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    models = {"minibert": ours, "transformers": theirs}

    def infer(model):
        model.eval()
        return torch.no_grad()(lambda: model(input_ids=ids, attention_mask=mask))

    def train_step(model):
        model.train()
        return lambda: model(input_ids=ids, attention_mask=mask).last_hidden_state.float().pow(2).mean().backward()

    inference = timed_pair({name: infer(m) for name, m in models.items()}, repeats, sync)
    training = timed_pair({name: train_step(m) for name, m in models.items()}, repeats, sync)
    return inference, training


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["bert-mini", "bert-small", "bert-base"])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or "cpu"
    print(f"device {args.device} ({device_name}, {torch.get_num_threads()} threads), torch {torch.__version__}, "
          f"transformers {transformers.__version__}, minibert {minibert.__version__}, {args.dtype}, "
          f"batch {args.batch} x seq {args.seq}, median of {args.repeats}\n")
    print("| preset | minibert infer (ms) | transformers infer (ms) | ratio | minibert train step (ms) | transformers train step (ms) | ratio |")
    print("|---|---|---|---|---|---|---|")
    for preset in args.presets:
        inference, training = bench(preset, args.batch, args.seq, args.device, dtype, args.repeats)
        cells = [f"{t['minibert'] * 1e3:.1f} | {t['transformers'] * 1e3:.1f} | {t['minibert'] / t['transformers']:.2f}"
                 for t in (inference, training)]
        print(f"| {preset} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
