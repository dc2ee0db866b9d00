# train.precision = "bf16" end to end: the ConvNet (and the 28x28 ResNet: stride-2 convs and
# projections) trains on generated data at 1, 2 and 4
# instances (4 oversubscribed on small machines) with the rules fp32 has: with
# dist.split_invariant the same bits for every instance count (and 2 x 2 threads), the same
# bits twice, and
# 1 epoch + resume = 2 epochs bit for bit. --verbose and the dry run name each layer's bf16
# path; the checkpoint keeps fp32 weights and says bf16 in its stored config; eval and predict
# take --precision; bad values are one-line config errors (exit 2); DTRAIN_ISA=amx or
# avx512bf16 where the CPU lacks it is refused in one line (never SIGILL); where the CPU has
# AVX512-BF16, DTRAIN_ISA=avx512bf16 trains on the VDPBF16PS build and names it.
. tests/cli/lib.sh

FIX="$TMP/fix"
/usr/bin/python3 tests/fixtures/mkdata.py idx "$FIX" --train 256 --test 64
CFG=configs/fashion-convnet.cfg
# dropout off and plain SGD, as multi.sh: the check is of the maths, not of chaotic dynamics
COMMON="--set data.dataset=mnist --set data.dir=$FIX --set model.layers.5.p=0
        --set model.layers.9.p=0 --set optimizer.type=sgd --set optimizer.lr=0.01
        --threads 1 --precision bf16 --quiet"
if grep -q "^flags.*\\bamx_bf16\\b" /proc/cpuinfo; then
    PATH_NAME=amx
elif grep -q "^flags.*\\bavx512_bf16\\b" /proc/cpuinfo; then
    PATH_NAME=avx512bf16
else PATH_NAME=reference; fi

# ---- 1, 2, 4 instances: the same bits with split-invariant gradient sums ----
for n in 1 2 4; do
    run "$DTRAIN" train $CFG $COMMON --instances $n --set dist.split_invariant=true \
        --set train.max_steps=8 --set train.batch_size=32 --set checkpoint.dir="$TMP/n$n"
    expect_rc "bf16, $n instance(s): exit 0" 0
done
check "bf16: 1, 2 and 4 instances give the same bits (split_invariant)" \
    /usr/bin/python3 tests/tools/compare_weights.py "$TMP/n1/last.safetensors" \
    "$TMP/n2/last.safetensors" "$TMP/n4/last.safetensors"
run "$DTRAIN" train $CFG $COMMON --instances 2 --set dist.split_invariant=true \
    --set train.max_steps=8 --set train.batch_size=32 --set checkpoint.dir="$TMP/n2b"
check "bf16, 2 instances twice: bit-identical" /usr/bin/python3 tests/tools/compare_weights.py \
    "$TMP/n2/last.safetensors" "$TMP/n2b/last.safetensors"
# 2 threads per instance (4 threads, oversubscribed here): the tile convs' weight gradient in
# its two parts, one per thread (nn/bf16_layers.c, WGRAD_PARTS), gives 1 thread's bits. On amx
# only: the emulated convs on Winograd (every conv of the reference path, the stride-1 ones of
# avx512bf16) sum their weight gradient per thread, as fp32 does
if [ $PATH_NAME = amx ]; then
    run "$DTRAIN" train $CFG $COMMON --instances 2 --set dist.split_invariant=true \
        --set train.max_steps=8 --set train.batch_size=32 --set checkpoint.dir="$TMP/n2t2" \
        --threads 2
    check "bf16, 2 instances x 2 threads: the bits of 2 x 1" /usr/bin/python3 \
        tests/tools/compare_weights.py "$TMP/n2/last.safetensors" "$TMP/n2t2/last.safetensors"
fi
run "$DTRAIN" train $CFG $COMMON --instances 1 --precision fp32 --set dist.split_invariant=true \
    --set train.max_steps=8 --set train.batch_size=32 --set checkpoint.dir="$TMP/fp32"
