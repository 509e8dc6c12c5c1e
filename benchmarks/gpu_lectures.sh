#!/usr/bin/env bash
# Issue [4/4] §4 on a GPU, in one command of at most 8 minutes: what a lecture on a GPU costs. The
# lecture-size settings of notebooks 04, 05, 07 and 10 (their parameters cells' GPU comments, the table
# in INSTRUCTORS.md) go through the same recipes the notebooks use, on the command line (the machine
# has no nbval or nbgrader), each for a timed slice; the minutes the full setting takes follow from the
# updates a second measured:
#   04  `minibert pretrain`: bert-base from scratch, the bert-base-uncased vocabulary, MLM + NSP on
#       wikipedia_2015 (25 of its 100 shards), pairs of 128 tokens, 256 a step, lr 1e-4, dropout 0.1
#   05  `minibert experiment masking`: one run of the grid at bert-mini (the notebook's GPU grid: 8
#       configurations x 5 seeds x 10,000 updates)
#   07  `minibert finetune sst2 --preset paper`: bert-base (3 epochs of 32 = 6,315 updates)
#   10  `minibert finetune squad --preset paper`: bert-base, windows of 384 (the paper's 3 epochs of
#       SQuAD train, about 88,500 windows: about 8,300 updates of 32)
# 07 and 10 fine-tune a bert-base of random weights: its speed is bert-base-uncased's, and the weights stay
# behind. They need the `datasets` package (a stage without it fails at once and says so). Every stage
# runs under its own limit; OUT/lectures.json holds the figures, OUT/lectures.log all output (a new run
# replaces an earlier one's files in OUT).
#
#   bash benchmarks/gpu_lectures.sh --archive FILE [--out DIR]     on the GPU machine; FILE: the data archive
#                          of `benchmarks/gpu_course_bert.sh --bundle` (OUT default: gpu-lectures/, git-ignored)
#   bash benchmarks/gpu_lectures.sh --archive FILE --cpu-dry-run --out DIR    tiny sizes on the CPU
#                          (tests/test_gpu_runs.py)
set -uo pipefail
cd "$(dirname "$0")/.."

source benchmarks/gpu_common.sh  # $PYTHON, archive_option, stage, start_run, end_run
out=gpu-lectures archive= mode=gpu
while [ $# -gt 0 ]; do
    archive_option "$@"; shift $taken
done
start_run "$archive" lectures.log
rm -f "$out"/04_recipe.json "$out"/05_masking.json "$out"/07_results.json "$out"/10_results.json "$out"/lectures.json

if [ $mode = dry ]; then  # the same commands at tiny sizes
    export CUDA_VISIBLE_DEVICES=""
    base=bert-tiny slice=4 limits=(300 300 300 300)
    pretrain=(--corpus wikitext2_raw/wiki.valid.raw --batch-size 8)
    masking=(--preset bert-tiny --steps 20 --probe-sentences 20 --eval-examples 16)
    finetune=(--train-examples 64 --eval-examples 16 --batch-size 8)
else
    base=bert-base slice=60 limits=(110 100 110 130)
    pretrain=(--corpus wikipedia_2015/AA --batch-size 256)
    masking=(--preset bert-mini --steps 1000)
    finetune=(--eval-examples 300)
fi
"$PYTHON" - "$work/$base" "$base" <<'PY' || exit  # weights for 07 and 10 to start from (random: only the speed counts)
import sys

import torch

from minibert import BertConfig, BertForPreTraining

torch.manual_seed(0)
BertForPreTraining(BertConfig.from_preset(sys.argv[2])).save_pretrained(sys.argv[1])
PY

stage 04 "${limits[0]}" "$PYTHON" -m minibert.cli pretrain --preset "$base" --tokenizer "$tokenizer" "${pretrain[@]}" \
    --eval-corpus wikitext2_raw/wiki.valid.raw --objective nsp --max-seq-len 128 --lr 1e-4 --dropout 0.1 \
    --steps 1000000 --time-budget $slice --device auto --out "$work/04"
cp "$work/04/recipe.json" "$out/04_recipe.json" 2>/dev/null
stage 05 "${limits[1]}" "$PYTHON" -m minibert.cli experiment masking --strategies 80/10/10 --rates 0.15 --seeds 0 \
    "${masking[@]}" --device auto --out "$out/05_masking.json"
for task in sst2 squad; do
    name=$([ $task = sst2 ] && echo 07 || echo 10)
    stage $name "${limits[$([ $task = sst2 ] && echo 2 || echo 3)]}" "$PYTHON" -m minibert.cli finetune $task \
        --model "$work/$base" --tokenizer "$tokenizer" --preset paper --time-budget $slice "${finetune[@]}" \
        --device auto --out "$work/$name"
    cp "$work/$name/results.json" "$out/${name}_results.json" 2>/dev/null
done

"$PYTHON" - "$out" "$mode" <<'PY' 2>&1 | tee -a "$log"
import json
import sys
from pathlib import Path

out, mode = Path(sys.argv[1]), sys.argv[2]
read = lambda name: json.loads((out / name).read_text()) if (out / name).is_file() else None
figures = {"mode": "cpu dry run" if mode == "dry" else "gpu", "notebooks": {}}
pretrain = read("04_recipe.json")
if pretrain:
    per_s = pretrain["step"] / pretrain["seconds_this_run"]
    figures["notebooks"]["04"] = {"what": "bert-base pre-training, 256 x 128, MLM + NSP", "updates_per_s": per_s,
                                  "steps": pretrain["step"], "minutes_per_1000_updates": 1000 / per_s / 60,
                                  "held_out": pretrain["final"]}
masking = read("05_masking.json")
if masking and masking["runs"]:
    run = masking["runs"][0]
    steps = masking["setup"]["steps"]
    per_s = steps / run["train_seconds"]
    figures["notebooks"]["05"] = {"what": "the masking grid at bert-mini", "updates_per_s": per_s,
                                  "grid_minutes": 8 * 5 * 10_000 / per_s / 60,
                                  "grid": "8 configurations x 5 seeds x 10,000 updates (training only)"}
for name, paper_steps in (("07", 6_315), ("10", 8_300)):
    results = read(f"{name}_results.json")
    if results:
        per_s = results["steps"] / results["train_seconds_this_run"]
        figures["notebooks"][name] = {"what": f"bert-base fine-tuning, --preset paper", "updates_per_s": per_s,
                                      "preset_steps": results["max_steps"], "eval_seconds": results["eval_seconds"],
                                      "paper_minutes": paper_steps / per_s / 60, "paper_steps": paper_steps}
stages = [line.split("\t") for line in (out / "stages.tsv").read_text().splitlines()]
figures["stages"] = {name: {"passed": status == "0", "seconds": float(seconds)} for name, status, seconds, _ in stages}
(out / "lectures.json").write_text(json.dumps(figures, indent=2) + "\n")
print()
for name, f in figures["notebooks"].items():
    minutes = f.get("grid_minutes") or f.get("paper_minutes") or f["minutes_per_1000_updates"]
    print(f"notebook {name}: {f['what']}: {f['updates_per_s']:.2f} updates/s, {minutes:.1f} minutes"
          + (" per 1,000 updates" if name == "04" else ""))
print(f"figures: {out / 'lectures.json'}")
PY

end_run lectures
