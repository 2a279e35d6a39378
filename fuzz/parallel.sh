#!/bin/bash
# Run several fuzzing processes of the Python targets at once for SECONDS, each restarted after a crash
# until the time is up, and print the executions per target (the sum of libFuzzer's "Done N runs").
#
#   fuzz/parallel.sh SECONDS CORPUS_ROOT lspci=4 sysfs=12      # CORPUS_ROOT/lspci, CORPUS_ROOT/sysfs
#
# Each process works in WORK/<target>-<i> (WORK defaults to a new temporary directory) and appends to its
# `log` there; crash inputs stay beside it. PYTHON picks the interpreter (default python3). A missing
# CORPUS_ROOT/<target> is made empty, and libFuzzer then starts from an empty input: copy a corpus (or the
# seeds a target writes when run without a directory) into it to start from real captures.
set -u
[ $# -ge 3 ] || { sed -n 2,11p "$0"; exit 2; }
T=$1; CORPUS=$(cd "$2" && pwd); shift 2
HERE=$(cd "$(dirname "$0")" && pwd); PY=${PYTHON:-python3}
WORK=${WORK:-$(mktemp -d -t devlend-fuzz-XXXXXX)}; mkdir -p "$WORK"
end=$(( $(date +%s) + T ))
one() {
  local tgt=$1 i=$2 d=$WORK/$1-$2
  mkdir -p "$d" "$CORPUS/$tgt"; cd "$d" || return
  while left=$(( end - $(date +%s) )); [ $left -ge 20 ]; do
    "$PY" "$HERE/fuzz_$tgt.py" -max_total_time=$left -print_final_stats=1 -seed=$(( i * 7919 + $(date +%s) % 1000 )) \
      "$CORPUS/$tgt" >> log 2>&1
    echo "EXIT $?" >> log
  done
}
targets=()
for spec in "$@"; do
  tgt=${spec%%=*}; n=${spec#*=}
  [ -f "$HERE/fuzz_$tgt.py" ] || { echo "no target fuzz_$tgt.py in $HERE" >&2; exit 2; }
  targets+=("$tgt")
  for i in $(seq 1 "$n"); do one "$tgt" "$i" & done
done
wait
for tgt in "${targets[@]}"; do
  grep -h '^Done' "$WORK/$tgt"-*/log | awk -v t="$tgt" '{n += $2; s += $5} END {printf "%s: %d runs in %d process-seconds\n", t, n, s}'
  ls "$WORK/$tgt"-*/crash-* 2>/dev/null
done
echo "logs in $WORK"
