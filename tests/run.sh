#!/bin/sh
# Runs every test and prints one summary line "N passed, N failed".
#   unit:   each build/tests/test_* binary (cmocka); its "[  PASSED  ] N test(s)" and
#           "[  FAILED  ] N test(s)" lines are counted.
#           The kernel tests run again with DTRAIN_ISA=generic and avx2 where the CPU can.
#   cli:    each tests/cli/*.sh (skipped with UNIT_ONLY=1, but for the scripts named in
#           CLI_ALSO, e.g. CLI_ALSO=predict); they print
#           "RESULT passed=N failed=M skipped=K" through tests/cli/lib.sh.
# The PyTorch parity checks are unit tests (test_parity_*), which run tests/parity/*.py.
# A binary or script that crashes or prints no result counts as one failure.
BUILD=${BUILD:-build}
export DTRAIN_BIN=${DTRAIN_BIN:-./dtrain}
passed=0
failed=0
skipped=0
failures=""
log_dir=$(mktemp -d)

count_unit() {
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -n 1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -n 1)
    echo "${p:-0} ${f:-0}"
}

run_one() { # name kind command...
    name=$1 kind=$2
    shift 2
    out="$log_dir/$(basename "$name").log"
    "$@" >"$out" 2>&1
    rc=$?
    if [ "$kind" = unit ]; then
        set -- $(count_unit "$out")
    else
        line=$(grep '^RESULT passed=' "$out" | tail -n 1)
        set -- $(echo "$line" | sed 's/RESULT passed=\([0-9]*\) failed=\([0-9]*\)\( skipped=\([0-9]*\)\)\{0,1\}/\1 \2 \4/')
    fi
    p=${1:-0} f=${2:-0} s=${3:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ]; then f=1; fi
    skipped=$((skipped + s))
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$f" -gt 0 ]; then
        failures="$failures $name"
        echo "FAIL $name (exit $rc):"
        grep -E 'FAIL|ERROR|error|not ok|Assert' "$out" | head -n 30 | sed 's/^/    /'
    else
        echo "ok   $name ($p)"
        [ "$s" -gt 0 ] && grep '^skip ' "$out" | sed 's/^/    /'
    fi
}

for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$t" unit "$t"
done
# The kernel tests again under every other instruction-set path this CPU runs (nn/kernels/isa.h):
# the default run above took the widest one.
for isa in generic avx2; do
    DTRAIN_ISA=$isa "$DTRAIN_BIN" --version >/dev/null 2>&1 || continue
    for t in conv_direct conv_winograd conv_layer fusion gradcheck parity_layers grad_tree optim parity_optim \
             bf16_loops allreduce_bf16; do
        [ -x "$BUILD/tests/test_$t" ] || continue
        run_one "test_$t.$isa" unit env DTRAIN_ISA=$isa "$BUILD/tests/test_$t"
    done
done
if [ -z "$UNIT_ONLY" ]; then
    for t in tests/cli/*.sh; do
        case $t in */lib.sh) continue ;; esac
        [ -f "$t" ] || continue
        run_one "$t" cli sh "$t"
    done
else
    for n in $CLI_ALSO; do
        run_one "tests/cli/$n.sh" cli sh "tests/cli/$n.sh"
    done
fi
rm -rf "$log_dir"
[ -n "$failures" ] && echo "failing:$failures"
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
