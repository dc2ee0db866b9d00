# Fine-tuning (train/init_from.c, train/param_groups.c, data/select.c): a model trained on
# classes 0-4 starts a run on classes 5-9 from its tensors (the head's new shape skipped and
# reported), frozen layers keep their bits, a fine-tuning run resumes bit-identically, a
# safetensors file from another writer (PyTorch's layout) and an index-named checkpoint load,
# and every error is one line with its exit code.
. tests/cli/lib.sh

PY=/usr/bin/python3
$PY tests/fixtures/mkdata.py idx "$TMP/d" --train 300 --test 60 >/dev/null
cat >"$TMP/pre.cfg" <<'EOF2'
data = { dataset = "fashion-mnist"; select_classes = [ 0, 1, 2, 3, 4 ]; };
model = { layers = (
  { type = "conv2d"; name = "conv1"; out_channels = 4; kernel = 3; padding = 1; },
  { type = "relu"; },
  { type = "maxpool2d"; kernel = 2; },
  { type = "conv2d"; name = "conv2"; out_channels = 8; kernel = 3; padding = 1; },
  { type = "batchnorm2d"; name = "bn2"; },
  { type = "relu"; },
  { type = "maxpool2d"; kernel = 2; },
  { type = "flatten"; },
  { type = "linear"; name = "fc1"; out_features = 16; },
  { type = "relu"; },
  { type = "linear"; name = "head"; out_features = 10; } ); };
optimizer = { type = "sgd"; lr = 0.05; momentum = 0.9; weight_decay = 1e-4; };
train = { epochs = 1; batch_size = 32; };
EOF2
sed -e 's/\[ 0, 1, 2, 3, 4 \]/[ 5, 6, 7, 8, 9 ]/' -e 's/out_features = 10/out_features = 5/' \
    "$TMP/pre.cfg" >"$TMP/ft.cfg"
SETS="--set data.dir=$TMP/d --threads 1 --quiet"
INIT="train.init_from=\"$TMP/pre/last.safetensors\""

run "$DTRAIN" train "$TMP/pre.cfg" $SETS --set checkpoint.dir="$TMP/pre"
expect_rc "pretrain on classes 0-4" 0
run "$DTRAIN" train "$TMP/ft.cfg" --set data.dir="$TMP/d" --threads 1 --set "$INIT" \
    --set 'train.freeze=["conv1"]' --set 'optimizer.param_groups=( { match = ["head"]; lr_scale = 10.0; } )' \
    --set checkpoint.dir="$TMP/ft"
expect_rc "fine-tune on classes 5-9 from it" 0
expect_err "the report names the head's two shapes" \
    "skipped head.weight: F32 \\[10, 16\\] in the file, F32 \\[5, 16\\] in the model"
expect_err "... and counts what was loaded" \
    "init_from: 11 tensors loaded, 2 skipped \\(shape\\), 0 new, 0 in the file unused"
check "frozen conv1 keeps the pretrained bits" \
    $PY tests/tools/compare_weights.py --rtol 0 --only conv1 "$TMP/pre/last.safetensors" "$TMP/ft/last.safetensors"
run $PY tests/tools/compare_weights.py --rtol 0 --only conv2 "$TMP/pre/last.safetensors" "$TMP/ft/last.safetensors"
expect_rc "conv2 (not frozen) trained on" 1
run "$DTRAIN" eval "$TMP/ft/last.safetensors" --data "$TMP/d" --json
expect_out "eval of the fine-tuned model: classes 5-9 of the test set, relabelled, named" \
    '"samples":30,.*"classes":\[\{"name":"Sandal".*"name":"Ankle boot"[^]]*\],"macro":\{[^}]*\},"confusion"'