if /usr/bin/python3 tests/tools/compare_weights.py "$TMP/n1/last.safetensors" \
    "$TMP/fp32/last.safetensors" >/dev/null 2>&1; then
    fail "bf16 differs from fp32" "the same weights: bf16 did not act"
else pass "bf16 differs from fp32"; fi
check "bf16 stays close to fp32 (rtol 0.05 after 8 steps)" /usr/bin/python3 \
    tests/tools/compare_weights.py --rtol 0.05 "$TMP/n1/last.safetensors" "$TMP/fp32/last.safetensors"
if grep -aq 'precision = \\"bf16\\"' "$TMP/n1/last.safetensors"; then
    pass "checkpoint metadata: train.precision = bf16"
else fail "checkpoint metadata: train.precision = bf16" "not in the stored config"; fi

# ---- the same for a ResNet on 28x28 (28 -> 14 -> 7): stride-2 convs and 1x1 projections on
# the tile path where the CPU has one ----
RCFG=configs/fashion-resnet.cfg
# a constant learning rate: one_cycle spans the run, so 1 epoch + resume would not be 2
RCOMMON="--set data.dataset=mnist --set data.dir=$FIX --threads 1 --precision bf16 --quiet
         --set dist.split_invariant=true --set train.batch_size=32
         --set optimizer.schedule.type=constant --set optimizer.lr=0.01"
for n in 1 2 4; do
    run "$DTRAIN" train $RCFG $RCOMMON --instances $n --set train.max_steps=4 \
        --set checkpoint.dir="$TMP/r$n"
    expect_rc "bf16 ResNet, $n instance(s): exit 0" 0
done
check "bf16 ResNet: 1, 2 and 4 instances give the same bits (split_invariant)" \
    /usr/bin/python3 tests/tools/compare_weights.py "$TMP/r1/last.safetensors" \
    "$TMP/r2/last.safetensors" "$TMP/r4/last.safetensors"
run "$DTRAIN" train $RCFG $RCOMMON --instances 2 --set train.epochs=2 --set checkpoint.dir="$TMP/re2"
run "$DTRAIN" train $RCFG $RCOMMON --instances 2 --set train.epochs=1 --set checkpoint.dir="$TMP/re1"
run "$DTRAIN" train $RCFG $RCOMMON --instances 2 --set train.epochs=2 \
    --set checkpoint.dir="$TMP/re1r" --resume "$TMP/re1/last.safetensors"
expect_rc "bf16 ResNet, resumed for epoch 2: exit 0" 0
check "bf16 ResNet: 1 epoch + resume = 2 epochs, bit for bit" /usr/bin/python3 \
    tests/tools/compare_weights.py "$TMP/re2/last.safetensors" "$TMP/re1r/last.safetensors"

# ---- resume: 2 instances, 1 epoch + resume = 2 epochs, bit for bit ----
RESUME="$COMMON --instances 2"
run "$DTRAIN" train $CFG $RESUME --set train.epochs=2 --set checkpoint.dir="$TMP/e2"
expect_rc "bf16, 2 epochs: exit 0" 0
run "$DTRAIN" train $CFG $RESUME --set train.epochs=1 --set checkpoint.dir="$TMP/e1"
run "$DTRAIN" train $CFG $RESUME --set train.epochs=2 --set checkpoint.dir="$TMP/e1r" \
    --resume "$TMP/e1/last.safetensors"
expect_rc "bf16, resumed for epoch 2: exit 0" 0
check "bf16: 1 epoch + resume = 2 epochs, bit for bit" /usr/bin/python3 \
    tests/tools/compare_weights.py "$TMP/e2/last.safetensors" "$TMP/e1r/last.safetensors"

# ---- naming the path ----
run "$DTRAIN" train $CFG --set data.dataset=mnist --set data.dir=$FIX --precision bf16 \
    --set train.max_steps=1 --threads 1 --set checkpoint.dir="$TMP/v" --verbose
