# Helpers for CLI tests (sourced). Each check prints "ok NAME" or "not ok NAME: why"; the
# script ends with `finish`, which prints "RESULT passed=N failed=M" for tests/run.sh.
#
#   run CMD...                 runs CMD, capturing $OUT (stdout), $ERR (stderr), $RC
#   expect_rc NAME N           last run exited N
#   expect_out NAME PATTERN    stdout matches the grep -E pattern
#   expect_err NAME PATTERN    stderr matches the grep -E pattern
#   expect_err_lines NAME N    stderr has exactly N lines (one-line errors)
#   check NAME CMD...          CMD succeeds
#   skip NAME WHY              a check this machine cannot run (counted, and said why)
DTRAIN=${DTRAIN_BIN:-./dtrain}
case $DTRAIN in /*) ;; *) DTRAIN="$(pwd)/$DTRAIN" ;; esac
T_PASSED=0
T_FAILED=0
T_SKIPPED=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

pass() { T_PASSED=$((T_PASSED + 1)); echo "ok $1"; }
fail() { T_FAILED=$((T_FAILED + 1)); echo "not ok $1: $2"; }
skip() { T_SKIPPED=$((T_SKIPPED + 1)); echo "skip $1: $2"; }

run() {
    "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}

expect_rc() {
    if [ "$RC" -eq "$2" ]; then pass "$1"; else fail "$1" "exit $RC, expected $2; stderr: $(head -c 300 "$TMP/err")"; fi
}
expect_out() {
    if grep -Eq -- "$2" "$TMP/out"; then pass "$1"; else fail "$1" "stdout lacks /$2/: $(head -c 300 "$TMP/out")"; fi
}
expect_err() {
    if grep -Eq -- "$2" "$TMP/err"; then pass "$1"; else fail "$1" "stderr lacks /$2/: $(head -c 300 "$TMP/err")"; fi
}
expect_err_lines() {
    n=$(wc -l <"$TMP/err")
    if [ "$n" -eq "$2" ]; then pass "$1"; else fail "$1" "stderr has $n lines, expected $2: $(head -c 300 "$TMP/err")"; fi
}
check() {
    name=$1
    shift
    if "$@" >/dev/null 2>&1; then pass "$name"; else fail "$name" "command failed: $*"; fi
}
finish() {
    echo "RESULT passed=$T_PASSED failed=$T_FAILED skipped=$T_SKIPPED"
    [ "$T_FAILED" -eq 0 ]
}
