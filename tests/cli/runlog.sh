# The run directory's history and `dtrain report`: config.cfg, cmdline.txt, events.jsonl,
# metrics.csv and TensorBoard files after a run and after a resume (steps continuous, the
# resumed epoch's train figures the whole epoch's), every TensorBoard scalar read back by a
# decoder written from the wire specs (tests/tools/tfevents.py) and compared with the CSV and
# the events, the best epoch named in events and by eval, report's SVG data against the CSV,
# a torn last record tolerated, report's and eval --plot's errors.
. tests/cli/lib.sh

CFG="$(pwd)/configs/fashion-convnet.cfg"
FIX="$TMP/fix"
/usr/bin/python3 tests/fixtures/mkdata.py idx "$FIX" --train 256 --test 64
train() { # DIR [options...]: 2 steps per epoch, a line and a step row every step
    dir=$1
    shift
    run "$DTRAIN" train "$CFG" --threads 1 --set data.dir="$FIX" --set checkpoint.dir="$dir" \
        --set train.epochs=3 --log-every 1 --quiet "$@"
}

# ---- an uninterrupted run, and one stopped inside epoch 2 then resumed ----
train "$TMP/whole"
expect_rc "uninterrupted run exits 0" 0
check "no events on stdout without --json" test ! -s "$TMP/out"
train "$TMP/split" --set train.max_steps=3
expect_rc "run to step 3 (inside epoch 2) exits 0" 0
ls "$TMP/split" | sort | tr '\n' ' ' >"$TMP/files1"
train "$TMP/split" --resume auto --json
expect_rc "resumed run exits 0" 0
expect_out "--json still prints the events" '"event":"final"'
for f in config.cfg cmdline.txt events.jsonl metrics.csv last.safetensors best.safetensors; do
    check "run directory holds $f" test -s "$TMP/split/$f"
done
# a file per invocation, events.out.tfevents.<time>.<host> (two in the same second share it)
check "TensorBoard event files named events.out.tfevents.<time>.<host>" \
    test "$(ls "$TMP/split" | grep -c '^events\.out\.tfevents\.[0-9]*\.')" -ge 1
check "cmdline.txt: a line per invocation, the resume's with --resume" \
    sh -c "test \$(wc -l <'$TMP/split/cmdline.txt') -eq 2 && tail -1 '$TMP/split/cmdline.txt' | grep -q -- '--resume auto'"
check "cmdline.txt keeps the order as typed (the config before the options)" \
    sh -c "head -1 '$TMP/split/cmdline.txt' | grep -q -- ' train $CFG --threads 1 '"
"$DTRAIN" train "$CFG" --set data.dir="$FIX" --set checkpoint.dir="$TMP/split" --set train.epochs=3 \
    --log-every 1 --threads 1 --quiet --json --print-config >"$TMP/printed" 2>/dev/null
check "config.cfg is what --print-config prints (of the latest invocation)" cmp -s "$TMP/printed" "$TMP/split/config.cfg"
check "events.jsonl has every event: start, steps, epochs, resume, final" sh -c \
    "grep -c '\"event\":\"resume\"' '$TMP/split/events.jsonl' | grep -qx 1 && grep -c '\"event\":\"final\"' '$TMP/split/events.jsonl' | grep -qx 2"

cat >"$TMP/check.py" <<'PY'
import csv, glob, json, math, sys
sys.path.insert(0, "tests/tools")
import tfevents

def rows(path):
    """metrics.csv with the resume rule: a resume row drops earlier rows past its step."""
    out = []
    for r in csv.DictReader(open(path)):
        if r["kind"] == "resume":
            out = [o for o in out if float(o["step"]) <= float(r["step"])]
        out.append(r)
    return out

def num(v):
    return float(v) if v != "" else None

def close(a, b):
    return a is not None and b is not None and math.isclose(a, b, rel_tol=2e-7, abs_tol=1e-30)

run, whole = sys.argv[1], sys.argv[2]
R = rows(run + "/metrics.csv")
steps = [int(r["step"]) for r in R if r["kind"] == "step"]
assert steps == list(range(1, 7)), "step rows not continuous: %s" % steps
epochs = [r for r in R if r["kind"] == "epoch"]
# epoch 2 was reported twice: partly when the first run ended at step 3, whole after the resume
last2 = [r for r in epochs if r["epoch"] == "2"][-1]
assert last2["resumed_at"] == "3" and last2["train_steps"] == "2", last2
W = rows(whole + "/metrics.csv")
w2 = [r for r in W if r["kind"] == "epoch" and r["epoch"] == "2"][-1]
assert last2["train_loss"] == w2["train_loss"] and last2["train_accuracy"] == w2["train_accuracy"], \
    "resumed epoch 2 %s/%s, uninterrupted %s/%s" % (last2["train_loss"], last2["train_accuracy"],
                                                   w2["train_loss"], w2["train_accuracy"])

