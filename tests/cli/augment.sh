# data.augment (random-resized-crop, rotation, colour jitter, random erasing) and
# data.mean/std = "auto" end to end on a generated CIFAR-10 archive (tests/fixtures/mkdata.py,
# 64 training images): the same weights, bit for bit, at 1 and 2 instances and after a resume
# with every transform on; the auto statistics equal Python's computation over the archive, are
# printed, put in the start event and the checkpoint, and eval uses the stored values; bad
# values of the new keys are one-line config errors (exit 2).
. tests/cli/lib.sh

PY=/usr/bin/python3
FIX="$TMP/cifar"
$PY tests/fixtures/mkdata.py cifar10 "$FIX" --train 64 --test 32

cat >"$TMP/aug.cfg" <<'CFG'
data = {
  dataset = "cifar10";
  mean = "auto";
  std = "auto";
  hflip = true;
  crop_padding = 2;
  augment = {
    resized_crop = true;
    crop_scale = [0.3, 1.0];
    rotate = 15.0;
    rotate_fill = 128;
    brightness = 0.3;
    contrast = 0.3;
    saturation = 0.3;
    erase = 0.5;
  };
};
model = {
  layers = (
    { type = "conv2d"; out_channels = 4; kernel = 3; padding = 1; },
    { type = "relu"; },
    { type = "maxpool2d"; kernel = 4; },
    { type = "flatten"; },
    { type = "linear"; out_features = 10; }
  );
};
optimizer = { type = "sgd"; lr = 0.05; momentum = 0.9; };
train = { epochs = 2; batch_size = 16; seed = 5; };
dist = { split_invariant = true; };
CFG
CFG="$TMP/aug.cfg"

train() { # DIR [options...]
    dir=$1
    shift
    run "$DTRAIN" train "$CFG" --threads 1 --set data.dir="$FIX" --set checkpoint.dir="$dir" "$@"
}

# ---- the auto statistics ----
train "$TMP/a" --json
expect_rc "augmented run with auto mean/std exits 0" 0
expect_err "data.mean = auto printed in one line" "^dtrain: data.mean = auto: \[[0-9.]+, [0-9.]+, [0-9.]+\] \(over 64 training images\)$"
expect_err "data.std = auto printed in one line" "^dtrain: data.std = auto: \[[0-9.]+, [0-9.]+, [0-9.]+\]"
cat >"$TMP/stats.py" <<'PY'
import gzip, io, json, math, sys, tarfile
# Per-channel mean and population std of x/255 over the archive's training records.
sums = [[0.0, 0.0, 0] for _ in range(3)]
with tarfile.open(fileobj=io.BytesIO(gzip.open(sys.argv[1]).read())) as tar:
    for m in tar.getmembers():
        if "data_batch" not in m.name:
            continue
        b = tar.extractfile(m).read()
        for r in range(0, len(b), 3073):
            for ch in range(3):
                for v in b[r + 1 + ch * 1024:r + 1 + (ch + 1) * 1024]:
                    x = v / 255.0
                    sums[ch][0] += x
                    sums[ch][1] += x * x
                    sums[ch][2] += 1
mean = [s / n for s, q, n in sums]
std = [math.sqrt(q / n - m * m) for (s, q, n), m in zip(sums, mean)]
start = [json.loads(l) for l in open(sys.argv[2]) if '"event":"start"' in l][0]
for got, want in ((start["data_mean"], mean), (start["data_std"], std)):
    assert len(got) == 3 and all(abs(g - w) < 1e-6 for g, w in zip(got, want)), (got, want)
PY
check "auto mean/std in the start event equal Python's over the training records" \
    $PY "$TMP/stats.py" "$FIX/cifar-10-binary.tar.gz" "$TMP/out"
cp "$TMP/out" "$TMP/a.json"
check "the checkpoint stores data_mean and data_std" $PY -c '
import json, struct, sys
b = open(sys.argv[1], "rb").read()
meta = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"]
start = [json.loads(l) for l in open(sys.argv[2]) if "\"start\"" in l][0]
assert json.loads(meta["data_mean"]) == start["data_mean"], meta
assert json.loads(meta["data_std"]) == start["data_std"], meta
assert "mean = \"auto\"" in meta["config"]
' "$TMP/a/last.safetensors" "$TMP/a.json"

run "$DTRAIN" eval "$TMP/a/last.safetensors" --threads 1 --json
expect_rc "eval of an auto checkpoint exits 0" 0
check "eval uses the stored statistics: its loss equals train's final evaluation" $PY -c '
import json, sys
final = [json.loads(l) for l in open(sys.argv[1])][-1]
e = json.loads(open(sys.argv[2]).read().splitlines()[0])
assert e["test_loss"] == final["test_loss"] and e["test_accuracy"] == final["test_accuracy"], (e, final)
' "$TMP/a.json" "$TMP/out"

# A checkpoint trained without a mean (none stored) has nothing to resolve "auto" from.
train "$TMP/plain" --quiet --set 'data.mean=[]' --set 'data.std=[0.25]' --set train.epochs=1
run "$DTRAIN" eval "$TMP/plain/last.safetensors" --threads 1 --config "$CFG" --set data.dir="$FIX" \
    --set 'data.std=[0.25]'
expect_rc "eval --config with auto on a checkpoint without data_mean: exit 3" 3
expect_err "... names the checkpoint and the missing value" "plain/last.safetensors: data.mean = auto but the checkpoint stores no data_mean"
expect_err_lines "... in one line" 1

