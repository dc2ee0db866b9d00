# `dtrain eval`'s splits and figures: --split train|val|test, top-k accuracy, per-class
# precision/recall/F1 (checked against the confusion matrix it prints), --errors N naming the
# worst misclassified files (image folders) or SPLIT#index (archives), agreeing with predict;
# predict --split names a folder's samples by their files. Bad values exit 2.
. tests/cli/lib.sh

PY=/usr/bin/python3
CFG="$(pwd)/configs/fashion-convnet.cfg"
FASHION=/usr/share/datasets/fashion-mnist
$PY bench/make_folder.py "$FASHION" "$TMP/f" --limit 256 >/dev/null
cp -r "$TMP/f/test" "$TMP/f/val"
FIX="$TMP/fix"
$PY tests/fixtures/mkdata.py idx "$FIX" --train 256 --test 64

run "$DTRAIN" train "$CFG" --overwrite --threads 1 --set data.dataset=\"shapes\" \
    --set data.format=\"folder\" --set data.dir="$TMP/f" --set checkpoint.dir="$TMP/ck" \
    --set train.batch_size=32
expect_rc "a checkpoint trained on a folder" 0
CK="$TMP/ck/last.safetensors"

# ---- the figures: top-5 by default with 10 classes; precision/recall/F1 from the matrix ----
run "$DTRAIN" eval "$CK" --threads 1 --json
expect_rc "eval --json exits 0" 0
cp "$TMP/out" "$TMP/test.json"
check "eval --json: split test, top-5 accuracy at least the accuracy, metrics match the matrix" $PY -c '
import json, sys
e = json.loads(open(sys.argv[1]).read())
assert e["split"] == "test" and e["samples"] == 256, e
assert e["top_k"] == 5 and e["accuracy"] <= e["top_k_accuracy"] <= 1, e
assert e["test_accuracy"] == e["accuracy"]
m = e["confusion"]
k = len(m)
f1s, ps, rs = [], [], []
for c in range(k):
    support = sum(m[c]); predicted = sum(m[r][c] for r in range(k)); hit = m[c][c]
    p = hit / predicted if predicted else 0.0
    r = hit / support if support else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    got = e["classes"][c]
    assert abs(got["precision"] - p) < 1e-9 and abs(got["recall"] - r) < 1e-9, (c, got, p, r)
    assert abs(got["f1"] - f) < 1e-9 and got["samples"] == support, (c, got, f)
    if support or predicted:
        ps.append(p); rs.append(r); f1s.append(f)
mac = e["macro"]
assert abs(mac["f1"] - sum(f1s) / len(f1s)) < 1e-9, mac
assert abs(mac["precision"] - sum(ps) / len(ps)) < 1e-9, mac
assert abs(mac["recall"] - sum(rs) / len(rs)) < 1e-9, mac
' "$TMP/test.json"

run "$DTRAIN" eval "$CK" --threads 1 --top-k 10 --json
check "--top-k 10 of 10 classes: top-10 accuracy is 1" $PY -c '
import json, sys
e = json.loads(sys.argv[1]); assert e["top_k"] == 10 and e["top_k_accuracy"] == 1, e' "$OUT"

run "$DTRAIN" eval "$CK" --threads 1 --top-k 3
expect_rc "eval --top-k 3 (text) exits 0" 0
expect_out "text: top-3 accuracy on the summary line" "^test samples 256  loss [0-9.]+  accuracy [0-9.]+%  top-3 accuracy [0-9.]+%$"
expect_out "text: precision, recall and F1 columns" "^class +samples +accuracy +precision +recall +F1$"
expect_out "text: one class line" "^0 +[0-9]+ +[0-9.]+% +[0-9.]+% +[0-9.]+% +[0-9.]+$"
expect_out "text: the macro average" "^\(macro avg\) +256 +[0-9.]+% +[0-9.]+% +[0-9.]+$"

# ---- --split ----
run "$DTRAIN" eval "$CK" --threads 1 --split train --json
expect_rc "eval --split train exits 0" 0
check "--split train: 256 training samples, no test_ keys" $PY -c '
import json, sys
e = json.loads(sys.argv[1]); assert e["split"] == "train" and e["samples"] == 256 and "test_accuracy" not in e, e' "$OUT"
run "$DTRAIN" eval "$CK" --threads 1 --split val --json
expect_rc "eval --split val (the folder's val/) exits 0" 0
check "--split val: a copy of test gives test's figures" $PY -c '
import json, sys
v, t = json.loads(sys.argv[1]), json.loads(open(sys.argv[2]).read())
assert v["split"] == "val" and v["confusion"] == t["confusion"] and v["loss"] == t["loss"], (v, t)' "$OUT" "$TMP/test.json"

