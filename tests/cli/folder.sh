# data.format = "folder": the same pixels as a PNG folder and as IDX train to bit-identical
# weights; every kind of bad image (corrupt, truncated, a header declaring more pixels than
# data.max_pixels) fails with one line naming the file (exit 3) or, with data.skip_bad, is
# counted; PNG colour types and sizes convert; class folders named with control characters
# load; config keys are checked.
. tests/cli/lib.sh

PY=/usr/bin/python3
# JPEG fixtures: no Python JPEG encoder here, so a small libjpeg program (tests/fixtures).
cc -o "$TMP/mkjpeg" tests/fixtures/mkjpeg.c -ljpeg || exit 1
MKJPEG="$TMP/mkjpeg"
CFG="$(pwd)/configs/fashion-convnet.cfg"
FASHION=/usr/share/datasets/fashion-mnist
$PY bench/make_folder.py "$FASHION" "$TMP/f" --limit 256 --idx-out "$TMP/idx"

# train DIR [options...] on the folder
train_folder() {
    dir=$1
    shift
    run "$DTRAIN" train "$CFG" --overwrite --threads 1 --set data.dataset=\"shapes\" --set data.format=\"folder\" \
        --set checkpoint.dir="$dir" --set train.batch_size=2 "$@"
}

cat >"$TMP/same.py" <<'PY'
import json, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n, = struct.unpack("<Q", b[:8])
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
sys.exit(0 if a == b and a else "tensors differ")
PY

# ---- the same samples in the same order: identical weights and loss ----
run "$DTRAIN" train "$CFG" --overwrite --threads 1 --json --set data.dir="$TMP/idx" --set checkpoint.dir="$TMP/ck_idx"
expect_rc "train on IDX in folder order" 0
grep '"event":"epoch"' "$TMP/out" >"$TMP/epoch_idx"
train_folder "$TMP/ck_folder" --json --set data.dir="$TMP/f" --set train.batch_size=128
expect_rc "train on the PNG folder" 0
grep '"event":"epoch"' "$TMP/out" >"$TMP/epoch_folder"
check "folder and IDX give bit-identical weights" $PY "$TMP/same.py" "$TMP/ck_idx/last.safetensors" "$TMP/ck_folder/last.safetensors"
loss_idx=$(grep -o '"train_loss":[^,]*,"train_accuracy":[^,]*,"test_loss":[^,]*,"test_accuracy":[^,]*' "$TMP/epoch_idx")
loss_folder=$(grep -o '"train_loss":[^,]*,"train_accuracy":[^,]*,"test_loss":[^,]*,"test_accuracy":[^,]*' "$TMP/epoch_folder")
check "folder and IDX report the same losses and accuracies ($loss_folder)" test -n "$loss_idx" -a "$loss_idx" = "$loss_folder"

# ---- the parent decodes before it forks: several ranks with several threads each ----
# GNU OpenMP's pool does not survive fork; a decode that left one behind hung both ranks at
# their first parallel region for ever. `timeout` turns such a hang into a failure here.
run timeout 120 "$DTRAIN" train "$CFG" --overwrite --instances 2 --threads 2 --quiet \
    --set data.dataset=\"shapes\" --set data.format=\"folder\" --set data.dir="$TMP/f" \
    --set checkpoint.dir="$TMP/ck_2x2" --set train.batch_size=32
expect_rc "folder data at 2 instances x 2 threads trains (no hang after the decode)" 0
check "...and writes its checkpoint" test -s "$TMP/ck_2x2/last.safetensors"

# ---- a small folder of mixed modes and sizes, resized to 28x28 ----
M="$TMP/mixed"
$PY - "$M" <<'PY'
import os, sys
import numpy as np
sys.path.insert(0, "bench")
from make_folder import png_bytes
root = sys.argv[1]
rng = np.random.default_rng(1)
def put(split, cls, name, data):
    os.makedirs(os.path.join(root, split, cls), exist_ok=True)
    open(os.path.join(root, split, cls, name), "wb").write(data)
for split in ("train", "test"):
    put(split, "cat", "a.png", png_bytes(rng.integers(0, 256, (28, 28), dtype=np.uint8)))
    put(split, "cat", "b.PNG", png_bytes(rng.integers(0, 256, (40, 30, 3), dtype=np.uint8), 2))
    put(split, "cat", "c.png", png_bytes(rng.integers(0, 256, (17, 50, 4), dtype=np.uint8), 6))
    put(split, "dog", "d.png", png_bytes(rng.integers(0, 4, (30, 30), dtype=np.uint8), 3,
                                         palette=[[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255]]))
    put(split, "dog", "e.png", png_bytes(rng.integers(0, 65536, (28, 29), dtype=np.uint16), 0, 16))
    put(split, "dog", "f.png", png_bytes(rng.integers(0, 256, (28, 28, 2), dtype=np.uint8), 4))
    put(split, "dog", "notes.txt", b"not an image, ignored")
    put(split, "dog", ".hidden.png", b"hidden, ignored")