# ---- the same bits at 1 and 2 instances, and after a resume ----
train "$TMP/two" --quiet --instances 2
expect_rc "2 instances with every augmentation: exit 0" 0
check "1 and 2 instances: bit-identical weights" \
    $PY tests/tools/compare_weights.py "$TMP/a/last.safetensors" "$TMP/two/last.safetensors"
train "$TMP/r1" --quiet --set train.epochs=1
train "$TMP/r2" --quiet --resume "$TMP/r1/last.safetensors"
expect_rc "resumed augmented run exits 0" 0
check "1 epoch + resume = 2 epochs, bit for bit" \
    $PY tests/tools/compare_weights.py "$TMP/a/last.safetensors" "$TMP/r2/last.safetensors"
train "$TMP/noaug" --quiet --set data.augment.resized_crop=false --set data.augment.rotate=0.0 \
    --set data.augment.erase=0.0
if $PY tests/tools/compare_weights.py "$TMP/a/last.safetensors" "$TMP/noaug/last.safetensors" \
    >/dev/null 2>&1; then
    fail "the augmentations change the trajectory" "identical weights"
else pass "the augmentations change the trajectory"; fi

# ---- config errors: one line, exit 2 ----
bad() { # NAME PATTERN --set...
    name=$1
    pattern=$2
    shift 2
    run "$DTRAIN" train "$CFG" --set data.dir="$FIX" --dry-run "$@"
    expect_rc "$name: exit 2" 2
    expect_err "$name: message" "$pattern"
    expect_err_lines "$name: one line" 1
}
bad "crop_scale min above max" "--set data.augment.crop_scale: min 0.9 is above max 0.5" \
    --set 'data.augment.crop_scale=[0.9, 0.5]'
bad "crop_scale with one value" "data.augment.crop_scale: expected \[min, max\], got 1 value" \
    --set 'data.augment.crop_scale=[0.5]'
bad "crop_scale zero" "data.augment.crop_scale: must be" --set 'data.augment.crop_scale=[0.0, 0.5]'
bad "erase_ratio min above max" "data.augment.erase_ratio: min 3 is above max 0.3" \
    --set 'data.augment.erase_ratio=[3.0, 0.3]'
bad "erase probability above 1" "data.augment.erase: must be .*got 1.5" --set data.augment.erase=1.5
bad "negative rotation" "data.augment.rotate: must be .*got -5" --set data.augment.rotate=-5.0
bad "fill beyond a byte" "data.augment.rotate_fill: must be .*got 300" --set data.augment.rotate_fill=300
bad "negative brightness" "data.augment.brightness: must be .*got -0.5" --set data.augment.brightness=-0.5
bad "misspelt key" "data.augment.brightnes: unknown key \(did you mean data.augment.brightness\?\)" \
    --set data.augment.brightnes=0.5
bad "key outside its group" "data.rotate: unknown key \(did you mean data.augment.rotate\?\)" \
    --set data.rotate=5.0
bad "mean neither a list nor auto" "data.mean: expected a list of numbers like \[0.5\] or \"auto\", got a string" \
    --set 'data.mean="automatic"'
sed 's/crop_scale = \[0.3, 1.0\]/crop_scale = [0.8, 0.2]/' "$CFG" >"$TMP/bad.cfg"
run "$DTRAIN" train "$TMP/bad.cfg" --set data.dir="$FIX" --dry-run
expect_rc "bad range in the file: exit 2" 2
expect_err "bad range in the file: file, line and key" "bad.cfg:[0-9]+: data.augment.crop_scale: min 0.8 is above max 0.2"

# saturation needs RGB: refused for gray images, by the dry run as by train
$PY tests/fixtures/mkdata.py idx "$TMP/gray" --train 32 --test 16
run "$DTRAIN" train "$CFG" --set data.dataset=mnist --set data.dir="$TMP/gray" --dry-run --quiet
expect_rc "saturation on gray images: exit 2" 2
expect_err "saturation on gray images: says why" "data.augment.saturation: 0.3 needs RGB images \(3 channels\), the data has 1"
expect_err_lines "saturation on gray images: one line" 1
run "$DTRAIN" train "$CFG" --set data.dataset=mnist --set data.dir="$TMP/gray" --dry-run \
    --set data.augment.saturation=0.0
expect_rc "the rest on gray images: dry run exits 0" 0
expect_err "the dry run computes auto statistics too" "data.mean = auto: \[[0-9.]+\]"

# ---- the reference and the effective config ----
run "$DTRAIN" train --config-reference
for k in resized_crop crop_scale crop_ratio rotate rotate_fill brightness contrast saturation \
    erase erase_scale erase_ratio erase_value; do
    if grep -q "^| \`data.augment.$k\` |" "$TMP/out"; then pass "--config-reference: data.augment.$k"
    else fail "--config-reference: data.augment.$k" "missing"; fi
done
expect_out "--config-reference: data.mean may be auto" "^\| \`data.mean\` .*or \"auto\""
run "$DTRAIN" train "$CFG" --set data.dir="$FIX" --print-config --set data.std=auto
expect_rc "--print-config with auto: exit 0" 0
expect_out "--print-config keeps mean = \"auto\"" '^  mean = "auto";'
expect_out "--print-config writes the augment group" '^    crop_scale = \[ 0.3, 1.0 \];'

finish
