# `dtrain train`: config errors (exit 2, one line naming file:line and key), --set and the
# dedicated flags as seen by --print-config, the shipped configs, usage errors.
. tests/cli/lib.sh

good() { # a small valid config
    cat <<'CFG'
data = { dataset = "mnist"; };
model = {
  layers = (
    { type = "flatten"; },
    { type = "linear"; out_features = 10; }
  );
};
train = {
  epochs = 1;
  batch_size = 32;
};
CFG
}
good >"$TMP/good.cfg"

for c in configs/mnist-convnet.cfg configs/fashion-convnet.cfg configs/cifar10-cnn.cfg; do
    run "$DTRAIN" train "$c" --print-config
    expect_rc "--print-config $c exits 0" 0
    expect_out "--print-config $c shows the model" "layers = \("
    "$DTRAIN" train "$c" --print-config >"$TMP/effective.cfg"
    run "$DTRAIN" train "$TMP/effective.cfg" --print-config
    expect_rc "effective config of $c reloads" 0
done
run "$DTRAIN" train configs/fashion-convnet.cfg --print-config
expect_out "fashion: dataset" 'dataset = "fashion-mnist";'
expect_out "fashion: derived format" 'format = "idx";'
expect_out "fashion: checkpoint dir from the file name" 'dir = "runs/fashion-convnet";'
expect_out "fashion: adadelta lr" 'lr = 0.5;'

# --set and dedicated flags
run "$DTRAIN" train "$TMP/good.cfg" --set train.epochs=7 --set optimizer.type=adam \
    --set data.dir=/srv/x --set model.layers.1.out_features=12 --print-config
expect_rc "--set exits 0" 0
expect_out "--set int visible" "epochs = 7;"
expect_out "--set string visible" 'type = "adam";'
expect_out "--set bare string visible" 'dir = "/srv/x";'
expect_out "--set layer key visible" 'out_features = 12;'
expect_out "adam default lr filled in" 'lr = 0.001;'
run "$DTRAIN" train "$TMP/good.cfg" --instances 4 --threads 3 --log-every 7 --profile --json \
    --print-config
expect_rc "flags exit 0" 0
expect_out "--instances overrides dist.instances" "instances = 4;"
expect_out "--threads overrides dist.threads" "threads = 3;"
expect_out "--log-every overrides log.every" "every = 7;"
expect_out "--profile sets log.profile" "profile = true;"
expect_out "--json sets log.json" "json = true;"
run "$DTRAIN" train "$TMP/good.cfg" --set dist.instances=2 --instances 3 --print-config
expect_out "flags win over --set" "instances = 3;"
DTRAIN_DATA=/srv/datasets run "$DTRAIN" train "$TMP/good.cfg" --print-config
expect_out "DTRAIN_DATA sets the data root" 'dir = "/srv/datasets/mnist";'
run "$DTRAIN" train "$TMP/good.cfg" --print-config
expect_out "data root defaults to data/" 'dir = "data/mnist";'

# bad configs: exit 2, one line, file:line: key
bad() { # NAME SED-EXPRESSION MESSAGE-PATTERN
    good | sed "$2" >"$TMP/bad.cfg"
    run "$DTRAIN" train "$TMP/bad.cfg" --print-config
    expect_rc "$1 exits 2" 2
    expect_err_lines "$1 is one line" 1
    expect_err "$1 message" "$3"
}
bad "unknown key" 's/batch_size/bach_size/' \
    "bad.cfg:10: train.bach_size: unknown key \(did you mean train.batch_size\?\)"
bad "wrong type" 's/batch_size = 32/batch_size = "32"/' \
    "bad.cfg:10: train.batch_size: expected an integer, got a string"
bad "out of range" 's/batch_size = 32/batch_size = 0/' \
    "bad.cfg:10: train.batch_size: must be between 1 and 1048576, got 0"
bad "missing required key" '/epochs/d' "bad.cfg:8: train.epochs: missing required key"
bad "syntax error" 's/epochs = 1;/epochs = ;/' "bad.cfg:9: syntax error"
bad "unknown layer type" 's/"flatten"/"flaten"/' \
    "bad.cfg:4: model.layers.0.type: unknown layer type \"flaten\" \(known: conv2d, linear"
bad "layer key not taken" 's/out_features = 10;/out_features = 10; kernel = 3;/' \
    "bad.cfg:5: model.layers.1.kernel: linear does not take this key \(it takes: out_features, bias\)"
bad "unknown dataset" 's/"mnist"/"minst"/' \
    "bad.cfg:1: data.dataset: unknown dataset \"minst\" \(known: mnist, fashion-mnist"

