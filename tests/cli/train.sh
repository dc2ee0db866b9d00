# `dtrain train` and `dtrain eval` end to end: checkpoints, determinism, resume, the three
# output modes, eval reproducing train's figures, eval's errors, stopping by signal.
#
# Most runs use a generated 1x28x28 set (tests/fixtures/mkdata.py: 256 training samples,
# 2 steps of 128 per epoch) so an epoch takes a fraction of a second; its labels are not
# learnable, which does not matter for bit-exactness. The runs whose accuracy is compared use
# Debian's real Fashion-MNIST for 20 steps, so the figures mean something (~65%, not 10%).
. tests/cli/lib.sh

FASHION=/usr/share/datasets/fashion-mnist
CFG="$(pwd)/configs/fashion-convnet.cfg"
FIX="$TMP/fix"
# the run's history beside its checkpoints (docs/history.md): not temporary files
HISTORY='config\.cfg|cmdline\.txt|events\.jsonl|metrics\.csv|events\.out\.tfevents\..*'
/usr/bin/python3 tests/fixtures/mkdata.py idx "$FIX" --train 256 --test 64

# train on the fixture: train DIR [options...]
train() {
    dir=$1
    shift
    run "$DTRAIN" train "$CFG" --threads 1 --set data.dir="$FIX" --set checkpoint.dir="$dir" "$@"
}

# Tensor bytes of a safetensors file, metadata left out: tensors.py A B compares two files,
# tensors.py A prints names of the tensors.
cat >"$TMP/tensors.py" <<'PY'
import json, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n, = struct.unpack("<Q", b[:8])
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    data = b[8 + n:]
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in h.items()}
a = tensors(sys.argv[1])
if len(sys.argv) == 2:
    print(" ".join(sorted(a)))
    sys.exit(0)
b = tensors(sys.argv[2])
if sorted(a) != sorted(b):
    sys.exit("tensor names differ: %s vs %s" % (sorted(a), sorted(b)))
diff = [k for k in a if a[k] != b[k]]
if diff:
    sys.exit("tensors differ: " + ", ".join(diff))
PY
same_tensors() { # NAME A B
    if msg=$(/usr/bin/python3 "$TMP/tensors.py" "$2" "$3" 2>&1); then pass "$1"; else fail "$1" "$msg"; fi
}

# ---- a short run: exit 0, both checkpoints under runs/<config name>/ by default ----
mkdir "$TMP/cwd"
(cd "$TMP/cwd" && "$DTRAIN" train "$CFG" --threads 1 --set data.dir="$FIX" --quiet) \
    >"$TMP/out" 2>"$TMP/err"
RC=$?
expect_rc "short run exits 0" 0
check "last.safetensors in runs/fashion-convnet/" test -s "$TMP/cwd/runs/fashion-convnet/last.safetensors"
check "best.safetensors in runs/fashion-convnet/" test -s "$TMP/cwd/runs/fashion-convnet/best.safetensors"
# docs/checkpoints.md's loader (no safetensors package) into the PyTorch ConvNet, strict.
sed -n '/<!-- loader:begin -->/,/<!-- loader:end -->/p' docs/checkpoints.md | sed '/^<!--/d;/^```/d' \
    >"$TMP/loader.py"
cat >>"$TMP/loader.py" <<'PY'
import sys, torch.nn as nn
state, meta = load_dtrain(sys.argv[1])
model = nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Dropout2d(0.1), nn.Flatten(), nn.Linear(4608, 64),
                      nn.ReLU(), nn.Dropout(0.25), nn.Linear(64, 10), nn.LogSoftmax(dim=1))
model.load_state_dict({k[len("layers."):]: v for k, v in state.items()
                       if k.startswith("layers.")}, strict=True)
