# Blocks in the config (train/config_blocks.c): the block ResNet-20 is its flat twin bit for bit
# (same dry-run table, same checkpoint tensors after training steps), --print-config keeps the
# blocks, ResNet-56 expands to 195 layers, and every block error is one line with exit 2.
. tests/cli/lib.sh

PY=/usr/bin/python3
$PY tests/fixtures/mkdata.py cifar10 "$TMP/cifar" --train 64 --test 16 >/dev/null
SETS="--set data.dir=$TMP/cifar --threads 1"

table() { sed -n '/^network/,/parameters (/p' "$TMP/out"; }
run "$DTRAIN" train configs/cifar10-resnet20.cfg $SETS --dry-run
expect_rc "block ResNet-20: dry run" 0
table >"$TMP/blocks.table"
expect_out "block ResNet-20: 69 layers, 0.27 M parameters" "^ +69 layers, 272474 parameters"
expect_out "the table names layers by block instance" "^ +29 +add .* +576  layer2\\.0\\.shortcut$"
run "$DTRAIN" train tests/fixtures/cifar10-resnet20-flat.cfg $SETS --dry-run
table >"$TMP/flat.table"
check "block and flat ResNet-20: the same layer table" cmp "$TMP/blocks.table" "$TMP/flat.table"

STEPS="--set train.max_steps=3 --set train.batch_size=16 --quiet"
run "$DTRAIN" train configs/cifar10-resnet20.cfg $SETS $STEPS --set checkpoint.dir="$TMP/rb"
expect_rc "block ResNet-20: 3 steps" 0
run "$DTRAIN" train tests/fixtures/cifar10-resnet20-flat.cfg $SETS $STEPS --set checkpoint.dir="$TMP/rf"
expect_rc "flat ResNet-20: 3 steps" 0
check "block and flat ResNet-20: every tensor the same bits after 3 steps" \
    $PY tests/tools/compare_weights.py --rtol 0 "$TMP/rb/last.safetensors" "$TMP/rf/last.safetensors"
run $PY -c 'import json,struct,sys
raw=open(sys.argv[1],"rb").read(); h=json.loads(raw[8:8+struct.unpack("<Q",raw[:8])[0]])
print(" ".join(sorted(k for k in h if not k.startswith(("optimizer.","__")))))' "$TMP/rb/last.safetensors"
expect_out "checkpoint names: stem, block instances, projection, head" \
    "(^| )conv1\\.weight .*fc\\.bias .*layer1\\.0\\.bn1\\.running_mean .*layer2\\.0\\.shortcut\\.proj\\.0\\.weight .*layer3\\.2\\.conv2\\.weight"

run "$DTRAIN" train configs/cifar10-resnet20.cfg $SETS --print-config
expect_out "--print-config keeps the blocks" '^  blocks = \{'
expect_out "... and the uses as written" '\{ block = "basic"; name = "layer2"; repeat = 2; width = 32; \}'
# the effective text (what checkpoints store) reloads: eval builds the model from it
run "$DTRAIN" eval "$TMP/rb/last.safetensors" --data "$TMP/cifar" --quiet
expect_rc "eval reloads the block config stored in the checkpoint" 0

run "$DTRAIN" train configs/cifar10-resnet56.cfg $SETS --dry-run
expect_rc "ResNet-56: dry run" 0
expect_out "ResNet-56: 195 layers, 0.86 M parameters" "^ +195 layers, 855770 parameters"
expect_out "ResNet-56: the last block is layer3.8" "layer3\\.8\\.conv2$"

# ---- errors: one line, exit 2, the key named ----
bad() { # name edit-sed expected-message
    sed "$2" configs/cifar10-resnet20.cfg >"$TMP/bad.cfg"
    run "$DTRAIN" train "$TMP/bad.cfg" $SETS --dry-run
    expect_rc "$1: exit 2" 2
    expect_err "$1: message" "$3"
    expect_err_lines "$1: one line" 1
}
bad "unknown block" 's/block = "basic"; name = "layer1"/block = "basik"; name = "layer1"/' \
    'model.layers.3.block: unknown block "basik" \(defined: basic\)'
bad "missing parameter" 's/repeat = 3; width = 16;/repeat = 3;/' \
    'model.layers.3: block "basic" needs parameter "width"'
bad "unknown parameter" 's/repeat = 3; width = 16;/repeat = 3; width = 16; depth = 2;/' \
    'model.layers.3.depth: block "basic" has no such parameter \(it takes: width, stride, shortcut\)'
bad "repeat out of range" 's/repeat = 3;/repeat = 0;/' \
    'model.layers.3.repeat: must be between 1 and 512, got 0'
bad "skip leaving its block" 's/from = -6;/from = -7;/' \
    'model.blocks.basic.layers.5.from: -7 leaves its block'
bad "recursion" 's/{ type = "relu"; }$/{ block = "basic"; width = 1; }/' \
    'block "basic" uses itself \(basic -> basic\)'
bad "name clash" 's/name = "fc";/name = "layer1";/' \
    'model.layers.3.name: "layer1.0.conv1" clashes with layer 68.s "layer1"'

finish
