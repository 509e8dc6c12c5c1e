# Sourced by the GPU scripts (benchmarks/gpu_*.sh), from the checkout's root: what they share.
#   $PYTHON       the interpreter: the course's .venv where there is one (course.py makes it), else python3
#   stage NAME LIMIT COMMAND...   run COMMAND under LIMIT seconds, its output into $log; its name, exit
#                 status, seconds and limit into $out/stages.tsv, so that a stage that fails or runs out of
#                 time cannot eat the others' time or stop them
#   unpack_data ARCHIVE DIR       the xz data archive of `gpu_course_bert.sh --bundle` into DIR/data, and
#                 MINIBERT_DATA_DIR pointed there
# The checkout goes on PYTHONPATH, not installed, so a GPU machine's own torch stays as it is.
if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    [ -x .venv/bin/python ] && PYTHON=$PWD/.venv/bin/python
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

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