# ---- --errors N: the worst misclassified files, worst first, as predict sees them ----
run "$DTRAIN" eval "$CK" --threads 1 --errors 4 --json
expect_rc "eval --errors 4 exits 0" 0
cp "$TMP/out" "$TMP/errors.json"
check "--errors 4: four wrong predictions, files under the data dir, surest first" $PY -c '
import json, os, sys
e = json.loads(open(sys.argv[1]).read())
errs = e["errors"]
assert len(errs) == 4, errs
ps = [x["predicted_probability"] for x in errs]
assert ps == sorted(ps, reverse=True), ps
for x in errs:
    assert x["true"] != x["predicted"] and x["predicted_probability"] > x["true_probability"], x
    assert x["file"].startswith("test/") and os.path.isfile(os.path.join(sys.argv[2], x["file"])), x
    assert x["file"].startswith("test/%s/" % x["true"]), x
' "$TMP/errors.json" "$TMP/f"
FIRST=$($PY -c 'import json,sys; print(json.loads(open(sys.argv[1]).read())["errors"][0]["file"])' "$TMP/errors.json")
run "$DTRAIN" predict "$CK" "$TMP/f/$FIRST" --threads 1 --json
check "the worst error: predict gives the same class and probability" $PY -c '
import json, sys
e = json.loads(open(sys.argv[1]).read())["errors"][0]
p = json.loads(sys.argv[2])["top"][0]
assert p["class"] == e["predicted"] and abs(p["probability"] - e["predicted_probability"]) < 1e-6, (p, e)' "$TMP/errors.json" "$OUT"

run "$DTRAIN" eval "$CK" --threads 1 --errors 2
expect_out "text: the errors list header" "^2 worst misclassified"
expect_out "text: an error line names the file and both classes" "^test/[0-9]/[0-9]+\.png  true [0-9] \([0-9.]+%\)  predicted [0-9] \([0-9.]+%\)$"

# ---- predict --split names a folder's samples by their files ----
run "$DTRAIN" predict "$CK" "$TMP/f" --split test --threads 1 --json
expect_rc "predict --split test on a folder exits 0" 0
check "predict --split: 256 samples named test/<class>/<file>.png" $PY -c '
import json, sys
rows = [json.loads(l) for l in sys.argv[1].splitlines()]
assert len(rows) == 256 and all(r["file"].startswith("test/") and r["file"].endswith(".png") for r in rows), rows[:2]' "$OUT"

# ---- archives: SPLIT#index; a split the config does not make ----
run "$DTRAIN" train "$CFG" --overwrite --threads 1 --set data.dir="$FIX" --set checkpoint.dir="$TMP/ckidx"
expect_rc "a checkpoint trained on IDX" 0
run "$DTRAIN" eval "$TMP/ckidx/last.safetensors" --threads 1 --split train --errors 3 --json
expect_rc "eval --split train on IDX exits 0" 0
check "IDX errors are named train#index" $PY -c '
import json, sys
e = json.loads(sys.argv[1])
assert e["samples"] == 256 and len(e["errors"]) == 3, e
assert all(x["file"] == "train#%d" % x["index"] for x in e["errors"]), e["errors"]' "$OUT"
run "$DTRAIN" eval "$TMP/ckidx/last.safetensors" --threads 1 --split val
expect_rc "--split val without a val split: exit 3" 3
expect_err "...saying where one comes from" "no val split \(an image folder's val/, or data.val_fraction"
run "$DTRAIN" eval "$TMP/ckidx/last.safetensors" --threads 1 --split val --set data.val_fraction=0.25 --json
expect_rc "--split val with data.val_fraction: exit 0" 0
cp "$TMP/out" "$TMP/val.json"
run "$DTRAIN" eval "$TMP/ckidx/last.safetensors" --threads 1 --split train --set data.val_fraction=0.25 --json
check "...about a quarter held out, and train is the rest" $PY -c '
import json, sys
v, t = json.loads(open(sys.argv[1]).read()), json.loads(sys.argv[2])
assert v["split"] == "val" and 56 <= v["samples"] <= 72 and v["samples"] + t["samples"] == 256, (v, t)' "$TMP/val.json" "$OUT"

# ---- bad values: exit 2, one line ----
run "$DTRAIN" eval "$CK" --split dev
expect_rc "--split dev: exit 2" 2
expect_err "...naming the valid splits" "--split: expected train, val or test, got 'dev'"
run "$DTRAIN" eval "$CK" --top-k 11 --threads 1
expect_rc "--top-k 11 with 10 classes: exit 2" 2
expect_err "...saying how many classes" "--top-k 11: the model has 10 classes"
run "$DTRAIN" eval "$CK" --errors 0
expect_rc "--errors 0: exit 2" 2
expect_err_lines "...one line" 1
run "$DTRAIN" eval "$CK" --top-k x
expect_rc "--top-k x: exit 2" 2

finish
