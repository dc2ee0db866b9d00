# The kernel instruction set: chosen from cpuid by default, forced with DTRAIN_ISA, named by
# --verbose; an unknown name or one this CPU lacks is a usage error (exit 2) naming the value.
# Trained weights agree between every path this CPU runs.
. tests/cli/lib.sh

FIX="$TMP/fix"
/usr/bin/python3 tests/fixtures/mkdata.py idx "$FIX" --train 128 --test 32
ARGS="configs/fashion-convnet.cfg --threads 1 --set data.dir=$FIX --set train.epochs=1 --verbose"

run env DTRAIN_ISA=sse9 "$DTRAIN" train $ARGS
expect_rc "unknown name: exit 2" 2
expect_err "unknown name: named with the accepted ones" \
    "^dtrain: DTRAIN_ISA: unknown instruction set 'sse9' \\(expected generic, avx2, avx512, avx512bf16 or amx\\)"

run env DTRAIN_ISA=generic "$DTRAIN" train $ARGS --set checkpoint.dir="$TMP/generic"
expect_rc "generic: exit 0" 0
expect_err "generic: named in --verbose" "^dtrain: kernels: generic instruction set"

for isa in avx2 avx512; do
    if grep -q "^flags.*\\b$isa\\(f\\)\\{0,1\\}\\b" /proc/cpuinfo; then
        run env DTRAIN_ISA=$isa "$DTRAIN" train $ARGS --set checkpoint.dir="$TMP/$isa"
        expect_rc "$isa: exit 0" 0
        expect_err "$isa: named in --verbose" "^dtrain: kernels: $isa instruction set"
        check "$isa: the same weights as generic within float rounding" /usr/bin/python3 \
            tests/tools/compare_weights.py --rtol 1e-3 "$TMP/generic/last.safetensors" \
            "$TMP/$isa/last.safetensors"
    else
        run env DTRAIN_ISA=$isa "$DTRAIN" train $ARGS
        expect_rc "$isa unsupported here: exit 2" 2
        expect_err "$isa unsupported here: said" "this CPU cannot run the $isa kernels"
    fi
done

finish
