#!/bin/sh
# Runs every libFuzzer harness built in build-fuzz/fuzz for SECONDS each (default 60), from a
# seed corpus made here (valid files from the project's own generators, the shipped configs,
# and the valid frames/checkpoints/images the harnesses write themselves with FUZZ_SEED_DIR), and
# prints one line per target: executions, seconds, new corpus entries, and any finding. A
# finding (crash, leak, timeout, sanitizer report) leaves its input in build-fuzz/findings and
# fails the run. `make fuzz FUZZ_SECONDS=600` is the long run; CI runs it for a few seconds.
# FUZZ_ONLY="idx json" runs only those targets (two such runs use two cores).
SECONDS_EACH=${1:-60}
OUT=build-fuzz
PY=/usr/bin/python3
CORPUS=$(mktemp -d)
trap 'rm -rf "$CORPUS"' EXIT
mkdir -p "$OUT/findings"

# Seeds. The idx and cifar harnesses gzip their input themselves: they get raw bytes.
mkdir -p "$CORPUS/json" "$CORPUS/config" "$CORPUS/idx" "$CORPUS/cifar" "$CORPUS/checkpoint" "$CORPUS/wire" \
    "$CORPUS/image"
printf '{"a":[1,2.5e3,"x\\u00e9"],"b":{"c":null,"d":true}}' >"$CORPUS/json/object"
printf '{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}' >"$CORPUS/json/entry"
cp configs/*.cfg "$CORPUS/config/"
$PY tests/fixtures/mkdata.py idx "$CORPUS/gen-idx" --train 3 --test 2 >/dev/null
$PY - "$CORPUS" <<'PYEOF'
import gzip, sys
c = sys.argv[1]
img = gzip.open(c + "/gen-idx/train-images-idx3-ubyte.gz").read()
lab = gzip.open(c + "/gen-idx/train-labels-idx1-ubyte.gz").read()
cut = round(len(img) * 255 / (len(img) + len(lab)))
open(c + "/idx/valid", "wb").write(bytes([cut]) + img + lab)
PYEOF
$PY tests/fixtures/mkdata.py cifar10 "$CORPUS/gen-c10" --train 2 --test 1 >/dev/null
$PY tests/fixtures/mkdata.py cifar100 "$CORPUS/gen-c100" --train 2 --test 1 >/dev/null
(printf '\000'; gzip -dc "$CORPUS/gen-c10/cifar-10-binary.tar.gz") >"$CORPUS/cifar/c10"
(printf '\001'; gzip -dc "$CORPUS/gen-c100/cifar-100-binary.tar.gz") >"$CORPUS/cifar/c100"
rm -rf "$CORPUS"/gen-*

failed=0
export LSAN_OPTIONS="suppressions=$(pwd)/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
for bin in "$OUT"/fuzz/fuzz_*; do
    t=${bin##*/fuzz_}
    case " ${FUZZ_ONLY:-$t} " in *" $t "*) ;; *) continue ;; esac
    FUZZ_SEED_DIR="$CORPUS/$t" "$bin" -runs=0 "$CORPUS/$t" >/dev/null 2>&1 # writes its seeds
    log="$OUT/fuzz_$t.log"
    FUZZ_SEED_DIR= "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -artifact_prefix="$OUT/findings/$t-" -print_final_stats=1 \
        "$CORPUS/$t" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    secs=$(sed -n 's/^stat::.*time.*: *//p' "$log" | head -n 1)
    if [ $rc -eq 0 ]; then
        echo "fuzz $t: ${runs:-?} executions in ${SECONDS_EACH} s, no finding"
    else
        failed=$((failed + 1))
        echo "fuzz $t: FINDING (exit $rc), see $log and $OUT/findings/:"
        grep -E "ERROR|SUMMARY" "$log" | head -n 5 | sed 's/^/    /'
    fi
done
[ $failed -eq 0 ]