print("step", meta["step"])
PY
run /usr/bin/python3 "$TMP/loader.py" "$TMP/cwd/runs/fashion-convnet/last.safetensors"
expect_rc "docs/checkpoints.md's loader loads a checkpoint into torch (strict)" 0
expect_out "the loader reads the metadata" "^step 2$"
names=$(/usr/bin/python3 "$TMP/tensors.py" "$TMP/cwd/runs/fashion-convnet/last.safetensors")
case $names in
*layers.0.weight*layers.10.bias*optimizer.acc_delta.layers.0.weight*) pass "checkpoint holds PyTorch-style names and optimizer state" ;;
*) fail "checkpoint holds PyTorch-style names and optimizer state" "$names" ;;
esac
if ls -a "$TMP/cwd/runs/fashion-convnet" | grep -Eqv "^(\.|\.\.|last\.safetensors|best\.safetensors|$HISTORY)\$"; then
    fail "no temporary files left" "$(ls -a "$TMP/cwd/runs/fashion-convnet")"
else pass "no temporary files left"; fi

# ---- determinism and resume (2 epochs of 2 steps; dropout and Adadelta state included) ----
train "$TMP/a" --set train.epochs=2
expect_rc "2-epoch run exits 0" 0
train "$TMP/b" --set train.epochs=2
same_tensors "two identical runs give bit-identical tensors" "$TMP/a/last.safetensors" "$TMP/b/last.safetensors"
train "$TMP/a2" --set train.epochs=2 --threads 2
train "$TMP/b2" --set train.epochs=2 --threads 2
same_tensors "two identical 2-thread runs give bit-identical tensors" "$TMP/a2/last.safetensors" "$TMP/b2/last.safetensors"
train "$TMP/c" --set train.epochs=2 --set train.seed=2
if /usr/bin/python3 "$TMP/tensors.py" "$TMP/a/last.safetensors" "$TMP/c/last.safetensors" >/dev/null 2>&1; then
    fail "another seed gives other weights" "identical"
else pass "another seed gives other weights"; fi

train "$TMP/r1" --set train.epochs=1
expect_rc "1-epoch run exits 0" 0
train "$TMP/r2" --set train.epochs=2 --resume "$TMP/r1/last.safetensors"
expect_rc "resumed run exits 0" 0
expect_err "resume is announced, epochs counted from 1" "resuming from .*r1/last.safetensors at step 2: the start of epoch 2/2$"
expect_err "resumed run trains epoch 2 only" "^dtrain: epoch 2/2: "
if grep -q "epoch 1/2" "$TMP/err"; then fail "resumed run skips epoch 1" "$ERR"; else pass "resumed run skips epoch 1"; fi
same_tensors "1 epoch + resume for 1 = 2 epochs, bit for bit" "$TMP/a/last.safetensors" "$TMP/r2/last.safetensors"

# A finished run resumed again has nothing to train; it says so and reports the checkpoint's
# own figures (not zeros).
train "$TMP/r3" --set train.epochs=1 --resume "$TMP/r1/last.safetensors" --json
expect_rc "resuming a finished run exits 0" 0
expect_err "resuming a finished run says so" "nothing left to train"
cp "$TMP/out" "$TMP/again.json"
run "$DTRAIN" eval "$TMP/r1/last.safetensors" --data "$FIX" --threads 1 --json
check "resuming a finished run reports the checkpoint's test figures" /usr/bin/python3 -c '
import json, sys
f = [json.loads(l) for l in open(sys.argv[1])][-1]
e = json.loads(open(sys.argv[2]).read())
assert f["event"] == "final" and f["steps"] == 2, f
assert f["test_loss"] == e["test_loss"] > 0 and f["test_accuracy"] == e["test_accuracy"], (f, e)
' "$TMP/again.json" "$TMP/out"

# ---- output modes ----
train "$TMP/q" --set train.epochs=2 --quiet
expect_rc "--quiet exits 0" 0
if [ -s "$TMP/err" ] || [ -s "$TMP/out" ]; then fail "--quiet prints nothing" "$ERR$OUT"; else pass "--quiet prints nothing"; fi

