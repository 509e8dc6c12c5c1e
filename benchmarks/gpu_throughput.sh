#!/usr/bin/env bash
# Issue [4/4] §1 on a GPU, in one command of at most 8 minutes: bert-base pre-training throughput of
# minibert (unpadded; and padded) against transformers' BertForPreTraining (sdpa), on real Wikipedia
# pairs at their real lengths (benchmarks/pretrain.py: the same batches and initial weights for all
# three, bf16 autocast over fp32 master weights, fused AdamW, five interleaved rounds, median and spread,
# MFU on real tokens). Three stages, each under its own time limit, most wanted first:
#   compiled-128  torch.compile (inductor), pairs of up to 128 tokens, batch 64 / 256 / 512, and a
#                 profile of minibert's compiled step in each cell (the issue's targets: MFU >= 45%,
#                 >= 1.25x transformers, memory <= transformers')
#   eager-128     the same without compiling
#   eager-512     pairs of up to 512 tokens, batch 64 / 256
# Each (sequence, batch) cell goes to OUT/throughput.jsonl as it is measured, so a stage cut off by its
# limit keeps the cells it finished; profiles to OUT/profile.txt, all output to OUT/throughput.log, and
# a table of every cell at the end. A new run replaces these files of an earlier one in OUT.
#
#   bash benchmarks/gpu_throughput.sh --archive FILE [--out DIR]   on the GPU machine; FILE: the data
#                          archive of `benchmarks/gpu_course_bert.sh --bundle` (OUT default gpu-throughput/)
#   bash benchmarks/gpu_throughput.sh --archive FILE --cpu-dry-run --out DIR   every stage on the CPU at
#                          tiny sizes (tests/test_gpu_runs.py)
set -uo pipefail
cd "$(dirname "$0")/.."

source benchmarks/gpu_common.sh  # $PYTHON, archive_option, stage, start_run, end_run
out=gpu-throughput archive= mode=gpu
while [ $# -gt 0 ]; do
    archive_option "$@"; shift $taken
done
start_run "$archive" throughput.log
rm -f "$out/throughput.jsonl" "$out/profile.txt"

if [ $mode = dry ]; then  # tiny sizes on the CPU, even on a machine with a GPU
    export CUDA_VISIBLE_DEVICES=""
    common=(--device cpu --preset bert-tiny --precision fp32 --steps 2 --repeats 2 --warmup 2
            --corpus wikitext2_raw/wiki.valid.raw)
    short=(--seq 32 --batch 4 8) long=(--seq 64 --batch 4) backend=aot_eager limits=(300 300 300)
else
    common=(--device cuda --preset bert-base --precision bf16 --steps 6 --repeats 5 --warmup 3
            --corpus wikipedia_2015/AA)  # 25 of the 100 shards: about 4M words
    short=(--seq 128 --batch 64 256 512) long=(--seq 512 --batch 64 256) backend=inductor limits=(230 110 130)
fi
bench=("$PYTHON" benchmarks/pretrain.py "${common[@]}" --tokenizer "$tokenizer" --json-out "$out/throughput.jsonl")

stage compiled-128 "${limits[0]}" "${bench[@]}" "${short[@]}" --compile "$backend" --profile "$out/profile.txt"
stage eager-128 "${limits[1]}" "${bench[@]}" "${short[@]}"
stage eager-512 "${limits[2]}" "${bench[@]}" "${long[@]}"

"$PYTHON" - "$out/throughput.jsonl" <<'PY' 2>&1 | tee -a "$log"
import json
import sys
from pathlib import Path

path = Path(sys.argv[1])
cells = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
print(f"\n{'':<9} {'seq':>4} {'batch':>5} {'real':>5}  {'minibert':>12} {'padded':>12} {'transformers':>12}"
      f"  {'ratio':>6}  {'MFU':>6}")
for c in cells:
    r = c["results"]
    rate = lambda name: f"{r[name]['tokens_per_s']:>12,.0f}" if "tokens_per_s" in r[name] else f"{r[name]['error']:>12}"
    mfu = r["minibert"].get("mfu")
    print(f"{'compiled' if c['settings']['compile'] else 'eager':<9} {c['seq']:>4} {c['batch']:>5} "
          f"{c['real_token_fraction']:>5.0%}  {rate('minibert')} {rate('minibert, padded')} {rate('transformers')}"
          f"  {(c['ratio'] or 0):>5.2f}x  {f'{mfu:.1%}' if mfu else '-':>6}")
print(f"{len(cells)} cells in {path}")
PY

end_run throughput
