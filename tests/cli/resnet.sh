# Residual networks against PyTorch (tests/parity/check_resnet.py, the module of docs/resnet.md):
# one SGD step of a small net with every new layer kind (gelu, identity and projection adds,
# concat, global_avgpool) and of ResNet-20, compared as loss, gradients and batchnorm statistics;
# the dry run's table and parameter count; and config errors naming line and shapes.
. tests/cli/lib.sh

PY=/usr/bin/python3
# Random pixels: structured test images tie at ReLU's kink, where a rounding bit decides.
$PY - "$TMP/rnd" <<'PYEOF'
import gzip, struct, sys, os
import numpy as np
d = sys.argv[1]; os.makedirs(d)
rng = np.random.default_rng(5)
for split, n in (("train", 64), ("t10k", 16)):
    x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    y = rng.integers(0, 10, n, dtype=np.uint8)
    open(d + "/%s-images-idx3-ubyte.gz" % split, "wb").write(
        gzip.compress(struct.pack(">IIII", 0x803, n, 28, 28) + x.tobytes()))
    open(d + "/%s-labels-idx1-ubyte.gz" % split, "wb").write(
        gzip.compress(struct.pack(">II", 0x801, n) + y.tobytes()))
PYEOF

cat >"$TMP/small.cfg" <<'EOF2'
data = { dataset = "fashion-mnist"; };
model = { layers = (
  { type = "conv2d"; out_channels = 8; kernel = 3; padding = 1; bias = false; },
  { type = "batchnorm2d"; },
  { type = "relu"; },
  { type = "conv2d"; out_channels = 8; kernel = 3; padding = 1; },
  { type = "batchnorm2d"; },
  { type = "gelu"; },
  { type = "conv2d"; out_channels = 8; kernel = 3; padding = 1; },
  { type = "add"; from = -5; },
  { type = "relu"; },
  { type = "conv2d"; out_channels = 16; kernel = 3; stride = 2; padding = 1; },
  { type = "batchnorm2d"; },
  { type = "relu"; },
  { type = "add"; from = -4; shortcut = "projection"; },
  { type = "add"; from = -3; shortcut = "projection"; batchnorm = false; },
  { type = "concat"; from = -3; },
  { type = "gelu"; },
  { type = "global_avgpool"; },
  { type = "flatten"; },
  { type = "linear"; out_features = 10; } ); };
loss = { type = "cross_entropy"; };
optimizer = { type = "sgd"; lr = 1e-30; momentum = 0.9; };
train = { epochs = 1; batch_size = 64; };
EOF2
# One step on the whole set as one batch, an lr too small to move a weight: the checkpoint holds
# the initial weights and, as SGD's first momentum buffer, the gradient.
STEP="--threads 1 --set data.dir=$TMP/rnd --set train.epochs=1 --set train.batch_size=64 --json --quiet"
run "$DTRAIN" train "$TMP/small.cfg" $STEP --set checkpoint.dir="$TMP/small"
expect_rc "small residual net: one step" 0
cp "$TMP/out" "$TMP/small.json"
run $PY tests/parity/check_resnet.py "$TMP/rnd" small "$TMP/small/last.safetensors" "$TMP/small.json"
expect_rc "small net (gelu, adds, projections, concat, global_avgpool) = PyTorch" 0
echo "    $OUT"

run "$DTRAIN" train configs/cifar10-resnet20.cfg $STEP --set data.dataset=fashion-mnist \
    --set optimizer.lr=1e-30 --set optimizer.nesterov=false --set optimizer.weight_decay=0 \
    --set 'data.mean=[0.0]' --set 'data.std=[1.0]' --set data.hflip=false \
    --set data.crop_padding=0 --set optimizer.schedule.type=constant \
    --set optimizer.schedule.warmup_epochs=0 --set checkpoint.dir="$TMP/r20"
expect_rc "ResNet-20: one step" 0
cp "$TMP/out" "$TMP/r20.json"
run $PY tests/parity/check_resnet.py "$TMP/rnd" resnet20 "$TMP/r20/last.safetensors" "$TMP/r20.json"
expect_rc "ResNet-20: loads strictly into docs/resnet.md's module and matches it" 0
echo "    $OUT"

# ---- the dry run and the configs ----
$PY tests/fixtures/mkdata.py cifar10 "$TMP/cifar" --train 64 --test 16
run "$DTRAIN" train configs/cifar10-resnet20.cfg --set data.dir="$TMP/cifar" --dry-run
expect_rc "ResNet-20 dry run: exit 0" 0
expect_out "ResNet-20: 0.27 M parameters" "^ +69 layers, 272474 parameters \\(0.27 M"
expect_out "ResNet-20: the projection shortcut in the table" "^ +29 +add +from -6 \\(layer 23\\) proj +32x16x16 +576  layer2.0.shortcut$"
run "$DTRAIN" train configs/fashion-resnet.cfg --set data.dir="$TMP/rnd" --set train.max_steps=2 \
    --set checkpoint.dir="$TMP/fr" --quiet
expect_rc "configs/fashion-resnet.cfg trains" 0

