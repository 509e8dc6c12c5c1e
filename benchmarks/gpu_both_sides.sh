#!/usr/bin/env bash
# Issue [4/4] §3 on a GPU, in one command of at most 8 minutes: the bidirectionality curve at a scale the
# CPU cannot reach. `minibert experiment bidirectionality` (the code behind notebook 04d's CPU curve)
# pre-trains bert-mini on wikipedia_2015 with ONE objective per call (mlm: BERT's masked LM; ltr: a
# left-to-right LM), 128-token examples, for three seeds, and measures each run at four points along its
# training: held-out fill-in-the-blank and next-token loss, and the part-of-speech probe with each word
# hidden (its tag from the context alone), against the word-identity line. No SST-2 probe: a bare GPU
# machine has no `datasets` package.
# Every curve point goes into OUT/bidirectionality_OBJECTIVE.json as it is measured ("in_progress"), and
# each finished run into its "runs", so a call cut off by its limit still reports; a file already there, or
# --results FILE (copied there), is gone on from: its finished runs are kept, the rest run again. All
# output goes to OUT/both_sides_OBJECTIVE.log. The two calls' files make one curve with
# `minibert.experiments.bidirectionality.merged`, drawn as notebook 04d draws the CPU one
# (`minibert.viz.bidirectionality.plot_curve`).
#
#   bash benchmarks/gpu_both_sides.sh --archive FILE --objective mlm|ltr [--out DIR] [--results FILE]
#                        on the GPU machine; FILE: the data archive of `gpu_course_bert.sh --bundle`
#                        (OUT default: gpu-both-sides/, git-ignored)
#   bash benchmarks/gpu_both_sides.sh --archive FILE --objective mlm --cpu-dry-run --out DIR
#                        tiny sizes on the CPU (tests/test_gpu_runs.py)
set -uo pipefail
cd "$(dirname "$0")/.."

source benchmarks/gpu_common.sh  # $PYTHON, archive_option, stage, start_run, end_run
out=gpu-both-sides archive= mode=gpu objective= results=
while [ $# -gt 0 ]; do
    case $1 in
        --objective) objective=${2:?--objective needs mlm or ltr}; shift 2 ;;
        --results) results=${2:?--results needs a file}; shift 2 ;;
        *) archive_option "$@"; shift $taken ;;
    esac
done
case $objective in
    mlm|ltr) ;;
    *) echo "gpu_both_sides.sh: --objective must be mlm or ltr (one objective per call), got '${objective}'" >&2; exit 2 ;;
esac
start_run "$archive" "both_sides_$objective.log"
file=$out/bidirectionality_$objective.json
if [ -n "$results" ] && [ "$(cd "$(dirname "$results")" && pwd)/$(basename "$results")" != "$file" ]; then
    cp "$results" "$file" || exit  # an earlier call's runs: kept, not run again
fi

if [ $mode = dry ]; then  # the same command at tiny sizes
    export CUDA_VISIBLE_DEVICES=""
    run=(--device cpu --preset bert-tiny --corpus wikitext2_raw/wiki.valid.raw --vocab-size 800 --max-seq-len 32
         --steps 6 --batch-size 8 --curve-points 2 --seeds 0 1 --probe-sentences 40 --eval-examples 16)
    limit=600
else
    run=(--device cuda --preset bert-mini --corpus wikipedia_2015 --vocab-size 4000 --max-seq-len 128
         --steps 2000 --batch-size 128 --curve-points 4 --seeds 0 1 2 --probe-sentences 2000 --eval-examples 512)
    limit=450
fi
stage "$objective" $limit "$PYTHON" -m minibert.cli experiment bidirectionality --objectives "$objective" \
    "${run[@]}" --sst2-train-sentences 0 --out "$file"

"$PYTHON" - "$file" <<'PY' 2>&1 | tee -a "$log"
import json
import sys
from pathlib import Path

path = Path(sys.argv[1])
stored = json.loads(path.read_text()) if path.is_file() else {"runs": [], "references": None}
references = stored["references"] or {}
print(f"word identity (POS of each word from its own form): {references.get('word_identity_pos_accuracy', float('nan')):.1%}; "
      f"hidden-word baselines: left neighbour {references.get('left_neighbour_pos_accuracy', float('nan')):.1%}, "
      f"both neighbours {references.get('neighbours_pos_accuracy', float('nan')):.1%}")
runs = stored["runs"] + ([{"key": stored["in_progress"]["key"] + " (unfinished)", "curve": stored["in_progress"]["curve"]}]
                         if stored.get("in_progress") else [])
for run in runs:
    points = ", ".join(f"{p['step']}: {p['hidden_pos_accuracy']:.1%} / {p['fill_in_the_blank_loss']:.2f}"
                       for p in run.get("curve", []))
    print(f"{run['key']}: hidden-word POS / fill-in-the-blank loss at step {points}")
print(f"{len(stored['runs'])} finished runs in {path}")
PY
end_run "both sides, $objective"