PY
train_folder "$TMP/ck_mixed" --set data.dir="$M" --set 'data.size=[28,28]' --set data.classes=2
expect_rc "gray, RGB, RGBA, palette, 16-bit, gray+alpha of mixed sizes fit to 28x28" 0
train_folder "$TMP/ck_rgb" --set data.dir="$M" --set 'data.size=[20,24]' --set data.channels=3
expect_rc "the same folder as 3x20x24 RGB" 0
train_folder "$TMP/ck_mixed" --set data.dir="$M"
expect_rc "mixed sizes without data.size: exit 3" 3
expect_err "...and names a file and data.size" 'mixed/train/cat/b.PNG: image is 40x30 but the first one is 28x28; set data.size'

# bad DIR: copies the mixed folder (sized) and breaks one thing with the given command
bad() {
    rm -rf "$TMP/bad"
    cp -r "$M" "$TMP/bad"
    (cd "$TMP/bad" && eval "$1")
    # timeout: a decompression bomb once took 16 s and 4 GB here; it must be refused at once.
    run timeout 60 "$DTRAIN" train "$CFG" --overwrite --threads 1 --set data.dataset=\"shapes\" --set data.format=\"folder\" \
        --set data.dir="$TMP/bad" --set 'data.size=[28,28]' --set checkpoint.dir="$TMP/ck_bad" \
        --set train.batch_size=2 $2
}
for c in "corrupt PNG|printf '\211PNG\r\n\032\nrubbish' > train/cat/z.png|train/cat/z.png: corrupt PNG" \
         "corrupt JPEG|printf '\377\330\377\340rubbish' > train/cat/z.jpg|train/cat/z.jpg: corrupt JPEG" \
         "truncated PNG|head -c 60 train/cat/b.PNG > train/cat/z.png|train/cat/z.png: corrupt PNG" \
         "truncated JPEG|$MKJPEG z 64 64 3 && head -c \$((\$(wc -c <z) / 2)) z > train/cat/z.jpg && rm z|train/cat/z.jpg: corrupt JPEG: Premature end of JPEG file" \
         "JPEG declaring 65500x65500|$MKJPEG train/cat/z.jpg 28 28 1 declare=65500x65500|train/cat/z.jpg: JPEG declares 65500x65500 pixels, more than data.max_pixels = 67108864" \
         "progressive RGB JPEG declaring 65500x65500|$MKJPEG train/dog/z.jpg 28 28 3 progressive declare=65500x65500|train/dog/z.jpg: JPEG declares 65500x65500 pixels, more than data.max_pixels" \
         "corrupt PNG named with an escape|printf '\\211PNG\\r\\n\\032\\nxx' > \"\$(printf 'train/cat/z\\033[2J.png')\"|train/cat/z\\\\x1b\\[2J.png: corrupt PNG" \
         "not an image|echo hello > train/dog/z.jpeg|train/dog/z.jpeg: not a PNG or JPEG" \
         "empty file|: > train/dog/z.png|train/dog/z.png: not a PNG or JPEG file \(empty\)" \
         "directory named .png|mkdir train/dog/z.png|train/dog/z.png: is a directory, not a regular file" \
         "FIFO named .png|mkfifo train/dog/z.png|train/dog/z.png: is a FIFO \(named pipe\), not a regular file" \
         "symlink loop as image|ln -s z.png train/dog/z.png|train/dog/z.png: cannot open: .*symbolic links" \
         "symlink loop as class|ln -s loop train/loop|train/loop: symlink loop" \
         "class folder without images|mkdir train/emu && echo x > train/emu/a.txt|train/emu: class folder has no" \
         "zero classes|rm -rf train/*|train: no class folders" \
         "test classes differ|mv test/dog test/dingo|test: class folder 'dingo' where the training set has 'dog'" \
         "no train folder|rm -rf train|train: cannot open directory"; do
    name=${c%%|*}
    rest=${c#*|}
    bad "${rest%%|*}" --quiet
    expect_rc "$name: exit 3" 3
    expect_err "$name: names the file" "${rest#*|}"
    expect_err_lines "$name: one line" 1
    check "$name: no raw escape in the message" sh -c "! grep -q \"\$(printf '\\033')\" '$TMP/err'"
done
bad "printf 'rubbish' > train/cat/z.png && mkfifo train/dog/y.png && $MKJPEG train/dog/x.jpg 8 8 1 declare=65500x65500" "--set data.skip_bad=true"
expect_rc "skip_bad: a corrupt PNG, a FIFO and a JPEG bomb are left out" 0
expect_err "...and counted, naming the first" "skipped 3 bad images in .*/train/<class>/\*.*cat/z.png"
bad ": " "--set data.max_pixels=783"
expect_rc "data.max_pixels below 28x28 = 784: exit 3" 3
expect_err "...names the first image and the limit" "train/cat/a.png: PNG declares 28x28 pixels, more than data.max_pixels = 783"
bad ": " "--set data.max_pixels=784"
expect_rc "data.max_pixels = 784: the 40x30 image is bad, exit 3" 3
expect_err "...names it" "train/cat/b.PNG: PNG declares 40x30 pixels, more than data.max_pixels = 784"

# ---- class folders named with control characters load (shown with '?') ----
bad "mv train/cat \"\$(printf 'train/ca\\001t')\" && mv test/cat \"\$(printf 'test/ca\\001t')\"" "--quiet --set data.classes=2"
expect_rc "a class folder named with a control character, in train and test: exit 0" 0
check "...the checkpoint's class names show it as '?'" $PY -c '
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n, = struct.unpack("<Q", b[:8])
assert json.loads(json.loads(b[8:8 + n])["__metadata__"]["class_names"]) == ["ca?t", "dog"]
' "$TMP/ck_bad/last.safetensors"

# ---- validation split: data.val_fraction (any format) or a folder's val/ ----
run "$DTRAIN" train "$CFG" --overwrite --threads 1 --json --set data.dir="$TMP/idx" --set checkpoint.dir="$TMP/ck_val" \
    --set data.val_fraction=0.25 --set train.batch_size=64 --set train.epochs=2
expect_rc "IDX with data.val_fraction = 0.25" 0
expect_out "...the epoch event reports val and test apart" '"event":"epoch".*"val_loss":[0-9.]+,"val_accuracy":[0-9.]+,"test_loss".*"test_accuracy"'
check "...best.safetensors chosen on it" test -s "$TMP/ck_val/best.safetensors"
run "$DTRAIN" train "$CFG" --overwrite --threads 1 --set data.dir="$TMP/idx" --set checkpoint.dir="$TMP/ck_val" \
    --set data.val_fraction=0.25 --set train.batch_size=64
expect_err "...the epoch line too" 'train loss .* \| val loss .* acc .*% \| test loss'
run "$DTRAIN" train "$CFG" --overwrite --threads 1 --set data.dir="$TMP/idx" --set checkpoint.dir="$TMP/ck_val" \
    --set data.val_fraction=0.001
expect_rc "a fraction that holds out nothing: exit 3" 3
expect_err "...says so" 'data.val_fraction 0.001 of 256 samples leaves the validation split empty'
run "$DTRAIN" train "$CFG" --set data.val_fraction=1.0
expect_rc "data.val_fraction = 1: exit 2" 2
cp -r "$M/train" "$M/val"
train_folder "$TMP/ck_vdir" --json --set data.dir="$M" --set 'data.size=[28,28]'
expect_rc "a folder with val/" 0
expect_out "...reports val_accuracy" '"val_accuracy":[0-9.]+,"test_loss"'
train_folder "$TMP/ck_vdir" --set data.dir="$M" --set 'data.size=[28,28]' --set data.val_fraction=0.5
expect_rc "val/ and data.val_fraction together: exit 2" 2
expect_err "...says which to remove" 'data.val_fraction: .*/val already is the validation split'
rm -rf "$M/val"

# ---- config keys ----
for c in "data.size=[28]|data.size.*expected \[H, W\]" \
         "data.size=[28.5,28.0]|data.size.*whole number" \
         "data.size=[0,28]|data.size" \
         "data.channels=2|data.channels.*expected 1 \(gray\) or 3" \
         "data.channels=5|data.channels" \
         "data.max_pixels=0|data.max_pixels" \
         "data.max_pixels=5000000000L|data.max_pixels"; do
    train_folder "$TMP/ck_cfg" --set data.dir="$M" --set "${c%%|*}"
    expect_rc "${c%%|*}: exit 2" 2
    expect_err "${c%%|*}: says why" "${c#*|}"
done
run "$DTRAIN" train "$CFG" --set 'data.size=[28,28]'
expect_rc "data.size with IDX: exit 2" 2
expect_err "...says only folder uses it" 'data.size.*only data.format = "folder"'
train_folder "$TMP/ck_cfg" --set data.dir="$M" --set 'data.size=[28,28]' --set data.channels=1 \
    --set 'data.mean=[0.5,0.5,0.5]'
expect_rc "channels 1 with a 3-channel mean: exit 2" 2
expect_err "...says which key" "data.mean.*expected 1 value for folder"

# ---- eval --json with long class names ----
# The per-class JSON was written into a buffer of 96 bytes a class: names of 60 bytes or more
# (folder names, CIFAR meta lines) cut the JSON short and wrote past the buffer's end.
L="$TMP/long"
$PY - "$L" <<'PY'
import os, sys
import numpy as np
sys.path.insert(0, "bench")
from make_folder import png_bytes
rng = np.random.default_rng(3)
for split in ("train", "test"):
    for c in "ab":
        d = os.path.join(sys.argv[1], split, c * 200)
        os.makedirs(d)
        for i in range(4):
            open(os.path.join(d, "%d.png" % i), "wb").write(
                png_bytes(rng.integers(0, 256, (28, 28), dtype=np.uint8)))
PY
train_folder "$TMP/ck_long" --set data.dir="$L" --quiet
expect_rc "a folder whose class names are 200 bytes long trains" 0
run "$DTRAIN" eval "$TMP/ck_long/last.safetensors" --data "$L" --json
expect_rc "eval --json with 200-byte class names: exit 0" 0
check "...its JSON whole, with both names" $PY -c '
import json, sys
e = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert [c["name"] for c in e["classes"]] == ["a" * 200, "b" * 200], e["classes"]
assert len(e["confusion"]) == 2 and sum(map(sum, e["confusion"])) == 8, e["confusion"]
' "$TMP/out"

# A checkpoint for 2 classes evaluated on a folder of 3: the loss read the output row at label
# 2, past the model's 2 outputs (loss nan, and past the buffer for the batch's last sample).
train_folder "$TMP/ck_two" --set data.dir="$L" --set model.layers.10.out_features=2 --quiet
expect_rc "a 2-output model on the 2-class folder" 0
cp -r "$L" "$TMP/long3"
for s in train test; do
    mkdir "$TMP/long3/$s/c"
    cp "$L/$s/$(printf 'a%.0s' $(seq 200))/0.png" "$TMP/long3/$s/c/0.png"
done
run "$DTRAIN" eval "$TMP/ck_two/last.safetensors" --data "$TMP/long3"
expect_rc "eval of a 2-output model on 3 classes: exit 3" 3
expect_err "...says why" "the model has 2 outputs, but the test data in $TMP/long3 has 3 classes"

# ---- the README's recipe for your own images, run as written ----
# It once lacked data.dataset and used data.size = 28, which the config refused (only [H, W]).
R="$TMP/recipe"
mkdir -p "$R/bin"
ln -s "$DTRAIN" "$R/bin/dtrain"
ln -s "$(pwd)/configs" "$R/configs"
$PY - "$R/photos" <<'PY'
import os, sys
import numpy as np
sys.path.insert(0, "bench")
from make_folder import png_bytes
rng = np.random.default_rng(2)
for split, n in (("train", 80), ("test", 4)):  # 160: more than one batch of 128
    for cls in ("boot", "sandal"):
        os.makedirs(os.path.join(sys.argv[1], split, cls))
        for i in range(n):
            shape = (40, 30) if i % 2 else (28, 28)  # size = 28 fits the 40x30 ones
            open(os.path.join(sys.argv[1], split, cls, "%03d.png" % i), "wb").write(
                png_bytes(rng.integers(0, 256, shape, dtype=np.uint8)))
PY
# The fenced block after each <!-- recipe:NAME --> marker in README.md.
recipe() {
    awk -v m="<!-- recipe:$1 -->" '$0 == m {on = 1; next} on && /^```/ {if (in_block) exit; in_block = 1; next} in_block' README.md
}
recipe folder-commands >"$R/commands.sh"
check "README: the folder recipe's commands are there" grep -q "data.size=28" "$R/commands.sh"
run sh -c "cd '$R' && PATH='$R/bin':\$PATH && set -e && . ./commands.sh"
expect_rc "README: the folder recipe's commands run as written" 0
check "...the predictions name the classes" grep -Eq "^photos/test/boot/000.png  (boot|sandal) [0-9.]+%, (boot|sandal) [0-9.]+%$" "$TMP/out"
recipe folder-data >"$R/data.cfg"
$PY - configs/fashion-convnet.cfg "$R/data.cfg" "$R/photos.cfg" <<'PY'
import re, sys
cfg = open(sys.argv[1]).read()
data = open(sys.argv[2]).read()
assert data.startswith("data = {"), data
out, n = re.subn(r"(?ms)^data = \{.*?^\};\n", lambda m: data, cfg, count=1)
assert n == 1
open(sys.argv[3], "w").write(out)
PY
run sh -c "cd '$R' && '$DTRAIN' train photos.cfg --quiet --threads 1 --set checkpoint.dir=runs/photos-cfg"
expect_rc "README: a config with the recipe's data group trains" 0
check "...and writes its checkpoint" test -s "$R/runs/photos-cfg/last.safetensors"
train_folder "$TMP/ck_cfg" --set data.dir="$R/photos" --set data.size=28 --print-config
check "data.size = 28 means [28, 28]" grep -q "size = \[ 28.0, 28.0 \]" "$TMP/out"

finish