# TensorBoard: every scalar, CRCs checked, against the CSV row of the same step and kind
tags = {"train/loss": "train_loss", "train/accuracy": "train_accuracy", "val/loss": "val_loss",
        "val/accuracy": "val_accuracy", "test/loss": "test_loss", "test/accuracy": "test_accuracy",
        "lr": "lr", "samples_per_sec": "samples_per_s"}
events, versions = [], 0
for path in sorted(glob.glob(run + "/events.out.tfevents.*")):
    evs = tfevents.read_events(path)
    assert evs[0].get("file_version") == "brain.Event:2", path
    versions += sum(1 for e in evs if e.get("file_version") == "brain.Event:2")
    events += [e for e in evs if "file_version" not in e]
assert versions == 2, "%d file_version records for 2 invocations" % versions
# the TensorBoard purge rule, as metrics.csv's: a session start drops later steps before it
kept = []
for e in events:
    if e.get("session_status") == 1:
        kept = [k for k in kept if k["step"] <= e["step"]]
    else:
        kept.append(e)
allrows = list(R)
n = 0
for e in kept:
    cands = [r for r in allrows if int(r["step"]) == e["step"] and r["kind"] != "resume"
             and all(close(v, num(r[tags[t]])) for t, v in e["scalars"].items())]
    assert cands, "no CSV row matches TensorBoard step %d %s" % (e["step"], e["scalars"])
    allrows.remove(cands[0])
    n += len(e["scalars"])
assert not [r for r in allrows if r["kind"] != "resume"], "CSV rows with no TensorBoard event"
# events.jsonl: the same figures
J = [json.loads(l) for l in open(run + "/events.jsonl")]
for r in R:
    if r["kind"] == "epoch":
        ev = [j for j in J if j["event"] == "epoch" and j["step"] == int(r["step"])
              and j["epoch"] == int(r["epoch"])][-1]
        for col in ("train_loss", "test_loss", "test_accuracy", "lr", "samples_per_s"):
            assert close(ev[col], num(r[col])), (col, ev[col], r[col])
        assert int(ev["best"]) == int(r["best"])
final = [j for j in J if j["event"] == "final"][-1]
best = [j for j in J if j["event"] == "epoch" and j.get("best")][-1]
bc = final["best_checkpoint"]
assert (bc["epoch"], bc["step"], bc["metric"]) == (best["epoch"], best["step"], "train_loss"), (bc, best)
assert close(bc["score"], best["train_loss"])
assert final["last_checkpoint"] == {"file": "last.safetensors", "epoch": 3, "step": 6}
print("checked %d scalars" % n)
PY
run /usr/bin/python3 "$TMP/check.py" "$TMP/split" "$TMP/whole"
if [ "$RC" -eq 0 ]; then pass "TensorBoard scalars = metrics.csv = events.jsonl; steps continuous; resumed epoch whole ($OUT)"; else fail "history cross-check" "$ERR"; fi

# ---- report ----
run "$DTRAIN" report "$TMP/split"
expect_rc "report exits 0" 0
expect_out "report names the best epoch" "best epoch [0-9]+ \(step [0-9]+\), train_loss"
for c in loss accuracy lr loss_epoch accuracy_epoch; do
    check "report wrote $c.svg and a PNG $c.png" sh -c \
        "test -s '$TMP/split/$c.svg' && head -c 8 '$TMP/split/$c.png' | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a'"
done
cat >"$TMP/svg.py" <<'PY'
import csv, math, sys
import xml.etree.ElementTree as ET
run = sys.argv[1]
R = []
for r in csv.DictReader(open(run + "/metrics.csv")):
    if r["kind"] == "resume":
        R = [o for o in R if float(o["step"]) <= float(r["step"])]
    R.append(r)
def series(svg):
    out = {}
    for el in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}polyline"):
        xs = [float(v) for v in el.get("data-x").split()]
        ys = [float(v) for v in el.get("data-y").split()]
        pts = el.get("points").split()
        assert len(pts) == len(xs) == len(ys)
        out[el.get("data-series")] = list(zip(xs, ys))
    return out
def expect(kind, x, y):
    got = [(float(r[x]), float(r[y])) for r in R if r["kind"] == kind and r[y] != ""]
    if kind == "epoch":  # the last report of each epoch
        last = {}
        for p, r in zip(got, [r for r in R if r["kind"] == kind and r[y] != ""]):
            last[r["epoch"]] = p
        got = [p for p in got if p in last.values()]
    return got
def same(a, b):
    return len(a) == len(b) and all(math.isclose(p[0], q[0]) and math.isclose(p[1], q[1], rel_tol=1e-8) for p, q in zip(a, b))
