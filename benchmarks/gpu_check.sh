#!/usr/bin/env bash
# The GPU check: one command that proves minibert's GPU path and measures it, offline, in at most
# 8 minutes on an H100. Four stages, each under its own time limit (a stuck one cannot eat the
# others' time; a failed one does not stop the rest):
#   tests     tests/test_gpu.py: the models equal the CPU and transformers; bf16, fp16 and compiled
#             training track fp32 and eager; exact resume; no step waits for the GPU; device="auto"
#             and the command line
#   eager     benchmarks/pretrain.py: bert-base, pairs of up to 128 tokens, batch 64, bf16, minibert
#   compiled  (unpadded, and padded) against transformers (sdpa) in one run, five interleaved rounds:
#             real tokens/s, MFU, peak memory; then the same with torch.compile. The whole grid of
#             issue [4/4] §1 (batch 64-512, sequence 128 and 512) is benchmarks/gpu_throughput.sh
#   lecture   notebook 04's pre-training at its GPU settings (bert-base, the bert-base-uncased
#             vocabulary, 256 × 128 tokens, lr 1e-4, dropout 0.1) with `minibert pretrain` for 90 s:
#             held-out loss against the unigram plateau
# Every figure goes to OUT/gpu_check.json and all output to OUT/gpu_check.log; the exit status is 0
# only if every stage passed.
#
#   bash benchmarks/gpu_check.sh --bundle [DIR]   beforehand, where the data mirror is (MINIBERT_DATA_MIRROR)
#                                                 or the internet: copy the data the check reads into DIR
#                                                 (default gpu-check-data/, git-ignored, about 7 MB:
#                                                 WikiText-2 raw, SQuAD v1.1 dev, bert-base-uncased's vocab.txt)
#   bash benchmarks/gpu_check.sh [--out DIR]      on the GPU machine, with that folder in the checkout
#                                                 (OUT default: gpu-check/, git-ignored)
#   bash benchmarks/gpu_check.sh --cpu-dry-run --out DIR   every stage on the CPU at tiny sizes, to show
#                                                 the script works before GPU time is spent (tests/test_gpu_check.py)
# --data DIR reads the data from another folder. The checkout is put on PYTHONPATH, not installed,
# so the machine's torch stays as it is; $PYTHON chooses the interpreter (default: the course's .venv
# where there is one, else python3).
set -uo pipefail
cd "$(dirname "$0")/.."

out=gpu-check data=gpu-check-data mode=check
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=${2:?--out needs a folder}; shift ;;
        --data) data=${2:?--data needs a folder}; shift ;;
        --bundle) mode=bundle; if [ $# -gt 1 ] && [[ $2 != --* ]]; then data=$2; shift; fi ;;
        --cpu-dry-run) mode=dry ;;
        -h|--help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu_check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
source benchmarks/gpu_common.sh  # $PYTHON, stage, end_run
export TOKENIZERS_PARALLELISM=false

if [ $mode = bundle ]; then  # the project's own data layer: verified copies from the mirror, or downloads
    "$PYTHON" -m minibert.data fetch wikitext2_raw squad_v1.1 bert_vocab --dest "$data" || exit
    du -sh "$data"
    exit 0
fi

export HF_HUB_OFFLINE=1  # weights: none (random initialisation); the tokenizer: bert-base-uncased's vocabulary
if [ -d "$data" ]; then
    export MINIBERT_DATA_DIR=$(cd "$data" && pwd)
fi
"$PYTHON" -m minibert.data fetch bert_vocab > /dev/null || { echo "gpu_check.sh: no bert_vocab in the data" \
    "folder: make it with --bundle where the data mirror or the internet is" >&2; exit 2; }
tokenizer=$("$PYTHON" -c "from minibert import data; print(data.path('bert_vocab'))")
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit
log=$out/gpu_check.log
: > "$log"
: > "$out/stages.tsv"
rm -f "$out"/benchmark_*.jsonl "$out"/lecture_*.json "$out"/tests.xml  # an earlier run's figures: not this one's
work=$(mktemp -d)  # the lecture run's checkpoints (bert-base: GBs) stay out of OUT
trap 'rm -rf "$work"' EXIT

if [ $mode = dry ]; then  # tiny sizes on the CPU, even on a machine with a GPU
    export MINIBERT_GPU_TESTS_ON_CPU=1 CUDA_VISIBLE_DEVICES=""
    limits=(600 120 120 120)
    bench=(--device cpu --preset bert-tiny --seq 32 --batch 4 --steps 2 --repeats 2 --warmup 2 --precision fp32)
    backend=aot_eager
    lecture=(--preset bert-tiny --max-seq-len 32 --batch-size 32 --steps 3)
else
    limits=(140 50 165 125)  # 8 minutes in all; compiling bert-base twice takes the longest
    bench=(--device cuda --preset bert-base --seq 128 --batch 64 --steps 10 --repeats 5 --warmup 3 --precision bf16)
    backend=inductor
    lecture=(--preset bert-base --max-seq-len 128 --batch-size 256 --steps 2000 --time-budget 90 --eval-every 500)
fi

stage tests "${limits[0]}" "$PYTHON" -m pytest tests/test_gpu.py -v -s -p no:cacheprovider -p no:nbval \
    -o junit_family=xunit1 --junitxml="$out/tests.xml"
