# DTRAIN_FUSE (nn/fusion.h, docs/layers.md): which fusions a model makes, for debugging; a word
# that is not a fusion is a usage error (exit 2) naming it. Training with no fusion gives the
# same weights, bit for bit, as training with every one: a ResNet (relu, add, relu_below,
# bn_grad, dy_extra, skip_in_dy) and the ConvNet (relu, pool, chunks at one thread); and a bf16
# ResNet with and without bf16_store (activations stored as bf16 where the CPU has bf16 tiles),
# and a bf16 ConvNet with and without pool_grad (the pool's backward in the tile conv's) and with
# none (dx_rounded: the emulated first conv's dy rounded by the tile conv above).
. tests/cli/lib.sh

FIX="$TMP/fix"
/usr/bin/python3 tests/fixtures/mkdata.py idx "$FIX" --train 64 --test 16
ARGS="--threads 1 --set data.dir=$FIX --set train.epochs=1 --set train.batch_size=16 --quiet"

run env DTRAIN_FUSE=relu,fast "$DTRAIN" train configs/fashion-convnet.cfg $ARGS
expect_rc "unknown fusion: exit 2" 2
expect_err "unknown fusion: named with the accepted ones" \
    "^dtrain: .*DTRAIN_FUSE: 'fast' is not a fusion \\(expected none, all or a list of: relu, pool,"
expect_err_lines "unknown fusion: one line" 1

for cfg in fashion-convnet fashion-resnet; do
    run "$DTRAIN" train configs/$cfg.cfg $ARGS --set checkpoint.dir="$TMP/$cfg-all"
    expect_rc "$cfg, every fusion: exit 0" 0
    run env DTRAIN_FUSE=none "$DTRAIN" train configs/$cfg.cfg $ARGS \
        --set checkpoint.dir="$TMP/$cfg-none"
    expect_rc "$cfg, no fusion: exit 0" 0
    check "$cfg: the same weights with and without fusion" /usr/bin/python3 \
        tests/tools/compare_weights.py --rtol 0 "$TMP/$cfg-all/last.safetensors" \
        "$TMP/$cfg-none/last.safetensors"
done

run "$DTRAIN" train configs/fashion-resnet.cfg $ARGS --precision bf16 \
    --set checkpoint.dir="$TMP/bf16-all"
expect_rc "bf16 ResNet, every fusion: exit 0" 0
run env DTRAIN_FUSE=all,-bf16_store "$DTRAIN" train configs/fashion-resnet.cfg $ARGS \
    --precision bf16 --set checkpoint.dir="$TMP/bf16-nostore"
expect_rc "bf16 ResNet, no bf16_store: exit 0" 0
check "bf16 ResNet: the same weights with and without bf16_store" /usr/bin/python3 \
    tests/tools/compare_weights.py --rtol 0 "$TMP/bf16-all/last.safetensors" \
    "$TMP/bf16-nostore/last.safetensors"

run "$DTRAIN" train configs/fashion-convnet.cfg $ARGS --precision bf16 \
    --set checkpoint.dir="$TMP/bf16-convnet-all"
expect_rc "bf16 ConvNet, every fusion: exit 0" 0
run env DTRAIN_FUSE=all,-pool_grad "$DTRAIN" train configs/fashion-convnet.cfg $ARGS \
    --precision bf16 --set checkpoint.dir="$TMP/bf16-convnet-nopoolgrad"
expect_rc "bf16 ConvNet, no pool_grad: exit 0" 0
check "bf16 ConvNet: the same weights with and without pool_grad" /usr/bin/python3 \
    tests/tools/compare_weights.py --rtol 0 "$TMP/bf16-convnet-all/last.safetensors" \
    "$TMP/bf16-convnet-nopoolgrad/last.safetensors"
run env DTRAIN_FUSE=none "$DTRAIN" train configs/fashion-convnet.cfg $ARGS --precision bf16 \
    --set checkpoint.dir="$TMP/bf16-convnet-none"
expect_rc "bf16 ConvNet, no fusion: exit 0" 0
check "bf16 ConvNet: the same weights with and without fusion (dx_rounded among them)" \
    /usr/bin/python3 tests/tools/compare_weights.py --rtol 0 \
    "$TMP/bf16-convnet-all/last.safetensors" "$TMP/bf16-convnet-none/last.safetensors"

finish
