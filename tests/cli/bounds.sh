# Reads that must be bounded (issue 28): data files, configs and checkpoints' configs that are
# FIFOs, too large or too many settings, a CIFAR archive of many gzip members that inflates
# past its limit, and eval --data with a directory name libconfig would misread. Every run
# that could hang is under `timeout`, so a regression fails instead of stalling the suite.
. tests/cli/lib.sh

PY=/usr/bin/python3
CFG="$(pwd)/configs/fashion-convnet.cfg"
FIX="$TMP/fix"
$PY tests/fixtures/mkdata.py idx "$FIX" --train 256 --test 64

# ---- data files that are not regular files
$PY tests/fixtures/mkdata.py idx "$TMP/idxfifo" --train 256 --test 64 --corrupt fifo
run timeout 20 "$DTRAIN" train "$CFG" --set data.dir="$TMP/idxfifo" --dry-run
expect_rc "IDX file that is a FIFO exits 3 (not a hang)" 3
expect_err "IDX FIFO: named, and said what it is" "$TMP/idxfifo/t10k-labels-idx1-ubyte.gz: is a FIFO \(named pipe\), not a regular file"
expect_err_lines "IDX FIFO: one line" 1
$PY tests/fixtures/mkdata.py idx "$TMP/idxfifo2" --train 256 --test 64 --corrupt fifo --plain
run timeout 20 "$DTRAIN" train "$CFG" --set data.dir="$TMP/idxfifo2" --dry-run
expect_rc "uncompressed IDX file that is a FIFO exits 3 (not a hang)" 3
expect_err "uncompressed IDX FIFO named" "idxfifo2/t10k-labels-idx1-ubyte: is a FIFO"
$PY tests/fixtures/mkdata.py cifar10 "$TMP/cififo" --train 100 --test 20 --corrupt fifo
run timeout 20 "$DTRAIN" train configs/cifar10-cnn.cfg --set data.dir="$TMP/cififo" --dry-run
expect_rc "CIFAR archive that is a FIFO exits 3 (not a hang)" 3
expect_err "CIFAR FIFO named" "cififo/cifar-10-binary.tar.gz: is a FIFO \(named pipe\), not a regular file"

# ---- CIFAR: a many-member gzip bomb and a skipped member whose size would wrap
$PY tests/fixtures/mkdata.py cifar10 "$TMP/bomb" --train 100 --test 20 --corrupt bomb
run timeout 60 "$DTRAIN" train configs/cifar10-cnn.cfg --set data.dir="$TMP/bomb" --dry-run
expect_rc "many-member CIFAR bomb exits 3" 3
expect_err "bomb: stopped at the limit" "bomb/cifar-10-binary.tar.gz: decompressed data exceeds the 256 MiB limit"
$PY tests/fixtures/mkdata.py cifar10 "$TMP/wrap" --train 100 --test 20 --corrupt skip-size
run timeout 20 "$DTRAIN" train configs/cifar10-cnn.cfg --set data.dir="$TMP/wrap" --dry-run
expect_rc "skipped member of size 2^64-1 exits 3" 3
expect_err "size 2^64-1: archive and member named" "wrap/cifar-10-binary.tar.gz: tar member cifar-10-batches-bin/ \(header at offset 0\) claims 18446744073709551615 bytes, more than the archive can hold"

# ---- config files
mkfifo "$TMP/fifo.cfg"
run timeout 20 "$DTRAIN" train "$TMP/fifo.cfg" --dry-run
expect_rc "config that is a FIFO exits 2 (a usage error, not a hang)" 2
expect_err "config FIFO explained" "fifo.cfg: is a FIFO \(named pipe\), not a regular file"
$PY - "$CFG" "$TMP/many.cfg" <<'EOF'
import sys
text = open(sys.argv[1]).read()
open(sys.argv[2], "w").write(text + "extra = {" + "".join("a%d=1;" % i for i in range(100000)) + " };\n")
EOF
run timeout 20 "$DTRAIN" train "$TMP/many.cfg" --dry-run
expect_rc "config with 100000 settings exits 2 at once (libconfig would take minutes)" 2
expect_err "too many settings: file named" "many.cfg: [0-9]+ settings, more than the 5000 a config may have"
$PY - "$CFG" "$TMP/big.cfg" <<'EOF'
import sys
open(sys.argv[2], "w").write(open(sys.argv[1]).read() + "#" + " " * (1 << 20) + "\n")
EOF
run "$DTRAIN" train "$TMP/big.cfg" --dry-run
expect_rc "config over 1 MiB exits 2 (a usage error)" 2
expect_err "config over 1 MiB explained" "big.cfg: larger than 1048576 bytes"

# ---- eval --data DIR: the name reaches libconfig as a string literal, escaped
run "$DTRAIN" train "$CFG" --threads 1 --set data.dir="$FIX" --set checkpoint.dir="$TMP/ck" --set train.epochs=1
expect_rc "a checkpoint to evaluate" 0
run "$DTRAIN" eval "$TMP/ck/last.safetensors" --data "$FIX" --threads 1 --json
expect_rc "eval --data plain directory exits 0" 0
cp "$TMP/out" "$TMP/plain.json"
for name in 'quo"te' 'back\slash' 'semi;colon = "x"' "new
line" 'end\'; do
    d="$TMP/$name"
    mkdir -p "$d" && cp "$FIX"/* "$d"/
    run "$DTRAIN" eval "$TMP/ck/last.safetensors" --data "$d" --threads 1 --json
    expect_rc "eval --data '$name' exits 0" 0
    check "eval --data '$name': the same figures as the plain directory" $PY -c '
import json, sys
a, b = (json.loads(open(p).read().splitlines()[-1]) for p in sys.argv[1:])
assert a["test_accuracy"] == b["test_accuracy"] and a["test_loss"] == b["test_loss"], (a, b)
' "$TMP/plain.json" "$TMP/out"
done

# ---- a checkpoint's stored config is bounded the same way (a damaged checkpoint: exit 3)
$PY - "$TMP/ck/last.safetensors" "$TMP/many.safetensors" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n, = struct.unpack("<Q", b[:8])
h = json.loads(b[8:8 + n])
h["__metadata__"]["config"] += "extra = {" + "".join("a%d=1;" % i for i in range(100000)) + " };\n"
head = json.dumps(h).encode()
head += b" " * (-len(head) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(head)) + head + b[8 + n:])
EOF
run timeout 20 "$DTRAIN" eval "$TMP/many.safetensors" --data "$FIX" --threads 1
expect_rc "checkpoint whose stored config has 100000 settings exits 3 at once" 3
expect_err "stored config: checkpoint named" "many.safetensors \(stored config\): [0-9]+ settings, more than the 5000 a config may have"

finish
