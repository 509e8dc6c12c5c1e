"""Pre-training throughput of minibert against transformers' BertForPreTraining, in one run.

Both libraries get the same config, the same initial weights (a transformers model saved and loaded
into minibert), the same real batches (WikiText-2 text, NSP pairs, 15% MLM masking by the course's
own pipeline) and the same AdamW; steps alternate between the two so that neither gets the machine
warm, turbo or a background job to itself. Reported: training tokens/s, the ratio, peak memory and,
on a GPU, model FLOPs utilisation (MFU: (6N + 12·L·H·T) FLOPs per token, as nanoGPT counts them,
against the device's dense bf16 peak).

    python benchmarks/pretrain.py                               # CPU: bert-mini, seq 128
    python benchmarks/pretrain.py --device cuda --preset bert-base --batch 64 --precision bf16
"""
import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import transformers

import minibert
from minibert.pretraining import build_pretraining_data
from minibert.tokenizer import BertTokenizer

TOKENIZER = "sentence-transformers/all-MiniLM-L6-v2"  # the bert-base-uncased vocabulary
PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L4": 121e12, "A10": 125e12}


def batches(args):
    """The same list of real pre-training batches for both libraries."""
    tok = BertTokenizer.from_pretrained(TOKENIZER)
    dataset = build_pretraining_data(tok, ["wikitext2_raw"], objective="nsp", max_seq_len=args.seq, seed=0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True, drop_last=True,
                                         collate_fn=dataset.collate, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)  # the collate's dynamic masking draws from the global RNG
    out = []
    for batch in loader:
        out.append(batch)
        if len(out) == args.warmup + args.steps:
            return out
    raise ValueError(f"the corpus gives only {len(out)} batches; lower --steps or --batch")


def models(args):
    """Both models with the same initial weights; with ``--only``, just that one (for its memory)."""
    cfg = minibert.BertConfig.from_preset(args.preset)
    hf_cfg = transformers.BertConfig(**{k: v for k, v in cfg.to_dict().items() if k != "architectures"},
                                     attn_implementation="sdpa")
    torch.manual_seed(0)
    if args.only == "minibert":
        pair = {"minibert": minibert.BertForPreTraining(cfg)}
    else:
        theirs = transformers.BertForPreTraining(hf_cfg)
        pair = {"transformers": theirs}
        if args.only is None:
            with tempfile.TemporaryDirectory() as d:
                theirs.save_pretrained(d)
                pair = {"minibert": minibert.BertForPreTraining.from_pretrained(d), **pair}
    return {name: m.to(args.device).train() for name, m in pair.items()}


def step_fn(model, args, dtype):
    fused = args.device == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused or None)
    autocast = torch.autocast(args.device, dtype=dtype, enabled=dtype != torch.float32)
    # minibert pre-trains with masked-only decoding (the MLM decoder at the ~15% masked positions), as the Trainer does.
    extra = {"masked_only": True} if isinstance(model, minibert.BertForPreTraining) else {}

    def step(batch):
        batch = {k: v.to(args.device, non_blocking=True) for k, v in batch.items()}
        with autocast:
            loss = model(**batch, **extra).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def run(args):
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.precision]
    data = batches(args)
    pair = models(args)
    steps = {name: step_fn(m, args, dtype) for name, m in pair.items()}
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    times = {name: [] for name in steps}
    for i, batch in enumerate(data):
        for name, step in steps.items():
            sync()
            start = time.perf_counter()
            step(batch)
            sync()
            if i >= args.warmup:
                times[name].append(time.perf_counter() - start)
    tokens = args.batch * args.seq
    result = {name: {"tokens_per_s": tokens / statistics.median(t)} for name, t in times.items()}
    if args.only:  # alone in this process: its peak is the library's own
        result[args.only]["peak_memory_gib"] = (
            torch.cuda.max_memory_allocated() / 2**30 if args.device == "cuda" else peak_rss_gib())
    cfg = pair[next(iter(pair))].config
    n_params = sum(p.numel() for p in pair[next(iter(pair))].parameters())
    flops_per_token = 6 * n_params + 12 * cfg.num_hidden_layers * cfg.hidden_size * args.seq
    peak = next((v for k, v in PEAK_BF16_FLOPS.items() if args.device == "cuda" and k in torch.cuda.get_device_name()), None)
    for name in times:
        result[name]["mfu"] = result[name]["tokens_per_s"] * flops_per_token / peak if peak else None
    return result


def peak_rss_gib():
    """This process's peak resident memory. Linux's VmHWM starts afresh with the process, whereas
    ru_maxrss keeps the peak of the parent that forked it (here: one that ran both libraries)."""
    try:
        status = open("/proc/self/status").read()
        return int(status.split("VmHWM:")[1].split()[0]) / 2**20  # kB -> GiB
    except (OSError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux, bytes on macOS


def peak_memory_in_subprocesses(argv):
    """Peak memory per library, each alone in a fresh process: the GPU peak (allocated tensors) or,
    on a CPU, the peak resident set size, which one process running both could not split."""
    out = {}
    for name in ("minibert", "transformers"):
        proc = subprocess.run([sys.executable, __file__, *argv, "--only", name, "--json"],
                              capture_output=True, text=True, check=True)
        out[name] = json.loads(proc.stdout.splitlines()[-1])[name]["peak_memory_gib"]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="bert-mini")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--only", choices=["minibert", "transformers"], help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(result))
        return
    for name, gib in peak_memory_in_subprocesses(sys.argv[1:]).items():
        result[name]["peak_memory_gib"] = gib
    device = torch.cuda.get_device_name() if args.device == "cuda" else f"{platform.processor() or 'cpu'}, {torch.get_num_threads()} threads"
    print(f"{args.preset}, seq {args.seq}, batch {args.batch}, {args.precision}, median of {args.steps} steps after "
          f"{args.warmup} warm-up | {device} | torch {torch.__version__}, transformers {transformers.__version__}")
    ours, theirs = result["minibert"], result["transformers"]
    print(f"minibert     {ours['tokens_per_s']:10,.0f} tokens/s")
    print(f"transformers {theirs['tokens_per_s']:10,.0f} tokens/s")
    print(f"ratio        {ours['tokens_per_s'] / theirs['tokens_per_s']:10.2f}x")
    memory = "peak GPU memory" if args.device == "cuda" else "peak RSS (whole process)"
    for name in ("minibert", "transformers"):
        mfu = f"  MFU {result[name]['mfu']:.1%}" if result[name]["mfu"] else ""
        print(f"{name:<12} {memory} {result[name]['peak_memory_gib']:.2f} GiB{mfu}")


if __name__ == "__main__":
    main()