# resume: 2 epochs straight, or stopped after 5 steps and resumed, the same bits
FT="$TMP/ft.cfg --set data.dir=$TMP/d --threads 1 --quiet --set train.epochs=2 --set $INIT --set train.freeze=[\"conv1\"]"
run "$DTRAIN" train $FT --set checkpoint.dir="$TMP/whole"
expect_rc "fine-tune 2 epochs" 0
run "$DTRAIN" train $FT --set checkpoint.dir="$TMP/part" --set train.max_steps=5
expect_rc "fine-tune, stopped after 5 steps" 0
run "$DTRAIN" train $FT --set checkpoint.dir="$TMP/part" --resume "$TMP/part/last.safetensors"
expect_rc "... resumed to the end" 0
check "a resumed fine-tuning run is bit-identical to the whole run" \
    $PY tests/tools/compare_weights.py --rtol 0 "$TMP/whole/last.safetensors" "$TMP/part/last.safetensors"

# a safetensors file written by another writer, PyTorch's layout (names sorted, only the
# state_dict, metadata {"format": "pt"}), with a tensor the model lacks
$PY - "$TMP/pre/last.safetensors" "$TMP/foreign.safetensors" <<'PYEOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); base = 8 + n
t = {k: (v, raw[base + v["data_offsets"][0]:base + v["data_offsets"][1]]) for k, v in h.items()
     if k != "__metadata__" and not k.startswith("optimizer.")}
t["extra.weight"] = ({"dtype": "F32", "shape": [2]}, struct.pack("<2f", 1, 2))
head, data = {"__metadata__": {"format": "pt"}}, b""
for k in sorted(t):
    info, b = t[k]
    head[k] = {"dtype": info["dtype"], "shape": info["shape"], "data_offsets": [len(data), len(data) + len(b)]}
    data += b
hj = json.dumps(head).encode()
hj += b" " * (-len(hj) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hj)) + hj + data)
PYEOF
run "$DTRAIN" train "$TMP/ft.cfg" $SETS --set train.init_from="\"$TMP/foreign.safetensors\"" \
    --set checkpoint.dir="$TMP/fo" --set train.max_steps=1 --dry-run
expect_rc "a PyTorch-layout safetensors file: dry run" 0
run "$DTRAIN" train "$TMP/ft.cfg" --set data.dir="$TMP/d" --threads 1 \
    --set train.init_from="\"$TMP/foreign.safetensors\"" --set checkpoint.dir="$TMP/fo" --set train.max_steps=1
expect_rc "a PyTorch-layout safetensors file: fine-tune" 0
expect_err "... the extra tensor counted unused" "11 tensors loaded, 2 skipped \\(shape\\), 0 new, 1 in the file unused"

# a PyTorch module's state_dict (docs/resnet.md's DtrainNet with the names of ft.cfg), saved by
# safetensors.torch.save_file when installed, else by the format's few lines of writer
if $PY -c 'import torch' 2>/dev/null; then
    $PY - "$TMP/torch.safetensors" <<'PYEOF'
import json, re, struct, sys
import torch, torch.nn as nn
exec(re.search(r"<!-- torch:begin -->\n```python\n(.*?)```", open("docs/resnet.md").read(), re.S).group(1))
net = DtrainNet([nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                 nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                 nn.Flatten(), nn.Linear(392, 16), nn.ReLU(), nn.Linear(16, 10)],
                ["conv1", None, None, "conv2", "bn2", None, None, None, "fc1", None, "head"])
state = net.state_dict()
try:
    from safetensors.torch import save_file
    save_file(state, sys.argv[1])
except ImportError:
    head, data = {"__metadata__": {"format": "pt"}}, b""
    for k in sorted(state):
        t = state[k].contiguous()
        b = t.numpy().tobytes()
        dtype = {torch.float32: "F32", torch.int64: "I64"}[t.dtype]
        head[k] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    hj = json.dumps(head).encode()
    open(sys.argv[1], "wb").write(struct.pack("<Q", len(hj)) + hj + data)
PYEOF
    run "$DTRAIN" train "$TMP/ft.cfg" --set data.dir="$TMP/d" --threads 1 \
        --set train.init_from="\"$TMP/torch.safetensors\"" --set checkpoint.dir="$TMP/to" --set train.max_steps=1
    expect_rc "a PyTorch module's state_dict as safetensors: fine-tune" 0
    expect_err "... its tensors loaded by name" "11 tensors loaded, 2 skipped \\(shape\\), 0 new, 0 in the file unused"