# ---- synchronized batchnorm: 1, 2 and 4 instances compute the global batch's statistics ----
# One ResNet-20 step at a global batch of 128 (random CIFAR-format pixels): the batchnorm
# running statistics are the same bits whatever the instance count (the statistics' reductions
# are exact and every conv computes each sample alone, so the forward does not see the split),
# and per_instance statistics, which see 64 or 32 samples, differ (3.9e-2).
$PY tests/fixtures/mkdata.py cifar10 "$TMP/c128" --train 256 --test 16
for n in 1 2 4; do
    run "$DTRAIN" train configs/cifar10-resnet20.cfg --set data.dir="$TMP/c128" --threads 1 \
        --instances $n --set train.max_steps=1 --set checkpoint.dir="$TMP/sync$n" --quiet
    expect_rc "ResNet-20, $n instance(s), one step: exit 0" 0
done
run "$DTRAIN" train configs/cifar10-resnet20.cfg --set data.dir="$TMP/c128" --threads 1 \
    --instances 2 --set train.max_steps=1 --set dist.batchnorm='"per_instance"' \
    --set checkpoint.dir="$TMP/per2" --quiet
expect_rc "ResNet-20, per_instance batchnorm: exit 0" 0
check "sync batchnorm: 1, 2 and 4 instances give the same running statistics, bit for bit" \
    $PY tests/tools/compare_weights.py --rtol 0 --only running "$TMP/sync1/last.safetensors" \
    "$TMP/sync2/last.safetensors" "$TMP/sync4/last.safetensors"
run $PY tests/tools/compare_weights.py --rtol 1e-3 --only running "$TMP/sync1/last.safetensors" \
    "$TMP/per2/last.safetensors"
expect_rc "per_instance batchnorm: its statistics differ from the global batch's" 1

# ---- dist.split_invariant: 1, 2 and 4 instances follow one trajectory, bit for bit ----
# Without it the weight gradients are summed per instance, then across instances, so their
# rounding depends on the split and ResNet-20 amplifies it (1e-2 in a batchnorm bias after two
# steps, docs/resnet.md). With it they are summed over eighths of the global batch in a fixed
# tree that the shm all-reduce completes: every weight and statistic the same after 20 steps
# (augmentation on: flips and crops are keyed by sample, not by rank).
for n in 1 2 4; do
    run "$DTRAIN" train configs/cifar10-resnet20.cfg --set data.dir="$TMP/c128" --threads 1 \
        --instances $n --set train.max_steps=20 --set dist.split_invariant=true --json \
        --set checkpoint.dir="$TMP/inv$n" --quiet
    expect_rc "ResNet-20, $n instance(s), 20 split-invariant steps: exit 0" 0
done
expect_out "the final event records split_invariant" '"event":"final".*"split_invariant":true'
check "split_invariant: 1, 2 and 4 instances, every tensor the same bits after 20 steps" \
    $PY tests/tools/compare_weights.py --rtol 0 "$TMP/inv1/last.safetensors" \
    "$TMP/inv2/last.safetensors" "$TMP/inv4/last.safetensors"
# the TCP ring sums more than 2 ranks in its own order: said, not silently broken
run "$DTRAIN" train configs/cifar10-resnet20.cfg --set data.dir="$TMP/c128" --threads 1 \
    --instances 4 --backend tcp --set train.max_steps=1 --set dist.split_invariant=true \
    --set checkpoint.dir="$TMP/inv-tcp"
expect_rc "split_invariant over the tcp backend: exit 0" 0
expect_err "... warns that the tcp backend does not keep the bits" \
    "warning: dist.split_invariant: the tcp backend does not sum 4 ranks in a fixed tree"

# ---- errors: the config line and both shapes ----
run "$DTRAIN" train "$TMP/small.cfg" --set data.dir="$TMP/rnd" --dry-run \
    --set 'model.layers.12.shortcut="identity"'
expect_rc "identity shortcut over a shape change: exit 2" 2
expect_err "... names the layer, the line and both shapes" "layer 12 \\(add, config line 15\\): shortcut from layer 8: its output is 8x28x28 but this layer's input is 16x14x14"
run "$DTRAIN" train "$TMP/small.cfg" --set data.dir="$TMP/rnd" --dry-run --set 'model.layers.14.from=-16'
expect_rc "from before the model's input: exit 2" 2
expect_err "... says the range" "from = -16: expected -2 \\(two layers back\\) to -15 \\(the model's input\\)"
run "$DTRAIN" train "$TMP/small.cfg" --set data.dir="$TMP/rnd" --dry-run --set 'model.layers.14.from=-1'
expect_rc "from = -1 (this layer's own input): exit 2" 2
run "$DTRAIN" train "$TMP/small.cfg" --set data.dir="$TMP/rnd" --dry-run --set 'model.layers.14.from=-6'
expect_rc "concat of different heights: exit 2" 2
expect_err "... says both shapes" "cannot concatenate the output of layer 8 \\(8x28x28\\) with this layer's input \\(16x14x14\\)"
run "$DTRAIN" train "$TMP/small.cfg" --set data.dir="$TMP/rnd" --dry-run --set 'model.layers.7.shortcut="zero"'
expect_rc "unknown shortcut: exit 2" 2

finish
