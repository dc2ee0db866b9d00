# DTRAIN_FUSE (nn/fusion.h, docs/layers.md): which fusions a model makes, for debugging; a word
# that is not a fusion is a usage error (exit 2) naming it. Training with no fusion gives the
# same weights, bit for bit, as training with every one: a ResNet (relu, add, relu_below,
# bn_grad, dy_extra, skip_in_dy) and the ConvNet (relu, pool, chunks at one thread); and a bf16
# ResNet with and without bf16_store (activations stored as bf16 where the CPU has bf16 tiles)
# and bn_input (a batchnorm -> relu's output never stored, applied by the conv above as it
# reads) and bn_sums (that batchnorm's backward sums taken by the conv above as it stores
# dx) and add_sums (those of a batchnorm -> relu, or of a batchnorm computing the identity add
# -> relu, taken by the conv above the relu) and proj_dx (a projection's input gradient kept at
# the quarter of positions it reaches), and a bf16 ConvNet with and without pool_grad (the pool's backward in the tile conv's)
# and with none (dx_rounded: the emulated first conv's dy rounded by the tile conv above).
. tests/cli/lib.sh

FIX="$TMP/fix"
/usr/bin/python3 tests/fixtures/mkdata.py idx "$FIX" --train 64 --test 16
ARGS="--threads 1 --set data.dir=$FIX --set train.epochs=1 --set train.batch_size=16 --quiet"

run env DTRAIN_FUSE=relu,fast "$DTRAIN" train configs/fashion-convnet.cfg $ARGS
expect_rc "unknown fusion: exit 2" 2
expect_err "unknown fusion: named with the accepted ones" \
    "^dtrain: .*DTRAIN_FUSE: 'fast' is not a fusion \\(expected none, all or a list of: relu, pool,"
expect_err_lines "unknown fusion: one line" 1

# Trains config $1 (label $2, precision $3) with every fusion, once, and with DTRAIN_FUSE=$4:
# the same weights, bit for bit.
same_weights() {
    cfg=$1 label=$2 prec=$3 fuse=$4 all="$TMP/$cfg-$prec-all" other="$TMP/$cfg-$prec-$4"
    if [ ! -f "$all/last.safetensors" ]; then
        run "$DTRAIN" train configs/$cfg.cfg $ARGS --precision $prec --set checkpoint.dir="$all"
        expect_rc "$label, every fusion: exit 0" 0
    fi
    run env DTRAIN_FUSE=$fuse "$DTRAIN" train configs/$cfg.cfg $ARGS --precision $prec \
        --set checkpoint.dir="$other"
    expect_rc "$label, DTRAIN_FUSE=$fuse: exit 0" 0
    check "$label: the same weights with every fusion and with DTRAIN_FUSE=$fuse" \
        /usr/bin/python3 tests/tools/compare_weights.py --rtol 0 "$all/last.safetensors" \
        "$other/last.safetensors"
}

same_weights fashion-convnet fashion-convnet fp32 none
same_weights fashion-resnet fashion-resnet fp32 none
same_weights fashion-resnet "bf16 ResNet" bf16 all,-bf16_store
same_weights fashion-resnet "bf16 ResNet" bf16 all,-bn_input
same_weights fashion-resnet "bf16 ResNet" bf16 all,-bn_sums
same_weights fashion-resnet "bf16 ResNet" bf16 all,-add_sums
same_weights fashion-resnet "bf16 ResNet" bf16 all,-proj_dx
same_weights fashion-convnet "bf16 ConvNet" bf16 all,-pool_grad
same_weights fashion-convnet "bf16 ConvNet" bf16 none

finish