train "$TMP/p" --set train.epochs=3
expect_rc "plain run exits 0" 0
expect_err_lines "plain output: where the checkpoints go, then one line per epoch" 4
expect_err "plain output: the start line names the checkpoint files" "^dtrain: checkpoints: $TMP/p/last.safetensors and best.safetensors$"
expect_err "plain epoch line" "^dtrain: epoch 3/3: train loss [0-9.]+ acc [0-9.]+% \| test loss [0-9.]+ acc [0-9.]+% \| "
if [ -s "$TMP/out" ]; then fail "plain output leaves stdout empty" "$OUT"; else pass "plain output leaves stdout empty"; fi

train "$TMP/p1" --set train.epochs=3 --log-every 1
expect_err_lines "--log-every 1: a line per step and per epoch" 10
expect_err "--log-every step line" "^dtrain: epoch 2/3 step 2/2 loss [0-9.]+ acc [0-9.]+% [0-9]+ samples/s$"
train "$TMP/p2" --set train.epochs=3 --log-every 2
expect_err_lines "--log-every 2: every second step" 7

# On a terminal (util-linux `script` gives the run a pty): a live bar redrawn with \r, with
# the rate and an ETA, cleared before each epoch line.
if command -v script >/dev/null 2>&1; then
    script -qec "'$DTRAIN' train '$CFG' --threads 1 --set data.dir='$FIX' --set checkpoint.dir='$TMP/tty' --set train.epochs=2" /dev/null >"$TMP/tty.out" 2>&1
    if grep -q "epoch 1/2  2/2 (100%)  loss [0-9.]*  acc [0-9. ]*%  [0-9]* samples/s  ETA 0m00s" "$TMP/tty.out" &&
        [ "$(tr '\r' '\n' <"$TMP/tty.out" | grep -c '^dtrain: epoch [12]/2: train loss')" -eq 2 ]; then
        pass "terminal: live bar with rate and ETA, then the epoch lines"
    else fail "terminal: live bar with rate and ETA, then the epoch lines" "$(od -c "$TMP/tty.out" | head -20)"; fi
fi

# --json on real data: step events every 10 steps, an epoch event, a final event; eval of the
# checkpoint then reproduces the final test figures exactly.
run "$DTRAIN" train "$CFG" --threads 1 --set data.dir=$FASHION --set checkpoint.dir="$TMP/j" \
    --set train.max_steps=20 --log-every 10 --json
expect_rc "--json run exits 0" 0
cp "$TMP/out" "$TMP/train.json"
check "--json: every stdout line is a JSON event, start/step/epoch/final present" /usr/bin/python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
kinds = [e["event"] for e in ev]
assert kinds == ["start", "step", "step", "epoch", "final"], kinds
s = ev.pop(0)
assert s["train_samples"] == 60000 and s["test_samples"] == 10000 and s["precision"] == "fp32", s
assert [e["step"] for e in ev[:2]] == [10, 20], ev[:2]
assert ev[2]["epoch"] == 1 and ev[2]["step"] == 20 and 0 < ev[2]["test_accuracy"] <= 1
f = ev[3]
assert f["steps"] == 20 and f["test_accuracy"] == ev[2]["test_accuracy"], f
assert f["test_accuracy"] > 0.4, f   # 20 steps of real training, far above chance
' "$TMP/train.json"

run "$DTRAIN" eval "$TMP/j/last.safetensors" --threads 1 --json
expect_rc "eval --json exits 0" 0
check "eval --json: one object; accuracy and loss equal train's final event" /usr/bin/python3 -c '
import json, sys
final = [json.loads(l) for l in open(sys.argv[1])][-1]
lines = open(sys.argv[2]).read().splitlines()
assert len(lines) == 1, lines
e = json.loads(lines[0])
assert e["event"] == "eval" and e["samples"] == 10000, e
assert e["test_accuracy"] == final["test_accuracy"], (e["test_accuracy"], final["test_accuracy"])
assert e["test_loss"] == final["test_loss"], (e["test_loss"], final["test_loss"])
names = [c["name"] for c in e["classes"]]
assert names[0] == "T-shirt/top" and names[9] == "Ankle boot", names
assert len(e["confusion"]) == 10 and all(len(r) == 10 for r in e["confusion"])
assert sum(map(sum, e["confusion"])) == 10000
assert sum(e["confusion"][i][i] for i in range(10)) == round(10000 * e["test_accuracy"])
for i, c in enumerate(e["classes"]):
    assert c["samples"] == 1000 and abs(c["accuracy"] - e["confusion"][i][i] / 1000) < 1e-6, c
