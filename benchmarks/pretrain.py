"""Pre-training throughput of minibert against transformers' BertForPreTraining, on the batches a user trains on.

The batches: NSP pairs from ``--corpus`` made by the course's pipeline (BERT's pair sampler fills most pairs
to the sequence length and makes 10% of them short on purpose), each batch padded to its own longest pair,
as the Trainer pads, with 15% MLM masking. Three models with the same initial weights (a transformers model
saved and loaded into minibert), the same batches and the same AdamW (fused on a GPU):

    transformers       BertForPreTraining, sdpa attention: every position decoded, the padding computed
    minibert, padded   masked-only decoding (the MLM decoder at the ~15% masked positions, found on the host)
    minibert           the same and unpadded: the layers on the real tokens only (`minibert.unpadding`)

so the table says what each of minibert's two savings buys. Each model is warmed up alone (with --compile,
that is where it compiles; two batch shapes, so that the graphs are compiled for changing lengths once).
Then --repeats rounds: in each, every model runs the same --steps batches in turn, so that none gets the
machine warm, turbo or a background job to itself. A round's throughput is its real (non-pad) tokens over
its time; reported: the median over rounds and the spread (lowest, highest).

MFU, counted on real tokens alike for all three: a batch's model FLOPs are Σᵢ ℓᵢ·(6N + 12·L·H·ℓᵢ) over its
sequences of real length ℓᵢ (N parameters, 6N for forward and backward; 12·L·H·ℓ for attention's QKᵀ and AV,
PaLM's appendix B with each sequence's own length), over the time, over the device's dense bf16 peak. The
work transformers does on padding and on unmasked positions is not credited to it.

--batch and --seq take several values; every (seq, batch) cell is printed and appended to --json-out as one
JSON line as soon as it is measured, so a run cut off by a time limit keeps what it measured. Peak memory
is measured on a GPU (the allocator's peak while a model is moved there and warmed up, less what was
allocated before); on a CPU one process's resident set cannot be split between three models.

    python benchmarks/pretrain.py                               # CPU: bert-mini, seq 128, batch 32
    python benchmarks/pretrain.py --device cuda --preset bert-base --batch 64 256 512 --seq 128 512 \\
        --precision bf16 --corpus wikipedia_2015 [--compile] --json-out FILE
"""
import argparse
import json
import platform
import statistics
import tempfile
import time

import torch
import transformers

import minibert
from minibert.heads import masked_lm_positions
from minibert.pretraining import build_pretraining_data
from minibert.tokenizer import BertTokenizer
from minibert.training import peak_flops
from minibert.unpadding import packed_positions

TOKENIZER = "sentence-transformers/all-MiniLM-L6-v2"  # the bert-base-uncased vocabulary
MODELS = ("transformers", "minibert, padded", "minibert")


def batches(dataset, args, batch_size, seq):
    """``--warmup + --steps`` real batches (the corpus's batches again from the start where it has fewer:
    the timing does not depend on which text it is), with minibert's host-side positions."""
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True,
                                         collate_fn=dataset.collate, generator=torch.Generator().manual_seed(0),
                                         pin_memory=args.device == "cuda")
    torch.manual_seed(0)  # the collate's dynamic masking draws from the global RNG
    out = []
    while len(out) < args.warmup + args.steps:
        before = len(out)
        for batch in loader:
            out.append({**batch, "masked_positions": masked_lm_positions(batch["labels"]),
                        "packed_positions": packed_positions(batch["attention_mask"])})
            if len(out) == args.warmup + args.steps:
                break
        if len(out) == before:
            raise ValueError(f"--corpus gives {len(dataset)} pairs of up to {seq} tokens, fewer than a batch of "
                             f"{batch_size}; lower --batch or give a larger --corpus")
    return out


def model_flops(batch, n_params, config):
    """Σᵢ ℓᵢ·(6N + 12·L·H·ℓᵢ) over the batch's sequences of real length ℓᵢ (see the module's docstring)."""
    lengths = batch["attention_mask"].sum(1).double()  # (B,) real tokens per sequence
    return float((lengths * (6 * n_params + 12 * config.num_hidden_layers * config.hidden_size * lengths)).sum())


