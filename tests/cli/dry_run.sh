# `dtrain train --dry-run`: validates, reads the datasets, builds the model and prints a
# summary (or one JSON object with --json) without training. Uses Debian's real Fashion-MNIST
# and a generated CIFAR-10-format archive (tests/fixtures/mkdata.py).
. tests/cli/lib.sh

FASHION=/usr/share/datasets/fashion-mnist

run "$DTRAIN" train configs/fashion-convnet.cfg --set data.dir=$FASHION --dry-run
expect_rc "fashion dry-run exits 0" 0
expect_out "fashion: files read" "read +$FASHION/train-images-idx3-ubyte.gz"
expect_out "fashion: test files read" "$FASHION/t10k-labels-idx1-ubyte.gz"
expect_out "fashion: train count and shape" "^train +60000 samples, 1x28x28"
expect_out "fashion: test count" "^test +10000 samples, 1x28x28"
expect_out "fashion: model checked" "^model +12 layers, 1x28x28 -> 10 outputs, 300426 parameters"
expect_out "fashion: class names from the registry" "^ +9 +Ankle boot +6000 +1000$"
expect_out "fashion: network table, first conv" "^ +0 +conv2d +16 3x3/1 +16x26x26 +160$"
expect_out "fashion: network table, flatten" "^ +6 +flatten +4608 +0$"
expect_out "fashion: network table, largest layer" "^ +7 +linear +64 +64 +294976$"
expect_out "fashion: network totals" "^ +12 layers, 300426 parameters \(0.30 M"
rows=$(grep -Ec '^ +[0-9] +.* 6000 +1000$' "$TMP/out")
if [ "$rows" -eq 10 ]; then pass "fashion: 6000/1000 in each of 10 classes"; else
    fail "fashion: 6000/1000 in each of 10 classes" "$rows rows"; fi

run "$DTRAIN" train configs/fashion-convnet.cfg --set data.dir=$FASHION --dry-run --json
expect_rc "fashion dry-run --json exits 0" 0
check "fashion --json is one JSON object" /usr/bin/python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
o = json.loads(lines[0])
assert o["event"] == "dry_run" and o["train_samples"] == 60000 and o["test_samples"] == 10000
assert o["shape"] == [1, 28, 28] and o["classes"] == 10 and o["class_names"][0] == "T-shirt/top"
assert o["train_histogram"] == [6000] * 10 and o["test_histogram"] == [1000] * 10
assert o["parameters"] == 300426 and o["steps_per_epoch"] == 468
' "$TMP/out"

/usr/bin/python3 tests/fixtures/mkdata.py cifar10 "$TMP/cifar" --train 100 --test 20
run "$DTRAIN" train configs/cifar10-cnn.cfg --set data.dir="$TMP/cifar" --instances 2 --dry-run
expect_rc "cifar10 dry-run exits 0" 0
expect_out "cifar10: archive read" "read +$TMP/cifar/cifar-10-binary.tar.gz"
expect_out "cifar10: counts and shape" "^train +100 samples, 3x32x32"
expect_out "cifar10: test count" "^test +20 samples, 3x32x32"
expect_out "cifar10: per-instance batch semantics" "2 instances .* batch 64 global \(32 per instance\), 2 steps per epoch"
expect_out "cifar10: class names from the archive" "^ +0 +airplane +10 +2$"
expect_out "cifar10: last class" "^ +9 +truck +10 +2$"

run "$DTRAIN" train configs/fashion-convnet.cfg --set data.dir="$TMP/nowhere" --dry-run
expect_rc "missing data exits 3" 3
expect_err_lines "missing data is one line" 1
expect_err "missing data names the file" "$TMP/nowhere/train-images-idx3-ubyte.gz"

run "$DTRAIN" train configs/cifar10-cnn.cfg --set data.dir="$TMP/cifar" --dry-run \
    --set 'model.layers=({type="flatten";},{type="linear";out_features=5;})'
