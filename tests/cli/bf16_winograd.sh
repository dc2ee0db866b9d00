# train.bf16_winograd = true end to end: with precision bf16 the convs that run emulated on
# Winograd (the stride-1 ones of the avx512bf16 path, every Winograd conv of the reference
# path) multiply in bf16 in its domain. The ConvNet on generated data: the same bits at 1 and
# 2 instances (split_invariant) and twice, 1 epoch + resume = 2 epochs, not bf16's bits but
# close to them; the dry run and --verbose name the mode; the checkpoint stores the key and
# eval runs it; a bad value is a one-line config error (exit 2); with precision fp32 the key
# changes nothing (so one bench sweep can take fp32 and bf16 with it).
. tests/cli/lib.sh

FIX="$TMP/fix"
/usr/bin/python3 tests/fixtures/mkdata.py idx "$FIX" --train 256 --test 64
CFG=configs/fashion-convnet.cfg
COMMON="--set data.dataset=mnist --set data.dir=$FIX --set model.layers.5.p=0
        --set model.layers.9.p=0 --set optimizer.type=sgd --set optimizer.lr=0.01
        --threads 1 --precision bf16 --quiet --set dist.split_invariant=true
        --set train.batch_size=32"
WG="--set train.bf16_winograd=true"
# the amx path runs every conv of 4+ input channels on tiles: no conv takes the mode there
if grep -q "^flags.*\\bamx_bf16\\b" /proc/cpuinfo; then TAKES=no; else TAKES=yes; fi

for n in 1 2; do
    run "$DTRAIN" train $CFG $COMMON $WG --instances $n --set train.max_steps=8 \
        --set checkpoint.dir="$TMP/w$n"
    expect_rc "bf16_winograd, $n instance(s): exit 0" 0
done
check "bf16_winograd: 1 and 2 instances give the same bits (split_invariant)" \
    /usr/bin/python3 tests/tools/compare_weights.py "$TMP/w1/last.safetensors" \
    "$TMP/w2/last.safetensors"
run "$DTRAIN" train $CFG $COMMON $WG --instances 2 --set train.max_steps=8 \
    --set checkpoint.dir="$TMP/w2b"
check "bf16_winograd twice: bit-identical" /usr/bin/python3 tests/tools/compare_weights.py \
    "$TMP/w2/last.safetensors" "$TMP/w2b/last.safetensors"
run "$DTRAIN" train $CFG $COMMON --instances 1 --set train.max_steps=8 \
    --set checkpoint.dir="$TMP/plain"
if [ $TAKES = yes ]; then
    if /usr/bin/python3 tests/tools/compare_weights.py "$TMP/w1/last.safetensors" \
        "$TMP/plain/last.safetensors" >/dev/null 2>&1; then
        fail "bf16_winograd differs from bf16" "the same weights: the products mode did not act"
    else pass "bf16_winograd differs from bf16"; fi
fi
check "bf16_winograd stays close to bf16 (rtol 0.05 after 8 steps)" /usr/bin/python3 \
    tests/tools/compare_weights.py --rtol 0.05 "$TMP/w1/last.safetensors" \
    "$TMP/plain/last.safetensors"
if grep -aq 'bf16_winograd = true' "$TMP/w1/last.safetensors"; then
    pass "checkpoint metadata: train.bf16_winograd = true"
else fail "checkpoint metadata: train.bf16_winograd = true" "not in the stored config"; fi

# ---- resume: 1 epoch + resume = 2 epochs, bit for bit ----
RES="$COMMON $WG --instances 2"
run "$DTRAIN" train $CFG $RES --set train.epochs=2 --set checkpoint.dir="$TMP/e2"
expect_rc "bf16_winograd, 2 epochs: exit 0" 0
run "$DTRAIN" train $CFG $RES --set train.epochs=1 --set checkpoint.dir="$TMP/e1"
run "$DTRAIN" train $CFG $RES --set train.epochs=2 --set checkpoint.dir="$TMP/e1r" \
    --resume "$TMP/e1/last.safetensors"
expect_rc "bf16_winograd, resumed for epoch 2: exit 0" 0
check "bf16_winograd: 1 epoch + resume = 2 epochs, bit for bit" /usr/bin/python3 \
    tests/tools/compare_weights.py "$TMP/e2/last.safetensors" "$TMP/e1r/last.safetensors"

# ---- naming the mode ----
run "$DTRAIN" train $CFG --set data.dataset=mnist --set data.dir=$FIX --precision bf16 $WG \
    --dry-run
expect_rc "bf16_winograd dry run: exit 0" 0
if [ $TAKES = yes ]; then
    expect_out "dry run: the 16 -> 32 conv names the products mode" \
        "3x3/1 .*bf16: .*bf16 products on Winograd"
    run "$DTRAIN" eval "$TMP/w1/last.safetensors" --data "$FIX" --verbose
    expect_rc "eval of a bf16_winograd checkpoint: exit 0" 0
    expect_err "eval runs the checkpoint's mode (its stored config)" \
        "bf16: layer 2 conv2d: .*bf16 products on Winograd"
else
    if grep -q "bf16 products" "$TMP/out"; then
        fail "dry run on amx: no conv takes the products mode" "named in the dry run"
    else pass "dry run on amx: no conv takes the products mode"; fi
fi

# ---- precision fp32: the key changes nothing ----
run "$DTRAIN" train $CFG $COMMON --precision fp32 --instances 1 --set train.max_steps=4 \
    --set checkpoint.dir="$TMP/f32"
run "$DTRAIN" train $CFG $COMMON --precision fp32 $WG --instances 1 --set train.max_steps=4 \
    --set checkpoint.dir="$TMP/f32w"
check "precision fp32: bf16_winograd changes no bit" /usr/bin/python3 \
    tests/tools/compare_weights.py "$TMP/f32/last.safetensors" "$TMP/f32w/last.safetensors"

# ---- bad values ----
run "$DTRAIN" train $CFG --set data.dir=$FIX --set train.bf16_winograd=2 --dry-run
expect_rc "train.bf16_winograd = 2: exit 2" 2
expect_err_lines "train.bf16_winograd = 2: one line" 1
expect_err "train.bf16_winograd = 2: names the key" "train.bf16_winograd"

finish
