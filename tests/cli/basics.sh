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

finish