expect_rc "too few outputs exits 2" 2
expect_err "too few outputs named" "the last layer has 5 outputs but the dataset has 10 classes"


# Steps per epoch come from the job plan: with --nodes 2 the global batch is split over 2 x 2
# ranks, and per-instance batches give 4 x 128 per step (the sampler's count, not dist.instances').
run env MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 "$DTRAIN" train configs/fashion-convnet.cfg \
    --set data.dir=$FASHION --instances 2 --nodes 2 --node-rank 1 --dry-run \
    --set train.batch_per_instance=true
expect_rc "two-node dry-run exits 0" 0
expect_out "two nodes: batch of every rank counted" "batch 512 global \(128 per instance\), 117 steps per epoch"
expect_out "two nodes: the job line" "^job +4 ranks on 2 hosts$"

# Absurd layer sizes are refused with the figures before anything is allocated (the dry run
# must not try to hold 4.6 TB).
run "$DTRAIN" train configs/fashion-convnet.cfg --set data.dir=$FASHION --dry-run \
    --set model.layers.7.out_features=65536 --set model.layers.2.out_channels=65536
expect_rc "absurd layer sizes: exit 2" 2
expect_err "absurd layer sizes: the figures" "model needs [0-9.]+ GiB at batch 128 per rank x 1 rank \(618485514410 parameters; .*more than the [0-9.]+ GiB available"

# Memory is sized at the real per-rank batch (not one sample) and compared with what is
# available: the estimate is a line of the table and a field of the JSON.
run "$DTRAIN" train configs/fashion-convnet.cfg --set data.dir=$FASHION --dry-run
expect_out "memory: estimate at the real batch in the table" "^memory +[0-9.]+ MiB estimated at batch 128 per rank x 1 \(weights, gradients, optimizer [0-9.]+ MiB; activations [0-9.]+ MiB; layer scratch [0-9.]+ MiB; input batches [0-9.]+ MiB\), [0-9.]+ GiB available"
run "$DTRAIN" train configs/fashion-convnet.cfg --set data.dir=$FASHION --dry-run --json \
    --set train.batch_size=256
check "memory: --json has the estimate, twice the activations at twice the batch" /usr/bin/python3 -c '
import json, sys
o = json.loads(open(sys.argv[1]).read())
assert 50e6 < o["memory_bytes"] < 150e6, o["memory_bytes"]
assert o["memory_available_bytes"] > 0
' "$TMP/out"
# A batch of 2^20 Fashion-MNIST images needs ~800 GB: refused with the figures, not called
# valid. Nothing of it is allocated: the dry run is quick and stays small under a 4 GB cap.
run sh -c "ulimit -v 4000000; exec timeout 60 '$DTRAIN' train configs/fashion-convnet.cfg \
    --set data.dir=$FASHION --dry-run --set train.drop_last=false --set train.batch_size=1048576"
expect_rc "model too big for memory at the real batch: exit 2" 2
expect_err_lines "model too big: one line" 1
expect_err "model too big: the estimate, the batch and what is available" "fashion-convnet.cfg: model needs [0-9.]+ GiB at batch 1048576 per rank x 1 rank \(300426 parameters; .*activations [0-9.]+ GiB, layer scratch [0-9.]+ GiB.*\): more than the [0-9.]+ GiB available \((MemAvailable in /proc/meminfo|room under the cgroup's memory.*)\); lower train.batch_size or dist.instances$"
# Ranks multiply it: 2 forked ranks of 65536 samples each count twice.
run "$DTRAIN" train configs/fashion-convnet.cfg --set data.dir=$FASHION --dry-run --instances 2 \
    --set train.batch_per_instance=true --set train.drop_last=false --set train.batch_size=1048576
expect_err "two ranks: counted per rank" "model needs [0-9.]+ GiB at batch 1048576 per rank x 2 ranks"
# train makes the same check before any batch-sized buffer is allocated: under a 4 GB cap on
# address space a buffer of the real batch could not even be reserved (exit 1, out of memory).
run sh -c "ulimit -v 4000000; exec timeout 60 '$DTRAIN' train configs/fashion-convnet.cfg \
    --set data.dir=$FASHION --set checkpoint.dir='$TMP/big' --set train.drop_last=false \
    --set train.batch_size=1048576"