s = series(run + "/loss.svg")
assert same(s["train_loss"], expect("step", "step", "train_loss")), s["train_loss"]
assert same(s["test_loss"], expect("epoch", "step", "test_loss")), s["test_loss"]
s = series(run + "/accuracy_epoch.svg")
assert same(s["test_accuracy"], expect("epoch", "epoch", "test_accuracy")), s["test_accuracy"]
s = series(run + "/lr.svg")
assert same(s["lr"], expect("step", "step", "lr"))
print("ok")
PY
run /usr/bin/python3 "$TMP/svg.py" "$TMP/split"
if [ "$RC" -eq 0 ]; then pass "the SVG polylines' data are metrics.csv's"; else fail "SVG data" "$ERR"; fi
run "$DTRAIN" report "$TMP/split" --compare "$TMP/whole" --out "$TMP/cmp"
expect_rc "report --compare exits 0" 0
check "--compare puts both runs on one chart" sh -c \
    "grep -q 'data-series=\"split:train_loss\"' '$TMP/cmp/compare_loss.svg' && grep -q 'data-series=\"whole:train_loss\"' '$TMP/cmp/compare_loss.svg'"

# ---- damaged histories ----
cp -r "$TMP/split" "$TMP/torn"
tf=$(ls "$TMP/torn"/events.out.tfevents.* | tail -1)
size=$(wc -c <"$tf")
head -c $((size - 5)) "$tf" >"$TMP/cut" && cp "$TMP/cut" "$tf"
run "$DTRAIN" report "$TMP/torn"
expect_rc "a torn last TensorBoard record: report exits 0" 0
expect_err "... and says it left it out" "last record is cut short"
printf 'step,7,4,0.1,2.3' >>"$TMP/torn/metrics.csv"
run "$DTRAIN" report "$TMP/torn"
expect_rc "a torn last metrics.csv line: report exits 0" 0
expect_err "... and says so" "metrics.csv: the last line is cut short"
cp -r "$TMP/split" "$TMP/bad"
tf=$(ls "$TMP/bad"/events.out.tfevents.* | head -1)
/usr/bin/python3 -c "
import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[40] ^= 0xff; open(p, 'wb').write(b)" "$tf"
run "$DTRAIN" report "$TMP/bad"
expect_rc "a damaged TensorBoard record: exit 3" 3
expect_err "... naming the file and the CRC" "events.out.tfevents.*CRC mismatch"
expect_err_lines "... in one line" 1
run "$DTRAIN" report "$TMP/nonexistent"
expect_rc "missing run directory: exit 3" 3
expect_err "... one line naming it" "nonexistent: no such run directory"
mkdir "$TMP/empty"
run "$DTRAIN" report "$TMP/empty"
expect_rc "a directory without metrics.csv: exit 3" 3
expect_err "... says so" "no metrics.csv"
: >"$TMP/empty/metrics.csv"
run "$DTRAIN" report "$TMP/empty"
expect_rc "an empty metrics.csv: exit 3" 3
printf 'kind,step,epoch\n' >"$TMP/empty/metrics.csv"
run "$DTRAIN" report "$TMP/empty"
expect_rc "a metrics.csv with no rows: exit 3" 3
expect_err "... says nothing was logged" "no step or epoch logged yet"
printf 'kind,step,epoch\nstep,abc,1\n' >"$TMP/empty/metrics.csv"
run "$DTRAIN" report "$TMP/empty"
expect_rc "a corrupt metrics.csv: exit 3" 3
expect_err "... naming the line" "metrics.csv: line 2: step \"abc\" is not a number"
run "$DTRAIN" report
expect_rc "report without a directory: exit 2" 2

# ---- eval names the checkpoint's position and draws the confusion matrix ----
run "$DTRAIN" eval "$TMP/split/best.safetensors" --data "$FIX" --threads 1 --plot "$TMP/conf.svg"
expect_rc "eval --plot exits 0" 0
expect_out "eval names the epoch and step it read" "best.safetensors \(epoch [0-9]+, step [0-9]+\)"
check "eval --plot drew a heat map of 100 cells" \
    test "$(grep -c '<rect' "$TMP/conf.svg")" -ge 100
run "$DTRAIN" eval "$TMP/split/last.safetensors" --data "$FIX" --threads 1 --json --plot "$TMP/conf.png"
expect_out "eval --json: epoch and step" '"epoch":3,"step":6'
check "eval --plot FILE.png writes a PNG" sh -c "head -c 4 '$TMP/conf.png' | grep -q PNG"
run "$DTRAIN" eval "$TMP/split/last.safetensors" --plot "$TMP/conf.gif"
expect_rc "eval --plot with another extension: exit 2" 2

finish