stage eager "${limits[1]}" "$PYTHON" benchmarks/pretrain.py "${bench[@]}" --tokenizer "$tokenizer" \
    --corpus wikitext2_raw/wiki.test.raw --json-out "$out/benchmark_eager.jsonl"
stage compiled "${limits[2]}" "$PYTHON" benchmarks/pretrain.py "${bench[@]}" --tokenizer "$tokenizer" \
    --corpus wikitext2_raw/wiki.test.raw --compile "$backend" --json-out "$out/benchmark_compiled.jsonl"
stage lecture "${limits[3]}" "$PYTHON" -m minibert.cli pretrain "${lecture[@]}" --tokenizer "$tokenizer" \
    --corpus wikitext2_raw/wiki.test.raw --eval-corpus wikitext2_raw/wiki.valid.raw --objective none \
    --lr 1e-4 --dropout 0.1 --device auto --out "$work/lecture"
for file in recipe.json history.json; do
    [ -f "$work/lecture/$file" ] && cp "$work/lecture/$file" "$out/lecture_$file"
done

# One JSON of every figure; the exit status says whether every stage passed.
"$PYTHON" - "$out" "$mode" <<'EOF' 2>&1 | tee -a "$log" || printf 'summary\t1\t0.0\t0\n' >> "$out/stages.tsv"
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import torch

out, mode = Path(sys.argv[1]), sys.argv[2]


def read_json(name):
    path = out / name
    return json.loads(path.read_text()) if path.is_file() else None


def read_cell(name):
    """The benchmark's one (seq, batch) cell: the first line of its JSON Lines file."""
    path = out / name
    lines = path.read_text().splitlines() if path.is_file() else []
    return json.loads(lines[0]) if lines else None


def number(text):
    """A figure a test recorded (record_property): a number or a list of them, else the text as it is."""
    try:
        return json.loads(text)
    except ValueError:
        return text


stages = {}
for line in (out / "stages.tsv").read_text().splitlines():
    name, status, seconds, limit = line.split("\t")
    stages[name] = {"passed": status == "0", "exit_status": int(status), "seconds": float(seconds),
                    "limit_s": int(limit)}

tests = None
if (out / "tests.xml").is_file():
    suite = ET.parse(out / "tests.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    cases = {}
    for case in suite.iter("testcase"):
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        cases[case.get("name")] = {"outcome": outcome, "seconds": float(case.get("time", 0)),
                                   **{p.get("name"): number(p.get("value")) for p in case.iter("property")}}
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    tests = {**counts, "passed": counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"],
             "cases": cases}

lecture = None
recipe = read_json("lecture_recipe.json")
if recipe:
    final, history = recipe["final"], read_json("lecture_history.json") or []
    lecture = {"settings": recipe["args"], "steps": recipe["step"], "seconds": recipe["seconds_this_run"],
               "device": recipe["device"], "precision": recipe["precision"], "parameters": recipe["parameters"],
               "unigram_loss": recipe.get("unigram_loss"), "eval_loss": final.get("eval_mlm_loss"),
               "eval_accuracy": final.get("eval_mlm_accuracy"), "train_loss": next(
                   (r["loss"] for r in reversed(history) if "loss" in r), None),
               "tokens_per_s": next((r["tokens_per_s"] for r in reversed(history) if "tokens_per_s" in r), None),
               "eval_curve": [[r["step"], r["eval_mlm_loss"]] for r in history if "eval_mlm_loss" in r]}
    if lecture["unigram_loss"] is not None and lecture["eval_loss"] is not None:
        lecture["below_plateau"] = lecture["unigram_loss"] - lecture["eval_loss"]

figures = {"mode": "cpu dry run" if mode == "dry" else "gpu",
           "machine": {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                       "torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]},
           "stages": stages, "total_seconds": round(sum(s["seconds"] for s in stages.values()), 1),
           "tests": tests, "benchmark": {"eager": read_cell("benchmark_eager.jsonl"),
                                         "compiled": read_cell("benchmark_compiled.jsonl")},
           "lecture": lecture}
(out / "gpu_check.json").write_text(json.dumps(figures, indent=2) + "\n")

print(f"\n{'stage':<10} {'seconds':>8}  result")
for name, s in stages.items():
    print(f"{name:<10} {s['seconds']:>8.1f}  {'passed' if s['passed'] else 'FAILED'}")
print(f"{'total':<10} {figures['total_seconds']:>8.1f}")
for kind, run in figures["benchmark"].items():
    if run:
        ours, theirs = run["results"]["minibert"], run["results"]["transformers"]
        mfu = f", MFU {ours['mfu']:.1%} / {theirs['mfu']:.1%}" if ours.get("mfu") else ""
        print(f"{kind}: minibert {ours['tokens_per_s']:,.0f} real tokens/s, transformers {theirs['tokens_per_s']:,.0f}"
              f" ({run['ratio']:.2f}x; padded {run['ratio_padded']:.2f}x){mfu}")
if lecture and "below_plateau" in lecture:
    print(f"lecture: {lecture['steps']} steps in {lecture['seconds']} s, held-out loss {lecture['eval_loss']:.3f} "
          f"against the unigram plateau {lecture['unigram_loss']:.3f}")
print(f"figures: {out / 'gpu_check.json'}")
EOF

end_run "GPU check"