expect_rc "--verbose: exit 0" 0
expect_err "--verbose names the bf16 path of each conv2d" "bf16: layer 2 conv2d: $PATH_NAME"
expect_err "--verbose names the bf16 path of each linear" "bf16: layer 10 linear: $PATH_NAME"
run "$DTRAIN" train $CFG --set data.dataset=mnist --set data.dir=$FIX --precision bf16 --dry-run
expect_out "dry run: the bf16 path per layer" "conv2d .*bf16: $PATH_NAME"
run "$DTRAIN" train configs/fashion-resnet.cfg --set data.dataset=mnist --set data.dir=$FIX \
    --precision bf16 --dry-run
expect_out "dry run: a stride-2 conv names its path" "3x3/2.*bf16: $PATH_NAME"
expect_out "dry run: a projection shortcut names its conv's path" "proj .*bf16: $PATH_NAME"
expect_out "dry run: a 1-channel conv names its fallback" "3x3/1.*bf16: .*emulated"
if [ $PATH_NAME != reference ]; then # bf16_store needs the tile kernels
    expect_out "dry run: a conv's output only a batchnorm reads is stored as bf16" \
        "conv2d .*bf16: $PATH_NAME, output stored as bf16"
fi
if [ $PATH_NAME = amx ]; then # avx512bf16 runs the stride-1 convs emulated on Winograd
    expect_out "dry run: a batchnorm -> relu output only a stride-1 conv reads is not stored" \
        "batchnorm2d .*bf16: output not stored, applied by the conv2d above"
fi

# ---- eval and predict take --precision ----
run "$DTRAIN" eval "$TMP/fp32/last.safetensors" --data "$FIX" --precision bf16 --json
expect_rc "eval --precision bf16 of an fp32 checkpoint: exit 0" 0
expect_out "eval --precision bf16: accuracy reported" '"accuracy"'
run "$DTRAIN" eval "$TMP/n1/last.safetensors" --data "$FIX" --verbose
expect_err "eval of a bf16 checkpoint runs bf16 (its stored config)" "bf16: layer 0 conv2d"
run "$DTRAIN" predict "$TMP/n1/last.safetensors" "$FIX" --split test --precision fp32 --top 1
expect_rc "predict --precision fp32 of a bf16 checkpoint: exit 0" 0

# ---- bad values ----
run "$DTRAIN" train $CFG --set data.dir=$FIX --precision fp16 --dry-run
expect_rc "--precision fp16: exit 2" 2
expect_err_lines "--precision fp16: one line" 1
expect_err "--precision fp16: names the key and the values" "train.precision.*fp32, bf16"
sed 's/^train = {/&\n  precision = "half";/' $CFG > "$TMP/bad.cfg"
run "$DTRAIN" train "$TMP/bad.cfg" --set data.dir=$FIX --dry-run
expect_rc "precision = \"half\" in the file: exit 2" 2
expect_err "precision = \"half\": file, line and key" "bad.cfg:[0-9]*.*train.precision"
run "$DTRAIN" train $CFG --set train.precision=1 --dry-run
expect_rc "train.precision = 1: exit 2" 2
run "$DTRAIN" bench $CFG --set data.dir=$FIX --precision fp32,bf12 --grid 1x1 --steps 1
expect_rc "bench --precision fp32,bf12: exit 2" 2
expect_err "bench --precision: names the bad value" "unknown precision 'bf12'"

# ---- DTRAIN_ISA=amx ----
if [ "$PATH_NAME" = amx ]; then
    run env DTRAIN_ISA=amx "$DTRAIN" train $CFG --set data.dataset=mnist --set data.dir=$FIX \
        --precision bf16 --set train.max_steps=2 --threads 1 --set checkpoint.dir="$TMP/amx"
    expect_rc "DTRAIN_ISA=amx on an AMX CPU: exit 0" 0
    run env DTRAIN_ISA=avx512 "$DTRAIN" train $CFG --set data.dataset=mnist \
        --set data.dir=$FIX --precision bf16 --set train.max_steps=1 --threads 1 \
        --set checkpoint.dir="$TMP/avx512" --verbose
    expect_err "DTRAIN_ISA=avx512: bf16 runs emulated" "bf16: layer 0 conv2d: reference \\(emulated"
