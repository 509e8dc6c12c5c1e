#!/usr/bin/env bash
# The course's own BERT, pre-trained from scratch on a GPU (issue [4/4] §2), in one command of at most
# 8 minutes: `minibert pretrain` — the code a student runs for three CPU minutes in notebook 04 —
# trains bert-mini (4 layers, 256 wide, the bert-base-uncased vocabulary) on wikipedia_2015 with
# masked LM + NSP on pairs of up to 128 tokens, then `minibert export` writes it in int8 and scores it
# on held-out WikiText-2 test. Three stages:
#   timing    a 30-second run (it also tokenises the 100 shards into the token cache) measures the
#             steps a second this machine gives, so that the real run's learning-rate schedule ends
#             where its minutes do (a run stopped by --time-budget would end at a high learning rate)
#   train     that many steps from scratch (MINUTES of training, default 4.5), held-out check at the end
#   export    int8 folder with its card (held-out fill-in-the-blank, NSP, the lectures' blanks), packed
#             as OUT/course_bert.tar with the run's history.json and recipe.json beside it
# Every line of output goes to OUT/course_bert.log as it comes, so a timeout still reports.
# A later loan continues from the exported weights (--init-from FOLDER or its .tar, peak lr 5e-4, as
# minilm-wiki's second stage did): the optimizer's state (3 x 45 MB) is more than a loan brings back.
# --steps N skips the timing run. The first H200 loan's figures: benchmarks/RESULTS.md.
#
#   bash benchmarks/gpu_course_bert.sh --bundle FILE          beforehand, where the data mirror
#                                     (MINIBERT_DATA_MIRROR) or the internet is: the data it reads as
#                                     one xz archive (about 30 MB: wikipedia_2015, WikiText-2 raw,
#                                     SQuAD v1.1 dev for the held-out titles, bert-base-uncased's vocab,
#                                     UD English EWT, SST-2), which the other gpu_*.sh scripts read too
#   bash benchmarks/gpu_course_bert.sh --archive FILE [--out DIR] [--minutes M | --steps N] [--init-from M]
#                                     on the GPU machine (OUT default: gpu-course-bert/, git-ignored)
#   bash benchmarks/gpu_course_bert.sh --archive FILE --cpu-dry-run --out DIR     tiny sizes on the CPU
#                                     (tests/test_gpu_runs.py)
set -uo pipefail
cd "$(dirname "$0")/.."

source benchmarks/gpu_common.sh  # $PYTHON, archive_option, unpack_data, machine
out=gpu-course-bert archive= mode=train minutes=4.5 steps= init=
while [ $# -gt 0 ]; do
    case $1 in
        --minutes) minutes=${2:?--minutes needs a number}; shift 2 ;;
        --steps) steps=${2:?--steps needs a number}; shift 2 ;;
        --init-from) init=${2:?--init-from needs a model folder or .tar of one}; shift 2 ;;
        --bundle) mode=bundle; archive=${2:?--bundle needs the archive to write}; shift 2 ;;
        *) archive_option "$@"; shift $taken ;;
    esac
done
# TOKENIZERS_PARALLELISM left unset: the fast tokenizer then uses every core until a process forks
# (the 100 shards took 62-72 s on 16 cores with it set to false, 15 s unset)
unset TOKENIZERS_PARALLELISM
work=$(mktemp -d)  # unpacked data, token cache, checkpoints: none of it comes back
trap 'rm -rf "$work"' EXIT
datasets=(wikipedia_2015 wikitext2_raw squad_v1.1 bert_vocab ud_english_ewt sst2)

if [ $mode = bundle ]; then  # the project's own data layer: verified copies from the mirror, or downloads
    [ -e "$archive" ] && { echo "gpu_course_bert.sh: $archive exists; give a new file name" >&2; exit 2; }
    "$PYTHON" -m minibert.data fetch "${datasets[@]}" --dest "$work/data" > /dev/null || exit
    tar -C "$work" -chf - data | xz -T0 -6 > "$archive.partial" && mv "$archive.partial" "$archive" || exit
    du -h "$archive"
    exit 0
fi
[ -f "$archive" ] || { echo "gpu_course_bert.sh: no data archive (--archive FILE; make one with --bundle)" >&2; exit 2; }
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit
exec > >(tee "$out/course_bert.log") 2>&1
rm -f "$out/history.json" "$out/recipe.json" "$out/course_bert.tar"  # an earlier run's: not this one's
unpack_data "$archive" "$work" || exit
export HF_HUB_OFFLINE=1
tokenizer=$("$PYTHON" -c "from minibert import data; print(data.path('bert_vocab'))") || exit

if [ $mode = dry ]; then  # the same commands at tiny sizes, WikiText-2 valid for the corpus
    export CUDA_VISIBLE_DEVICES=""
    run=(--device cpu --precision fp32 --corpus wikitext2_raw/wiki.valid.raw --batch-size 8 --max-seq-len 32
         --unpadded --num-workers 1)
    timing_s=10 minutes=0.2
else
    # batches made by 6 worker processes: the first loan's host, making them itself, set the pace (13 steps/s)
    run=(--device cuda --precision bf16 --corpus wikipedia_2015 --batch-size 512 --max-seq-len 128
         --unpadded --num-workers 6)
    timing_s=30
fi
model=(--preset bert-mini --tokenizer "$tokenizer" --objective nsp --dropout 0.0 --seed 0)
lr=0.001
if [ -n "$init" ]; then  # a later stage: go on from an earlier stage's export, at a lower peak rate
    if [[ $init == *.tar ]]; then mkdir "$work/init" && tar -C "$work/init" -xf "$init" && init=$(echo "$work"/init/*) || exit; fi
    model=(--init-from "$init" --objective nsp --dropout 0.0 --seed 1) lr=0.0005
fi
machine

if [ -z "$steps" ]; then
echo "== timing: ${timing_s} s of training"
start=$SECONDS
"$PYTHON" -m minibert.cli pretrain "${model[@]}" "${run[@]}" --steps 1000000 --time-budget $timing_s \
    --eval-corpus none --out "$work/timing" 2>&1 | tr '\r' '\n' | grep -v '^training: ' || exit
steps=$("$PYTHON" -c "import json, sys; r = json.load(open(sys.argv[1])); print(max(10, int(r['step'] / r['seconds_this_run'] * 60 * $minutes)))" "$work/timing/recipe.json") || exit
echo "timing: $(( SECONDS - start )) s in all; $steps steps fill $minutes minutes"
fi

echo "== train: $steps steps"
start=$SECONDS
"$PYTHON" -m minibert.cli pretrain "${model[@]}" "${run[@]}" --steps "$steps" --lr $lr --warmup-ratio 0.05 \
    --eval-corpus wikitext2_raw/wiki.test.raw --eval-every "$steps" --save-every "$steps" \
    --out "$work/run" 2>&1 | tr '\r' '\n' | grep -v '^training: ' || exit
echo "train: $(( SECONDS - start )) s"
cp "$work/run/history.json" "$work/run/recipe.json" "$out/"

echo "== export"
start=$SECONDS
"$PYTHON" -m minibert.cli export "$work/run" --out "$work/course-bert" --dtype int8 2>&1 | tr '\r' '\n' | grep -v '%|' || exit
tar -C "$work" -cf "$out/course_bert.tar" course-bert || exit
echo "export: $(( SECONDS - start )) s"
cat "$work/course-bert/held_out.json"