def make_models(preset):
    """The three models with the same initial weights, on the CPU."""
    cfg = minibert.BertConfig.from_preset(preset)
    hf_cfg = transformers.BertConfig(**{k: v for k, v in cfg.to_dict().items() if k != "architectures"},
                                     attn_implementation="sdpa")
    torch.manual_seed(0)
    theirs = transformers.BertForPreTraining(hf_cfg)
    with tempfile.TemporaryDirectory() as d:
        theirs.save_pretrained(d)
        return {"transformers": theirs, "minibert, padded": minibert.BertForPreTraining.from_pretrained(d),
                "minibert": minibert.BertForPreTraining.from_pretrained(d)}


def step_fn(name, model, args, dtype):
    """One training step on a batch: what each model is given of it, forward, backward, fused AdamW."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=args.device == "cuda" or None)
    autocast = torch.autocast(args.device, dtype=dtype, enabled=dtype != torch.float32)
    forward = torch.compile(model, backend=args.compile) if args.compile else model
    takes = {"transformers": (), "minibert, padded": ("masked_positions",),
             "minibert": ("masked_positions", "packed_positions")}[name]

    def step(batch):
        batch = {k: v.to(args.device, non_blocking=True) for k, v in batch.items()
                 if k not in ("masked_positions", "packed_positions") or k in takes}
        if args.compile:  # the lengths (T, N, N_masked) vary from batch to batch: one graph for all of them
            for value in batch.values():
                if value.dim() == 2:    # (B, T): ids, masks, segments, labels
                    torch._dynamo.maybe_mark_dynamic(value, 1)
            for key in ("masked_positions", "packed_positions"):
                if key in batch:
                    torch._dynamo.maybe_mark_dynamic(batch[key], 0)
        with autocast:
            loss = forward(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def measure(models, data, args, seq):
    """One (seq, batch) cell: warm-up alone, then interleaved rounds; the figures of each model."""
    on_gpu = args.device == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.precision]
    warmup, timed = data[:args.warmup], data[args.warmup:]
    steps, result = {}, {}
    for name, model in models.items():
        if on_gpu:
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
        start = time.perf_counter()
        try:
            steps[name] = step_fn(name, model.to(args.device).train(), args, dtype)
            for batch in warmup:
                steps[name](batch)
            sync()
        except torch.OutOfMemoryError:  # recorded, and the other models still measured
            steps.pop(name, None)
            model.to("cpu")
            torch.cuda.empty_cache()
            result[name] = {"error": "out of memory"}
            print(f"  {name}: out of memory at seq {seq}, batch {len(warmup[0]['input_ids'])}", flush=True)
            continue
        result[name] = {"warmup_s": round(time.perf_counter() - start, 2),
                        "peak_memory_gib": (torch.cuda.max_memory_allocated() - before) / 2**30 if on_gpu else None}
    rounds = {name: [] for name in steps}
    for _ in range(args.repeats):
        elapsed = dict.fromkeys(steps, 0.0)
        for batch in timed:
            for name, step in steps.items():
                sync()
                start = time.perf_counter()
                step(batch)
                sync()
                elapsed[name] += time.perf_counter() - start
        for name in steps:
            rounds[name].append(elapsed[name])
    if args.profile and "minibert" in steps:
        profile(steps["minibert"], timed[:5], args, f"seq {seq}, batch {len(timed[0]['input_ids'])}")
    real_tokens = sum(int(b["attention_mask"].sum()) for b in timed)
    padded_tokens = sum(b["attention_mask"].numel() for b in timed)
    reference = models["minibert"]
    flops = sum(model_flops(b, reference.num_parameters(), reference.config) for b in timed)
    peak = peak_flops(torch.cuda.get_device_name()) if on_gpu and args.precision == "bf16" else None
    for name, seconds in rounds.items():
        rates = sorted(real_tokens / s for s in seconds)
        result[name].update(tokens_per_s=statistics.median(rates), tokens_per_s_low=rates[0],
                            tokens_per_s_high=rates[-1], rounds_s=[round(s, 4) for s in seconds],
                            mfu=statistics.median(rates) * flops / real_tokens / peak if peak else None)
    def ratio(name):
        ours, theirs = result[name].get("tokens_per_s"), result["transformers"].get("tokens_per_s")
        return ours / theirs if ours and theirs else None

    return {"seq": seq, "batch": len(timed[0]["input_ids"]), "real_token_fraction": real_tokens / padded_tokens,
            "results": result, "ratio": ratio("minibert"), "ratio_padded": ratio("minibert, padded")}


def profile(step, data, args, cell):
    """Where minibert's step spends its time: torch.profiler's table of the operators that take the most
    (device time on a GPU), appended to --profile for each cell."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if args.device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for batch in data:
            step(batch)
        if args.device == "cuda":
            torch.cuda.synchronize()
    sort = "self_cuda_time_total" if args.device == "cuda" else "self_cpu_time_total"
    with open(args.profile, "a") as f:
        f.write(f"== minibert, {cell}, {len(data)} steps, {args.precision}{', compiled' if args.compile else ''}\n"
                f"{prof.key_averages().table(sort_by=sort, row_limit=25)}\n")