else
    skip "a PyTorch module's state_dict as safetensors" "/usr/bin/python3 has no torch"
fi

# a checkpoint written before layers had names (layers.N) loads by index
sed 's/ name = "[a-z0-9]*";//' "$TMP/pre.cfg" >"$TMP/pre-index.cfg"
run "$DTRAIN" train "$TMP/pre-index.cfg" $SETS --set checkpoint.dir="$TMP/pre-index" --set train.max_steps=2
expect_rc "pretrain with index names" 0
run "$DTRAIN" train "$TMP/ft.cfg" --set data.dir="$TMP/d" --threads 1 --set checkpoint.dir="$TMP/fi" \
    --set train.init_from="\"$TMP/pre-index/last.safetensors\"" --set train.max_steps=1
expect_rc "an index-named checkpoint into a named model" 0
expect_err "... loads by layers.N" "11 tensors loaded, 2 skipped"

# ---- errors ----
err() { # name exit-code expected-message sets...
    name=$1 code=$2 msg=$3
    shift 3
    run "$DTRAIN" train "$TMP/ft.cfg" $SETS --set checkpoint.dir="$TMP/e" --dry-run "$@"
    expect_rc "$name: exit $code" "$code"
    expect_err "$name: message" "$msg"
    expect_err_lines "$name: one line" 1
}
err "init_from file missing" 3 "train.init_from: .*/nope.safetensors: cannot open" \
    --set train.init_from="\"$TMP/nope.safetensors\""
printf 'not a checkpoint' >"$TMP/junk.safetensors"
err "init_from not a safetensors file" 3 "train.init_from: .*junk.safetensors" \
    --set train.init_from="\"$TMP/junk.safetensors\""
sed -e 's/name = "conv1"; out_channels = 4/name = "c1"; out_channels = 6/' -e 's/"conv2"/"c2"/' \
    -e 's/"bn2"/"b2"/' -e 's/"fc1"/"f1"/' -e 's/"head"/"h"/' "$TMP/ft.cfg" >"$TMP/other.cfg"
run "$DTRAIN" train "$TMP/other.cfg" $SETS --set checkpoint.dir="$TMP/e" --dry-run --set "$INIT"
expect_rc "init_from matching nothing: exit 2" 2
expect_err "init_from matching nothing: message" "train.init_from: no tensor of .* matches the model by name and shape"
err "freeze pattern matching nothing" 2 'train.freeze: "conv3" matches no parameter' \
    --set 'train.freeze=["conv3"]'
err "freeze prefix is by dotted parts" 2 'train.freeze: "conv" matches no parameter' \
    --set 'train.freeze=["conv"]'
err "freezing everything" 2 "every parameter is frozen" \
    --set 'train.freeze=["conv1","conv2","bn2","fc1","head"]'
err "lr_scale 0" 2 'optimizer.param_groups.0.lr_scale: must be in \(0, 10000\], got 0' \
    --set 'optimizer.param_groups=( { match = ["head"]; lr_scale = 0.0; } )'
err "lr_scale not a number" 2 'optimizer.param_groups.0.lr_scale: expected a number' \
    --set 'optimizer.param_groups=( { match = ["head"]; lr_scale = "x"; } )'
err "param group key unknown" 2 'optimizer.param_groups.0.lr: unknown key' \
    --set 'optimizer.param_groups=( { match = ["head"]; lr = 1.0; } )'
err "param group matching nothing" 2 'optimizer.param_groups.0.match: "fc9" matches no parameter' \
    --set 'optimizer.param_groups=( { match = ["fc9"]; lr_scale = 2.0; } )'
err "select_classes beyond the dataset" 2 'data.select_classes: class 12 is not one of the dataset.s 10' \
    --set 'data.select_classes=[3, 12]'
err "select_classes twice" 2 'data.select_classes: class 3 is listed twice' \
    --set 'data.select_classes=[3, 3]'

finish