expect_rc "train: model too big fails early with exit 2" 2
expect_err "train: the same figures" "error: configs/fashion-convnet.cfg: model needs [0-9.]+ GiB at batch 1048576 per rank x 1 rank .*more than the [0-9.]+ GiB available"
check "train: nothing written for a run that does not fit" sh -c "! ls '$TMP/big'/*.safetensors 2>/dev/null"

# data.crop_padding not below the image size would crop windows of nothing but padding:
# refused by the dry run as by train, naming the key and the size.
run "$DTRAIN" train configs/fashion-convnet.cfg --set data.dir=$FASHION --dry-run \
    --set data.crop_padding=28
expect_rc "crop_padding = image size: exit 2" 2
expect_err "crop_padding = image size: key and size named" "data.crop_padding: 28 must be 0 or more and below the image size 28x28"
run "$DTRAIN" train configs/fashion-convnet.cfg --set data.dir=$FASHION --dry-run \
    --set data.crop_padding=27
expect_rc "crop_padding below the image size: exit 0" 0

# Class names with terminal escapes (a hostile batches.meta.txt) print as '?', never raw.
/usr/bin/python3 - "$TMP/cifar" "$TMP/esc" <<'PYEOF'
import io, os, sys, tarfile
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst)
with tarfile.open(src + "/cifar-10-binary.tar.gz") as a, \
        tarfile.open(dst + "/cifar-10-binary.tar.gz", "w:gz") as b:
    for m in a.getmembers():
        data = a.extractfile(m).read() if m.isfile() else None
        if m.name.endswith("batches.meta.txt"):
            names = data.decode().split("\n")
            names[0] = "\x1b]0;pwned\x07\x1b[31mplane"
            data = "\n".join(names).encode()
            m.size = len(data)
        b.addfile(m, io.BytesIO(data) if data is not None else None)
PYEOF
run "$DTRAIN" train configs/cifar10-cnn.cfg --set data.dir="$TMP/esc" --dry-run
expect_rc "class name with escapes: exit 0" 0
expect_out "class name with escapes: shown with ? for control characters" "^ +0 +\?\]0;pwned\?\?\[31mplane "
check "class name with escapes: no ESC byte reaches stdout" sh -c "! grep -q \"$(printf '\033')\" '$TMP/out'"

# An IDX file whose gzip members inflate far past what its header declares (2 images, then
# 500 members of 1 MiB of zeros): refused at the first byte too many, not decompressed whole.
/usr/bin/python3 - "$TMP/members" <<'PYEOF'
import gzip, os, struct, sys
d = sys.argv[1]
os.makedirs(d)
img = struct.pack(">IIII", 0x803, 2, 28, 28) + bytes(2 * 784)
lab = gzip.compress(struct.pack(">II", 0x801, 2) + bytes(2))
zeros = gzip.compress(bytes(1 << 20))
with open(d + "/train-images-idx3-ubyte.gz", "wb") as f:
    f.write(gzip.compress(img))
    for _ in range(500):
        f.write(zeros)
open(d + "/train-labels-idx1-ubyte.gz", "wb").write(lab)
open(d + "/t10k-images-idx3-ubyte.gz", "wb").write(gzip.compress(img))
open(d + "/t10k-labels-idx1-ubyte.gz", "wb").write(lab)
PYEOF
run "$DTRAIN" train configs/fashion-convnet.cfg --set data.dir="$TMP/members" --dry-run
expect_rc "gzip members inflating past the header: exit 3" 3
# "found more" (not a byte count) is said at byte 1569: the rest was never inflated.
expect_err "gzip members inflating past the header: named, stopped at the first byte too many" "train-images-idx3-ubyte.gz: dims 2x28x28 need 1568 bytes of data, found more$"

finish