# Integers are range-checked on the value written, not what libconfig 1.5 wraps it to (32 bits
# without L; hex modulo 2^32, or 2^64 with L); floats on the value stored (a 32-bit float).
bad "integer wrapping 32 bits" 's/epochs = 1;/epochs = 4294967297;/' \
    "bad.cfg:9: train.epochs: must be between 1 and 100000, got 4294967297$"
bad "hex integer wrapping 32 bits" 's/batch_size = 32/batch_size = 0x100000020/' \
    "bad.cfg:10: train.batch_size: must be between 1 and 1048576, got 4294967328$"
bad "64-bit L integer beyond the range" 's/epochs = 1;/epochs = 1; seed = 0x1FFFFFFFFFFFFFFFFL;/' \
    "bad.cfg:9: train.seed: must be between 0 and 9.2e\+18, got 9223372036854775807 \(the 64-bit limit, or beyond\)"
bad "layer integer wrapping 32 bits" 's/out_features = 10;/out_features = 4294967306;/' \
    "bad.cfg:5: model.layers.1.out_features: must be between 1 and 65536, got 4294967306$"
bad "float list element that is 0 as a float" 's/"mnist";/"mnist"; std = [1e-320];/' \
    "bad.cfg:1: data.std: 1e-320 \(element 0\) is not representable as a 32-bit float"
bad "float that rounds out of its range" 's/out_features = 10;/out_features = 10; }, { type = "dropout"; p = 0.999999999;/' \
    "bad.cfg:5: model.layers.2.p: 0.999999999 rounds to 1 as a 32-bit float, which is not in \[0, 1\)"
run "$DTRAIN" train "$TMP/good.cfg" --set train.batch_size=0x100000020 --print-config
expect_rc "hex --set wrapping 32 bits exits 2" 2
expect_err "hex --set wrapping 32 bits named with its value" \
    "^dtrain: error: --set train.batch_size: must be between 1 and 1048576, got 4294967328$"
run "$DTRAIN" train "$TMP/good.cfg" --set train.epochs=-4294967295 --print-config
expect_rc "negative --set wrapping 32 bits exits 2" 2
expect_err "negative --set wrapping 32 bits named" "--set train.epochs: must be between 1 and 100000, got -4294967295$"
run "$DTRAIN" train "$TMP/good.cfg" --set data.std=1e-320 --print-config
expect_rc "std of 1e-320 exits 2" 2
expect_err "std of 1e-320 named" "--set data.std: 1e-320 is not representable as a 32-bit float"
run "$DTRAIN" train "$TMP/good.cfg" --set data.mean=1e39 --print-config
expect_rc "mean beyond a float exits 2" 2
expect_err "mean beyond a float named" "--set data.mean: 1e\+39 is not representable as a 32-bit float"
run "$DTRAIN" train "$TMP/good.cfg" --set data.val_fraction=0.99999999 --print-config
expect_rc "val_fraction rounding to 1 exits 2" 2
expect_err "val_fraction rounding to 1 named" "--set data.val_fraction: 0.99999999 rounds to 1 as a 32-bit float"
run "$DTRAIN" train "$TMP/good.cfg" --set optimizer.lr=1e-50 --print-config
expect_rc "lr that is 0 as a float exits 2 (0 would mean the type's default)" 2
expect_err "lr that is 0 as a float named" "--set optimizer.lr: 1e-50 is not representable"
run "$DTRAIN" train "$TMP/good.cfg" --set optimizer.beta2=0.9999999999 --print-config
expect_err "beta2 rounding to 1 shows the value given" "--set optimizer.beta2: 0.9999999999 rounds to 1"
# values in range and representable: read exactly (64-bit integers without L, hex, doubles)
run "$DTRAIN" train "$TMP/good.cfg" --set train.max_steps=4294967297 --set train.batch_size=0x40 \
    --set optimizer.schedule.div_factor=1e-50 --set optimizer.schedule.pct_start=0.30000000000000004 \
    --set dist.timeout=0.1234567890123 --set checkpoint.every_minutes=1e-300 --print-config
