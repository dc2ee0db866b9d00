# Where the time goes: the epoch and final events' time breakdown (rank 0 and the slowest rank),
# --profile's totals, and --trace's Chrome trace of a 2 x 1 ResNet-20 run on tiny generated
# CIFAR-format data, loaded with Python's json and checked for its tracks and event kinds; a run
# that fails part-way (a rank killed) still leaves the events it recorded.
. tests/cli/lib.sh

PY=/usr/bin/python3
$PY tests/fixtures/mkdata.py cifar10 "$TMP/cifar" --train 64 --test 16 >/dev/null
R20="configs/cifar10-resnet20.cfg --set data.dir=$TMP/cifar --set train.batch_size=16 --threads 1"

run "$DTRAIN" train $R20 --set train.epochs=2 --instances 2 --set checkpoint.dir="$TMP/r20" \
    --trace "$TMP/trace.json" --json --profile
expect_rc "2 x 1 ResNet-20 with --trace: exit 0" 0
expect_err "--trace names its file" "trace: [0-9]+ events in $TMP/trace.json"
expect_err "the epoch line says where the time went" \
    "epoch 1/2: .* \| data [0-9.]+ fwd [0-9.]+ bwd [0-9.]+ wait [0-9.]+ opt [0-9.]+ ckpt [0-9.]+ s"
expect_err "--profile ends with the run's totals" "time totals of the run, 8 steps:"
expect_err "--profile: rank 0's and the slowest rank's" "slowest: rank [01] +data"
check "no part file left beside the trace" test -z "$(ls "$TMP" | grep '\.part$')"

cat >"$TMP/check_times.py" <<'PYEOF'
import json, sys
kinds = ["data_s", "forward_s", "backward_s", "allreduce_wait_s", "optimizer_s", "checkpoint_s",
         "eval_s"]
events = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
epochs = [e for e in events if e["event"] == "epoch"]
final = [e for e in events if e["event"] == "final"][0]
assert len(epochs) == 2, epochs
for e in epochs + [final]:
    t0, ts = e["time_rank0"], e["time_slowest"]
    assert all(isinstance(t0[k], float) and t0[k] >= 0 for k in kinds), t0
    assert all(isinstance(ts[k], float) and ts[k] >= 0 for k in kinds), ts
    assert ts["rank"] in (0, 1), ts
# the run's totals are the epochs' sums, give or take the last checkpoint write after them
run = sum(e["time_rank0"]["forward_s"] for e in epochs)
assert abs(final["time_rank0"]["forward_s"] - run) < 1e-3, (final, run)
assert final["time_rank0"]["forward_s"] > 0 and final["time_rank0"]["backward_s"] > 0
PYEOF
check "epoch and final events carry the time of every kind, rank 0 and the slowest" \
    $PY "$TMP/check_times.py" "$TMP/out"

cat >"$TMP/check_trace.py" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
ranks = int(sys.argv[2])
ev = d["traceEvents"]
meta = [e for e in ev if e["ph"] == "M"]
spans = [e for e in ev if e["ph"] == "X"]
assert len(spans) + len(meta) == len(ev), "only complete and metadata events"
pids = sorted({e["pid"] for e in spans})
assert pids == list(range(ranks)), pids
for p in pids:
    names = {(e["name"], e["tid"]): e["args"] for e in meta if e["pid"] == p}
    assert names[("process_name", 0)]["name"] == "rank %d" % p, names
    assert names[("thread_name", 0)]["name"] == "training loop", names
    assert names[("thread_name", 1)]["name"] == "checkpoint writer", names
    mine = [e for e in spans if e["pid"] == p and e["tid"] == 0]
    kinds = {e["name"] for e in mine}
    for k in ("step", "data", "forward", "backward", "allreduce", "optimizer", "eval"):
        assert k in kinds, (p, k, sorted(kinds))
    cats = {e["cat"] for e in mine}
    assert {"step", "data", "compute", "collective", "optimizer", "eval", "layer"} <= cats, cats
    layers = {e["name"].split()[0] for e in mine if e["cat"] == "layer"}
    assert layers == {"forward", "backward"}, layers
    assert any(e["name"] == "forward 0 conv2d" for e in mine)
    steps = [e for e in mine if e["name"] == "step"]
    assert [e["args"]["step"] for e in steps] == sorted(e["args"]["step"] for e in steps)
    for e in spans:
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0, e
if sys.argv[3] == "writer":
    w = [e for e in spans if e["pid"] == 0 and e["tid"] == 1]
    assert w and all(e["name"] == "checkpoint write" for e in w), w
    assert any(e["name"] == "checkpoint" and e["tid"] == 0 for e in spans if e["pid"] == 0)
# a step's phases lie inside it
for p in pids:
    st = [e for e in spans if e["pid"] == p and e["name"] == "step"]
    fw = [e for e in spans if e["pid"] == p and e["name"] == "forward" and e["cat"] == "compute"]
    for s in st[:3]:
        inside = [f for f in fw if f["args"]["step"] == s["args"]["step"]]
        assert len(inside) == 1, inside
        f = inside[0]
        assert s["ts"] <= f["ts"] + 1e-3 and f["ts"] + f["dur"] <= s["ts"] + s["dur"] + 1e-3
print(len(ev))
PYEOF
run $PY "$TMP/check_trace.py" "$TMP/trace.json" 2 writer
expect_rc "the trace loads with json: a track per rank and thread, steps, layers, all-reduce, optimizer, data, eval, checkpoint" 0

run "$DTRAIN" train $R20 --set train.max_steps=2 --set checkpoint.dir="$TMP/one" \
    --trace "$TMP/one.json" --quiet
expect_rc "1 x 1 with --trace --quiet: exit 0" 0
check "...writes the trace silently" test -s "$TMP/one.json" -a ! -s "$TMP/err"
run $PY "$TMP/check_trace.py" "$TMP/one.json" 1 writer
expect_rc "...one rank's tracks" 0

run "$DTRAIN" train $R20 --trace "$TMP/no/such/dir/t.json" --set checkpoint.dir="$TMP/nd"
expect_rc "--trace into a missing directory: runtime error" 1
expect_err "...naming the file" "--trace: cannot write $TMP/no/such/dir/t.json.rank0.part"
run "$DTRAIN" train $R20 --trace ""
expect_rc "--trace with an empty name: usage error" 2

# A rank killed with SIGKILL mid-run: the job fails (exit 1), and the trace holds what both ranks
# recorded up to their last flush (every epoch's end).
"$DTRAIN" train $R20 --set train.epochs=100000 --instances 2 --set checkpoint.dir="$TMP/kill" \
    --trace "$TMP/kill.json" --quiet >"$TMP/out" 2>"$TMP/err" &
pid=$!
i=0
while [ $i -lt 600 ]; do
    n=$(cat "$TMP"/kill.json.rank*.part 2>/dev/null | grep -c '"name":"eval"')
    [ "${n:-0}" -ge 2 ] && break
    sleep 0.05
    i=$((i + 1))
done
victim=$(pgrep -P $pid | head -n 1)
kill -9 "$victim"
wait $pid
RC=$?
expect_rc "a rank killed mid-run: exit 1" 1
run $PY "$TMP/check_trace.py" "$TMP/kill.json" 2 any
expect_rc "...and the trace still holds both ranks' recorded epochs" 0
check "...with no part file left" test -z "$(ls "$TMP" | grep '\.part$')"

finish