' "$TMP/train.json" "$TMP/out"

# eval needs only the test split, and finds the data from another directory: the checkpoint
# records the data's absolute path.
mkdir -p "$TMP/testonly" "$TMP/elsewhere"
cp "$FASHION"/t10k-* "$TMP/testonly/"
run "$DTRAIN" eval "$TMP/j/last.safetensors" --data "$TMP/testonly" --json
expect_rc "eval with only the t10k files: exit 0" 0
mkdir "$TMP/rel" && ln -s "$FASHION" "$TMP/rel/fm"
(cd "$TMP/rel" && "$DTRAIN" train "$CFG" --threads 1 --set data.dir=fm --set train.max_steps=2 \
    --set checkpoint.dir="$TMP/relrun" --quiet)
(cd "$TMP/elsewhere" && "$DTRAIN" eval "$TMP/relrun/last.safetensors" --quiet)
RC=$?
expect_rc "a run with a relative data.dir: eval from another directory finds the data" 0

acc=$(/usr/bin/python3 -c 'import json,sys; print("%.2f" % (100 * [json.loads(l) for l in open(sys.argv[1])][-1]["test_accuracy"]))' "$TMP/train.json")
run "$DTRAIN" eval "$TMP/j/last.safetensors" --threads 1
expect_rc "eval exits 0" 0
expect_out "eval prints the accuracy train reported" "accuracy $acc%"
expect_out "eval: per-class accuracy with class names" "^T-shirt/top +1000 +[0-9.]+% +[0-9.]+% +[0-9.]+% +[0-9.]+$"
expect_out "eval: last class named" "^Ankle boot +1000 +[0-9.]+% +[0-9.]+% +[0-9.]+% +[0-9.]+$"
expect_out "eval: confusion matrix header" "^confusion matrix"
rows=$(grep -Ec '^ ?[0-9] [A-Za-z/ -]{11}( +[0-9]+){10}$' "$TMP/out")
if [ "$rows" -eq 10 ]; then pass "eval: 10 confusion rows of 10 counts"; else fail "eval: 10 confusion rows of 10 counts" "$rows rows: $OUT"; fi

# ---- eval errors: exit 3, one line that names the problem ----
CK="$TMP/a/last.safetensors"
run "$DTRAIN" eval "$TMP/none.safetensors"
expect_rc "eval of a missing file exits 3" 3
expect_err_lines "missing file: one line" 1
expect_err "missing file named" "none.safetensors"

size=$(wc -c <"$CK")
head -c $((size / 2)) "$CK" >"$TMP/trunc.safetensors"
run "$DTRAIN" eval "$TMP/trunc.safetensors" --data "$FIX"
expect_rc "truncated checkpoint exits 3" 3
expect_err_lines "truncated checkpoint: one line" 1
expect_err "truncated checkpoint named" "trunc.safetensors: truncated: tensor [a-z_.0-9]+ ends at data byte"

head -c 100 "$CK" >"$TMP/header-cut.safetensors"
run "$DTRAIN" eval "$TMP/header-cut.safetensors" --data "$FIX"
expect_rc "checkpoint cut inside its header exits 3" 3
expect_err_lines "cut header: one line" 1
expect_err "cut header: says truncated" "header-cut.safetensors: truncated: the header is [0-9]+ bytes"

echo "this is not a checkpoint at all, just some text" >"$TMP/text.safetensors"
run "$DTRAIN" eval "$TMP/text.safetensors" --data "$FIX"
expect_rc "not a safetensors file exits 3" 3
expect_err_lines "not safetensors: one line" 1
expect_err "not safetensors named" "text.safetensors: not a safetensors file"
head -c 5 "$CK" >"$TMP/tiny.safetensors"
run "$DTRAIN" eval "$TMP/tiny.safetensors" --data "$FIX"
expect_rc "5-byte file exits 3" 3
expect_err "5-byte file is not a safetensors file" "tiny.safetensors: not a safetensors file: 5 bytes"