else
    run env DTRAIN_ISA=amx "$DTRAIN" train $CFG --set data.dir=$FIX --precision bf16 --dry-run
    expect_rc "DTRAIN_ISA=amx without AMX: exit 2" 2
    expect_err_lines "DTRAIN_ISA=amx without AMX: one line" 1
    expect_err "DTRAIN_ISA=amx without AMX: said" "cannot run the amx kernels"
fi

# ---- DTRAIN_ISA=avx512bf16: the tile kernels' VDPBF16PS build ----
if grep -q "^flags.*\\bavx512_bf16\\b" /proc/cpuinfo; then
    run env DTRAIN_ISA=avx512bf16 "$DTRAIN" train $CFG $COMMON --instances 1 \
        --set dist.split_invariant=true --set train.max_steps=8 --set train.batch_size=32 \
        --set checkpoint.dir="$TMP/vdp"
    expect_rc "DTRAIN_ISA=avx512bf16 trains the ConvNet: exit 0" 0
    # the same products in another fp32 order than n1's path: close, not the same bits
    check "avx512bf16: the weights of bf16 on the default path within rtol 1e-3 after 8 steps" \
        /usr/bin/python3 tests/tools/compare_weights.py --rtol 1e-3 "$TMP/n1/last.safetensors" \
        "$TMP/vdp/last.safetensors"
    run env DTRAIN_ISA=avx512bf16 "$DTRAIN" train $CFG $COMMON --instances 1 \
        --set dist.split_invariant=true --set train.max_steps=8 --set train.batch_size=32 \
        --set checkpoint.dir="$TMP/vdp2"
    check "avx512bf16 twice: bit-identical" /usr/bin/python3 tests/tools/compare_weights.py \
        "$TMP/vdp/last.safetensors" "$TMP/vdp2/last.safetensors"
    run env DTRAIN_ISA=avx512bf16 "$DTRAIN" train $CFG --set data.dataset=mnist \
        --set data.dir=$FIX --precision bf16 --dry-run
    expect_out "DTRAIN_ISA=avx512bf16: the dry run names the path" "conv2d .*bf16: avx512bf16"
    expect_out "DTRAIN_ISA=avx512bf16: a stride-1 conv fp32 Winograd takes runs emulated on it" \
        "3x3/1 .*bf16: avx512bf16, emulated on fp32 Winograd"
    expect_out "DTRAIN_ISA=avx512bf16: and for the linear layers" "linear .*bf16: avx512bf16"
    run env DTRAIN_ISA=avx512bf16 "$DTRAIN" bench $CFG --set data.dataset=mnist \
        --set data.dir=$FIX --precision bf16 --grid 1x1 --steps 1
    expect_rc "DTRAIN_ISA=avx512bf16 bench: exit 0" 0
    expect_out "DTRAIN_ISA=avx512bf16: the bench header names the path" \
        "^# dtrain bf16 products \\(train.precision = bf16\\): avx512bf16$"
else
    run env DTRAIN_ISA=avx512bf16 "$DTRAIN" train $CFG --set data.dir=$FIX --precision bf16 \
        --dry-run
    expect_rc "DTRAIN_ISA=avx512bf16 without AVX512-BF16: exit 2" 2
    expect_err_lines "DTRAIN_ISA=avx512bf16 without AVX512-BF16: one line" 1
    expect_err "DTRAIN_ISA=avx512bf16 without AVX512-BF16: said" \
        "cannot run the avx512bf16 kernels"
fi

finish
