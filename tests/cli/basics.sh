# The command line itself: help, version, unknown commands and options.
. tests/cli/lib.sh

run "$DTRAIN" --help
expect_rc "--help exits 0" 0
expect_out "--help lists commands" "train .*config"

run "$DTRAIN" --version
expect_rc "--version exits 0" 0
expect_out "--version prints version" "^dtrain [0-9]+\.[0-9]+\.[0-9]+"

for c in fetch train eval bench; do
    run "$DTRAIN" help $c
    expect_rc "help $c exits 0" 0
    expect_out "help $c shows usage" "usage: dtrain $c"
    run "$DTRAIN" $c --help
    expect_rc "$c --help exits 0" 0
    expect_out "$c --help shows usage" "usage: dtrain $c"
done

run "$DTRAIN"
expect_rc "no command exits 2" 2
run "$DTRAIN" frobnicate
expect_rc "unknown command exits 2" 2
expect_err "unknown command named" "unknown command 'frobnicate'"
run "$DTRAIN" --frobnicate
expect_rc "unknown top-level option exits 2" 2
run "$DTRAIN" help frobnicate
expect_rc "help of unknown command exits 2" 2

# --json: a failure is also an event on stdout, so a pipeline reading stdout alone sees it.
json_error() { # NAME CODE
    check "$1: {\"event\":\"error\",\"exit_code\":$2} on stdout" /usr/bin/python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
o = json.loads(lines[-1])
assert o["event"] == "error" and o["exit_code"] == int(sys.argv[2]) and o["message"], o
' "$TMP/out" "$2"
}
# (checkpoint.dir under $TMP: no test writes runs/ into the source tree)
run "$DTRAIN" train configs/fashion-convnet.cfg --json --set data.dir='"/nonexistent"' --set checkpoint.dir="$TMP/ck"
expect_rc "train --json, missing data exits 3" 3
json_error "train --json, missing data" 3
expect_err "the error still goes to stderr" "file not found"
expect_err "missing data: says how to get it" "file not found; \`dtrain fetch fashion-mnist --dir /nonexistent\` gets it, or point data.dir \(eval: --data DIR\) at a copy$"
run "$DTRAIN" train configs/fashion-convnet.cfg --json --set train.epochs=-1 --set checkpoint.dir="$TMP/ck"
json_error "train --json, bad config value" 2
run "$DTRAIN" eval /nonexistent.safetensors --json
json_error "eval --json, missing checkpoint" 3
run "$DTRAIN" bench configs/fashion-convnet.cfg --json --grid 2y2
json_error "bench --json, bad grid" 2
run "$DTRAIN" train configs/fashion-convnet.cfg --set data.dir='"/nonexistent"' --set checkpoint.dir="$TMP/ck"
check "without --json stdout stays empty" test ! -s "$TMP/out"

finish