sed 's/out_features = 64;/out_features = 32;/' "$CFG" >"$TMP/narrow.cfg"
run "$DTRAIN" eval "$CK" --config "$TMP/narrow.cfg" --data "$FIX"
expect_rc "shape mismatch exits 3" 3
expect_err_lines "shape mismatch: one line" 1
expect_err "shape mismatch names the tensor and both shapes" "layers\.7\.weight.*\[64, ?4608\].*\[32, ?4608\]|layers\.7\.weight.*\[32, ?4608\].*\[64, ?4608\]"

# ---- crafted checkpoints: a stored config that @includes a file, an absurd step, a FIFO ----
/usr/bin/python3 - "$TMP/j/last.safetensors" "$TMP" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h, data = json.loads(raw[8:8 + n]), raw[8 + n:]
def write(name, change):
    g = json.loads(json.dumps(h))
    change(g["__metadata__"])
    b = json.dumps(g, separators=(",", ":")).encode()
    open(sys.argv[2] + "/" + name, "wb").write(struct.pack("<Q", len(b)) + b + data)
write("include.safetensors", lambda m: m.update(config='@include "/etc/passwd"\n' + m["config"]))
write("step.safetensors", lambda m: m.update(step="1e300"))
PY
run "$DTRAIN" eval "$TMP/include.safetensors"
expect_rc "stored config with @include: exit 3" 3
expect_err "stored config with @include: refused, named" "include.safetensors: the stored config has an @include"
run "$DTRAIN" train "$CFG" --threads 1 --set data.dir="$FIX" --set checkpoint.dir="$TMP/stp" \
    --resume "$TMP/step.safetensors"
expect_rc "absurd step metadata: exit 3" 3
expect_err "absurd step metadata: named" "metadata step is \"1e300\", not a count"
mkfifo "$TMP/fifo.safetensors"
run timeout 10 "$DTRAIN" eval "$TMP/fifo.safetensors"
expect_rc "a FIFO as checkpoint: exit 3, no hang" 3
expect_err "a FIFO as checkpoint: not a regular file" "fifo.safetensors: not a regular file"

# ---- stopping: SIGTERM and SIGINT end the run cleanly, checkpoints stay whole ----
stop_test() { # SIGNAL EXPECTED_RC [--quiet]
    rm -rf "$TMP/s"
    "$DTRAIN" train "$CFG" --threads 1 --set data.dir="$FIX" --set checkpoint.dir="$TMP/s" \
        --set train.epochs=100000 $3 >"$TMP/out" 2>"$TMP/err" &
    pid=$!
    i=0
    while [ ! -s "$TMP/s/last.safetensors" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    sleep 0.3
    kill -s "$1" $pid
    wait $pid
    RC=$?
    expect_rc "SIG$1 stops train with exit $2" "$2"
    if [ -n "$3" ]; then
        if [ -s "$TMP/err" ]; then fail "SIG$1: quiet run prints nothing" "$(cat "$TMP/err")"; else pass "SIG$1: quiet run prints nothing"; fi
    elif tail -n 1 "$TMP/err" | grep -Eq "^dtrain: stopped by SIG$1 at step ([0-9]+); continue from step \1 with --resume $TMP/s/last.safetensors \(or --resume auto\)$"; then
        pass "SIG$1: last line says where it stopped and how to resume"
    else fail "SIG$1: last line says where it stopped and how to resume" "$(tail -n 2 "$TMP/err")"; fi
    run "$DTRAIN" eval "$TMP/s/last.safetensors" --data "$FIX" --quiet
    expect_rc "SIG$1: last.safetensors is whole" 0
    if ls -a "$TMP/s" | grep -Eqv "^(\.|\.\.|last\.safetensors|best\.safetensors|$HISTORY)\$"; then
        fail "SIG$1: no temporary files left" "$(ls -a "$TMP/s")"
    else pass "SIG$1: no temporary files left"; fi
}
stop_test TERM 143 --quiet
stop_test INT 130

finish
