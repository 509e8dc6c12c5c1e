# Sourced by the GPU scripts (benchmarks/gpu_*.sh), from the checkout's root: what they share.
#   $PYTHON       the interpreter: the course's .venv where there is one (course.py makes it), else python3
#   archive_option "$@"   the options of every run on the data archive: --out DIR, --archive FILE,
#                 --cpu-dry-run (mode=dry), -h/--help; an unknown option refused. $taken: the words it used
#   start_run ARCHIVE LOGNAME   what a run on the archive begins with: OUT made absolute, $log (a new
#                 OUT/LOGNAME) and stages.tsv started, $work (a temporary folder, removed at exit) holding the
#                 unpacked data, offline, $tokenizer (the bert-base-uncased vocabulary), the machine in the log
#   stage NAME LIMIT COMMAND...   run COMMAND under LIMIT seconds, its output into $log; its name, exit
#                 status, seconds and limit into $out/stages.tsv, so that a stage that fails or runs out of
#                 time cannot eat the others' time or stop them
#   end_run LABEL the exit status: 1 with the failed stages named, else 0
#   unpack_data ARCHIVE DIR       the xz data archive of `gpu_course_bert.sh --bundle` into DIR/data, and
#                 MINIBERT_DATA_DIR pointed there
#   machine       one line: Python, torch, transformers and the GPU
# The checkout goes on PYTHONPATH, not installed, so a GPU machine's own torch stays as it is.
if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    [ -x .venv/bin/python ] && PYTHON=$PWD/.venv/bin/python
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

archive_option() {
    case $1 in
        --out|--archive) [ $# -ge 2 ] && [ -n "$2" ] || {
            echo "$(basename "$0"): $1 needs $([ "$1" = --out ] && echo a folder || echo a file) (see --help)" >&2
            exit 2; } ;;
    esac
    case $1 in
        --out) out=$2; taken=2 ;;
        --archive) archive=$2; taken=2 ;;
        --cpu-dry-run) mode=dry taken=1 ;;
        -h|--help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "$(basename "$0"): unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
}

stage() {
    local name=$1 limit=$2 start=$EPOCHREALTIME status elapsed
    shift 2
    echo "=== $name (limit ${limit} s): $*" | tee -a "$log"
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$log"
    status=${PIPESTATUS[0]}
    elapsed=$(( (${EPOCHREALTIME/./} - ${start/./}) / 100000 ))  # tenths of a second
    printf '%s\t%s\t%s.%s\t%s\n' "$name" "$status" $((elapsed / 10)) $((elapsed % 10)) "$limit" >> "$out/stages.tsv"
    if [ "$status" = 0 ]; then
        echo "=== $name passed in $((elapsed / 10)).$((elapsed % 10)) s" | tee -a "$log"
    else
        echo "=== $name FAILED (exit $status$([ "$status" = 124 ] && echo ": over its ${limit} s limit")) after" \
             "$((elapsed / 10)).$((elapsed % 10)) s" | tee -a "$log"
    fi
}

unpack_data() {
    [ -f "$1" ] || { echo "$(basename "$0"): no data archive $1 (make one with gpu_course_bert.sh --bundle)" >&2; return 2; }
    tar -C "$2" -xJf "$1" || return
    export MINIBERT_DATA_DIR=$2/data
}

machine() {
    "$PYTHON" -c "import torch, transformers, sys; print('python', sys.version.split()[0], 'torch', torch.__version__,
'transformers', transformers.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')"
}

start_run() {
    [ -n "$1" ] || { echo "$(basename "$0"): --archive FILE is needed (see --help)" >&2; exit 2; }
    mkdir -p "$out" && out=$(cd "$out" && pwd) || exit
    log=$out/$2
    : > "$log"
    : > "$out/stages.tsv"
    work=$(mktemp -d)  # the unpacked data, token caches, checkpoints: none of it comes back
    trap 'rm -rf "$work"' EXIT
    unpack_data "$1" "$work" || exit
    export HF_HUB_OFFLINE=1
    tokenizer=$("$PYTHON" -c "from minibert import data; print(data.path('bert_vocab'))") || exit
    machine | tee -a "$log"
}

end_run() {
    local failed="" name status
    while IFS=$'\t' read -r name status _; do
        [ "$status" = 0 ] || failed+="$name "
    done < "$out/stages.tsv"
    if [ -n "$failed" ]; then
        echo "$1: FAILED stages: $failed(see $log)" | tee -a "$log"
        exit 1
    fi
    echo "$1: every stage passed" | tee -a "$log"
}