def show(cell):
    line = f"seq {cell['seq']:>4}, batch {cell['batch']:>4} ({cell['real_token_fraction']:.0%} real tokens):"
    for name in MODELS:
        r = cell["results"][name]
        if "error" in r:
            line += f"\n  {name:<17} {r['error']}"
            continue
        mfu = f", MFU {r['mfu']:.1%}" if r["mfu"] else ""
        memory = f", {r['peak_memory_gib']:.2f} GiB" if r["peak_memory_gib"] is not None else ""
        line += (f"\n  {name:<17} {r['tokens_per_s']:>11,.0f} real tokens/s ({r['tokens_per_s_low']:,.0f}-"
                 f"{r['tokens_per_s_high']:,.0f}){mfu}{memory}, warm-up {r['warmup_s']:.1f} s")
    if cell["ratio"] and cell["ratio_padded"]:
        line += f"\n  minibert / transformers {cell['ratio']:.2f}x (padded: {cell['ratio_padded']:.2f}x)"
    print(line, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="bert-mini")
    parser.add_argument("--seq", type=int, nargs="+", default=[128], help="longest pair, in tokens (several: a grid)")
    parser.add_argument("--batch", type=int, nargs="+", default=[32], help="pairs a step (several: a grid)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps a round, per model")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--corpus", nargs="+", default=["wikitext2_raw"],
                        help="the text the pairs come from: data sources or files (default wikitext2_raw)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--compile", nargs="?", const="inductor", metavar="BACKEND",
                        help="torch.compile every model (backend inductor; aot_eager generates no code: a quick "
                             "rehearsal)")
    parser.add_argument("--tokenizer", default=TOKENIZER,
                        help=f"a Hub id or folder with the vocabulary (default {TOKENIZER})")
    parser.add_argument("--json-out", metavar="FILE",
                        help="append one JSON line per (seq, batch) cell, with the settings, as it is measured")
    parser.add_argument("--profile", metavar="FILE",
                        help="also profile a few of minibert's steps in each cell; append the table to FILE")
    args = parser.parse_args()
    if args.warmup < 2:
        parser.error("--warmup must be at least 2: two batch shapes, so that compiled graphs take any length")
    device = (torch.cuda.get_device_name() if args.device == "cuda"
              else f"{platform.processor() or 'cpu'}, {torch.get_num_threads()} threads")
    settings = {k: v for k, v in vars(args).items() if k not in ("json_out", "profile")}
    print(f"{args.preset}, {args.precision}{', compiled' if args.compile else ''}, {args.repeats} rounds of "
          f"{args.steps} steps after {args.warmup} warm-up | {device} | torch {torch.__version__}, "
          f"transformers {transformers.__version__}", flush=True)
    tokenizer = BertTokenizer.from_pretrained(args.tokenizer)
    models = make_models(args.preset)
    # Both minibert models share one forward's code, and every cell compiles anew: room for all their graphs,
    # where the default limit would quietly leave the later cells uncompiled.
    torch._dynamo.config.recompile_limit = 64
    for seq in args.seq:
        dataset = build_pretraining_data(tokenizer, args.corpus, objective="nsp", max_seq_len=seq, seed=0)
        for batch_size in args.batch:
            cell = measure(models, batches(dataset, args, batch_size, seq), args, seq)
            show(cell)
            if args.json_out:
                record = {"settings": settings, "device": device, "torch": torch.__version__,
                          "transformers": transformers.__version__, **cell}
                with open(args.json_out, "a") as f:
                    f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