expect_rc "wide integers and doubles in range exit 0" 0
expect_out "64-bit key without L keeps its value" "max_steps = 4294967297L;"
expect_out "hex integer in range read" "batch_size = 64;"
expect_out "one_cycle div_factor kept as a double" "div_factor = 1e-50;"
expect_out "one_cycle pct_start kept as a double" "pct_start = 0.30000000000000004;"
expect_out "dist.timeout kept as a double" "timeout = 0.1234567890123;"
expect_out "checkpoint.every_minutes kept as a double" "every_minutes = 1e-300;"
printf 'data = { dataset = "mnist"; };\n# 4294967297 in a comment\nmodel = { name = "0x100000020 42949672970"; layers = ( { type = "flatten"; }, { type = "linear"; out_features = 10; } ); };\ntrain = { epochs = 2; batch_size = 0x20; seed = 5000000000L; };\n' >"$TMP/literals.cfg"
run "$DTRAIN" train "$TMP/literals.cfg" --print-config
expect_rc "integers in comments and strings left alone" 0
expect_out "a string with digits unchanged" 'name = "0x100000020 42949672970";'
expect_out "hex batch read" "batch_size = 32;"
expect_out "L integer read" "seed = 5000000000L;"

# bad overrides and flags
run "$DTRAIN" train "$TMP/good.cfg" --set train.bach_size=3
expect_rc "bad --set key exits 2" 2
expect_err "bad --set key named" "--set train.bach_size: unknown key"
run "$DTRAIN" train "$TMP/good.cfg" --set train.batch_size=x
expect_rc "bad --set value exits 2" 2
expect_err "bad --set value named" "--set train.batch_size: expected an integer, got 'x'"
run "$DTRAIN" train "$TMP/good.cfg" --set model.layers.5.p=0
expect_rc "bad --set layer index exits 2" 2
expect_err "bad --set layer index named" "--set model.layers.5.p: there is no layer 5"
run "$DTRAIN" train "$TMP/good.cfg" --set novalue
expect_rc "--set without = exits 2" 2
run "$DTRAIN" train "$TMP/good.cfg" --instances 0
expect_rc "--instances 0 exits 2" 2
expect_err "--instances 0 named" "--instances: expected a count from 1 to 1024 or auto, got '0'"
run "$DTRAIN" train "$TMP/good.cfg" --threads x
expect_rc "--threads x exits 2" 2

# usage errors
run "$DTRAIN" train "$TMP/good.cfg" --frobnicate
expect_rc "unknown option exits 2" 2
expect_err_lines "unknown option is one line" 1
expect_err "unknown option named with usage" "unknown option '--frobnicate'; usage: dtrain train CONFIG"
run "$DTRAIN" train "$TMP/good.cfg" --set
expect_rc "missing option value exits 2" 2
expect_err "missing option value named" "option '--set' needs a value"
run "$DTRAIN" train
expect_rc "no config exits 2" 2
expect_err "no config named" "no config file given"
run "$DTRAIN" train "$TMP/good.cfg" "$TMP/good.cfg"
expect_rc "two configs exit 2" 2
run "$DTRAIN" train "$TMP/missing.cfg"
expect_rc "missing config file exits 2 (usage)" 2
expect_err "missing config file named" "missing.cfg"
run "$DTRAIN" train --help
expect_rc "train --help exits 0" 0
for o in --set --instances --threads --print-config --dry-run --quiet --verbose --json \
    --log-every --profile --resume --config-reference --help; do
    expect_out "train --help explains $o" "^ +(-[a-z], )?$o"
done

# docs/config.md carries the generated reference: it must be current
run "$DTRAIN" train --config-reference
expect_rc "--config-reference exits 0" 0
sed -n '/<!-- reference:begin -->/,/<!-- reference:end -->/p' docs/config.md | sed '1d;$d' \
    >"$TMP/doc-reference"
check "docs/config.md reference is current (regenerate with dtrain train --config-reference)" \
    cmp -s "$TMP/out" "$TMP/doc-reference"

# Values that would wrap in a 32-bit int or round to infinity in a float are range errors,
# never a wrapped or infinite setting.
run "$DTRAIN" train configs/fashion-convnet.cfg --set train.batch_size=4294967297 --print-config
expect_rc "batch_size 2^32 + 1: exit 2" 2
expect_err "batch_size 2^32 + 1: not wrapped to 1" "train.batch_size: must be between 1 and 1048576, got 4294967297"
run "$DTRAIN" train configs/fashion-convnet.cfg --set optimizer.lr=1e40 --print-config
expect_rc "lr 1e40 (inf in float): exit 2" 2
expect_err "lr 1e40: a range error" "optimizer.lr: must be between 0 and 10, got 1e\+40"
run "$DTRAIN" train configs/fashion-convnet.cfg --set train.seed=99999999999999999999 --print-config
expect_rc "a seed past 64 bits: exit 2" 2
run "$DTRAIN" train configs/fashion-convnet.cfg --set train.epochs=2.5 --print-config
expect_rc "epochs 2.5: exit 2" 2
expect_err "epochs 2.5: an integer is expected" "train.epochs: expected an integer, got a float"

finish
