"""Pre-training throughput of minibert against transformers' BertForPreTraining, in one run.

Both libraries get the same config, the same initial weights (a transformers model saved and loaded
into minibert), the same real batches (WikiText-2 text, NSP pairs padded to --seq, 15% MLM masking
by the course's own pipeline) and the same AdamW. minibert decodes the masked positions only, found
on the host before the batch moves, as its Trainer does. Each model is warmed up alone (with
--compile, that is where it compiles), then steps alternate between the two so that neither gets the
machine warm, turbo or a background job to itself. Reported: training tokens/s, the ratio, peak
memory and, on a GPU, model FLOPs utilisation (MFU: (6N + 12·L·H·T) FLOPs per token, as nanoGPT
counts them, against the device's dense bf16 peak). Peak memory on a GPU is the allocator's peak
while a model is moved there and warmed up, less what was allocated before; on a CPU, each library
alone in a fresh process (one process's resident set cannot be split).

    python benchmarks/pretrain.py                               # CPU: bert-mini, seq 128
    python benchmarks/pretrain.py --device cuda --preset bert-base --batch 64 --precision bf16 [--compile]
    ... --json-out FILE                                         # the settings and every figure, as JSON
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
from pathlib import Path

import torch
import transformers

import minibert
from minibert.heads import masked_lm_positions
from minibert.pretraining import build_pretraining_data
from minibert.tokenizer import BertTokenizer
from minibert.training import flops_per_token, peak_flops

TOKENIZER = "sentence-transformers/all-MiniLM-L6-v2"  # the bert-base-uncased vocabulary


def batches(args):
    """The same list of real pre-training batches for both libraries, with minibert's masked positions."""
    tok = BertTokenizer.from_pretrained(args.tokenizer)
    dataset = build_pretraining_data(tok, ["wikitext2_raw"], objective="nsp", max_seq_len=args.seq, seed=0,
                                     pad_to=args.seq)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True, drop_last=True,
                                         collate_fn=dataset.collate, generator=torch.Generator().manual_seed(0),
                                         pin_memory=args.device == "cuda")
    torch.manual_seed(0)  # the collate's dynamic masking draws from the global RNG
    out = []
    for batch in loader:
        out.append({**batch, "masked_positions": masked_lm_positions(batch["labels"])})
        if len(out) == args.warmup + args.steps:
            return out
    raise ValueError(f"the corpus gives only {len(out)} batches; lower --steps or --batch")


def models(args):
    """Both models with the same initial weights, on the CPU; with ``--only``, just that one (for its memory)."""
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
    return pair


def step_fn(model, args, dtype):
    fused = args.device == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused or None)
    autocast = torch.autocast(args.device, dtype=dtype, enabled=dtype != torch.float32)
    # minibert pre-trains with masked-only decoding (the MLM decoder at the ~15% masked positions), as the Trainer does.
    ours = isinstance(model, minibert.BertForPreTraining)
    forward = torch.compile(model, backend=args.compile) if args.compile else model

    def step(batch):
        batch = {k: v.to(args.device, non_blocking=True) for k, v in batch.items() if ours or k != "masked_positions"}
        if ours and args.compile:  # N_masked varies: one graph for every count, as the Trainer compiles it
            torch._dynamo.maybe_mark_dynamic(batch["masked_positions"], 0)
        with autocast:
            loss = forward(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def run(args):
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.precision]
    data = batches(args)
    on_gpu = args.device == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    pair, steps, result = models(args), {}, {}
    for name, model in pair.items():  # each warmed up alone: its own peak memory, and compiling (--compile)
        if on_gpu:
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
        steps[name] = step_fn(model.to(args.device).train(), args, dtype)
        start = time.perf_counter()
        for batch in data[:args.warmup]:
            steps[name](batch)
        sync()
        result[name] = {"warmup_s": time.perf_counter() - start}
        if on_gpu:
            result[name]["peak_memory_gib"] = (torch.cuda.max_memory_allocated() - before) / 2**30
    times = {name: [] for name in steps}
    for batch in data[args.warmup:]:
        for name, step in steps.items():
            sync()
            start = time.perf_counter()
            step(batch)
            sync()
            times[name].append(time.perf_counter() - start)
    tokens = args.batch * args.seq
    if args.only and not on_gpu:  # alone in this process: its peak is the library's own
        result[args.only]["peak_memory_gib"] = peak_rss_gib()
    model = pair[next(iter(pair))]
    peak = peak_flops(torch.cuda.get_device_name()) if on_gpu and args.precision == "bf16" else None
    for name, t in times.items():
        result[name]["tokens_per_s"] = tokens / statistics.median(t)
        result[name]["mfu"] = result[name]["tokens_per_s"] * flops_per_token(model, args.seq) / peak if peak else None
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
    parser.add_argument("--compile", nargs="?", const="inductor", metavar="BACKEND",
                        help="torch.compile both models (backend inductor; aot_eager generates no code: a quick "
                             "rehearsal)")
    parser.add_argument("--tokenizer", default=TOKENIZER,
                        help=f"a Hub id or folder with the vocabulary (default {TOKENIZER})")
    parser.add_argument("--json-out", metavar="FILE", help="also write the settings and every figure to FILE as JSON")
    parser.add_argument("--only", choices=["minibert", "transformers"], help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(result))
        return
    if args.device != "cuda":
        for name, gib in peak_memory_in_subprocesses(sys.argv[1:]).items():
            result[name]["peak_memory_gib"] = gib
    device = torch.cuda.get_device_name() if args.device == "cuda" else f"{platform.processor() or 'cpu'}, {torch.get_num_threads()} threads"
    print(f"{args.preset}, seq {args.seq}, batch {args.batch}, {args.precision}{', compiled' if args.compile else ''}, "
          f"median of {args.steps} steps after {args.warmup} warm-up | {device} | torch {torch.__version__}, "
          f"transformers {transformers.__version__}")
    ours, theirs = result["minibert"], result["transformers"]
    ratio = ours["tokens_per_s"] / theirs["tokens_per_s"]
    print(f"minibert     {ours['tokens_per_s']:10,.0f} tokens/s")
    print(f"transformers {theirs['tokens_per_s']:10,.0f} tokens/s")
    print(f"ratio        {ratio:10.2f}x")
    memory = "peak GPU memory" if args.device == "cuda" else "peak RSS (whole process)"
    for name in ("minibert", "transformers"):
        mfu = f"  MFU {result[name]['mfu']:.1%}" if result[name]["mfu"] else ""
        print(f"{name:<12} {memory} {result[name]['peak_memory_gib']:.2f} GiB{mfu}  "
              f"warm-up {result[name]['warmup_s']:.1f} s{' (compiling)' if args.compile else ''}")
    if args.json_out:
        settings = {k: v for k, v in vars(args).items() if k not in ("only", "json", "json_out")}
        record = {"settings": settings, "device": device, "torch": torch.__version__,
                  "transformers": transformers.__version__, "results": result, "ratio": ratio}
        Path(args.json_out).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
