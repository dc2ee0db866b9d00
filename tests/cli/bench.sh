# `dtrain bench`: a short sweep on a generated tiny dataset (tests/fixtures/mkdata.py) whose
# CSV, JSON and SVG parse and hold every row; a failing or timed-out combination reported in
# its row while the sweep goes on; SIGINT printing the rows done; the all-reduce benchmark on
# tcp and shm with 2 and 3 ranks and small sizes. Nothing here asserts a timing.
. tests/cli/lib.sh

PY=/usr/bin/python3
DATA="$TMP/data"
$PY tests/fixtures/mkdata.py idx "$DATA" --train 512 --test 64
CFG=configs/fashion-convnet.cfg
SWEEP="--set data.dir=$DATA --steps 3 --warmup 1"

# ---- the sweep: 1x2 and 2x1 on this machine's 2 cores ----
run "$DTRAIN" bench $CFG $SWEEP --cores 2 --csv "$TMP/s.csv" --plot "$TMP/s.svg"
expect_rc "sweep exits 0" 0
expect_out "header: machine" "^# machine: .*socket.*cores?, SMT (on|off)"
expect_out "header: BLAS and threading" "^# BLAS: .*threading"
expect_out "header: version and config" "^# dtrain [0-9.]+ bench: $CFG"
expect_out "table has the 1 x 2 row" "^ +1 +2 +[0-9.]+ +[0-9.]+ "
expect_out "table has the 2 x 1 row" "^ +2 +1 +[0-9.]+ +[0-9.]+ "
expect_err "progress names the combination" "bench \[2/2\] 2 x 1"
check "CSV parses, one row per combination" $PY -c '
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [(r["instances"], r["threads"]) for r in rows] == [("1", "2"), ("2", "1")], rows
r = rows[0]
assert r["error"] == "" and float(r["samples_per_s"]) > 0 and float(r["s_per_step"]) > 0, r
assert abs(float(r["speedup"]) - 1) < 1e-9, r
for r in rows:  # 2 x 1 runs two forked ranks averaging gradients through shared memory
    assert r["error"] == "" and float(r["samples_per_s"]) > 0 and r["runs"] == "1", r
' "$TMP/s.csv"
check "SVG parses, one bar per row" $PY -c '
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
bars = [r for r in root.iter("{http://www.w3.org/2000/svg}rect") if "bar" in (r.get("class") or "").split()]
assert len(bars) == 2, len(bars)
text = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
assert "1 x 2" in text and "2 x 1" in text, text
' "$TMP/s.svg"

run "$DTRAIN" bench $CFG $SWEEP --cores 2 --json --quiet
expect_rc "sweep --json exits 0" 0
check "JSON: machine object, then every row" $PY -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
assert lines[0]["event"] == "bench_machine" and lines[0]["cores"] >= 1 and lines[0]["cpu"], lines[0]
assert lines[0]["blas"] and lines[0]["blas_threading"] and lines[0]["dtrain"], lines[0]
rows = lines[1:]
assert [(r["event"], r["instances"], r["threads"]) for r in rows] == \
    [("bench_row", 1, 2), ("bench_row", 2, 1)], rows
assert rows[0]["ok"] and rows[0]["samples_per_s"] > 0 and rows[0]["test_accuracy"] is None
for r in rows:
    assert r["ok"] and r["samples_per_s"] > 0 and r["s_per_step"] > 0, r
' "$TMP/out"
if [ -s "$TMP/err" ]; then fail "--quiet prints no progress" "$(head -c 200 "$TMP/err")"; else
    pass "--quiet prints no progress"; fi

run "$DTRAIN" bench $CFG $SWEEP --threads-only --cores 2 --json --quiet
check "--threads-only sweeps 1x1, 1x2 with speedup over 1x1" $PY -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()][1:]
assert [(r["instances"], r["threads"]) for r in rows] == [(1, 1), (1, 2)], rows
assert rows[0]["speedup"] == 1 and rows[0]["efficiency"] == 1, rows[0]
' "$TMP/out"

run "$DTRAIN" bench $CFG --set data.dir="$DATA" --set train.batch_size=256 --epochs 1 \
    --grid 1x2 --repeat 2 --json --quiet
expect_rc "--epochs --repeat exits 0" 0
check "--epochs reports s/epoch and test accuracy, --repeat the runs" $PY -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()][1:]
assert len(rows) == 1 and rows[0]["ok"], rows
r = rows[0]
assert r["s_per_epoch"] > 0 and 0 <= r["test_accuracy"] <= 1 and r["runs"] == 2, r
assert r["samples_per_s_min"] <= r["samples_per_s"] <= r["samples_per_s_max"], r
' "$TMP/out"

# ---- robustness ----
run "$DTRAIN" bench $CFG $SWEEP --grid 1x1,1x2000,1x2 --csv "$TMP/f.csv" --plot "$TMP/f.svg"
expect_rc "a failing combination does not end the sweep" 0
expect_out "the failure is in its row" "^ +1 +2000 +FAILED: .*threads.*exit code 2"
expect_out "the row after it ran" "^ +1 +2 +[0-9.]+ "
check "failed row in CSV and SVG" $PY -c '
import csv, sys, xml.etree.ElementTree as ET
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 3 and rows[1]["error"] and rows[1]["samples_per_s"] == "", rows
assert not rows[0]["error"] and not rows[2]["error"], rows
ns = "{http://www.w3.org/2000/svg}"
bars = [r for r in ET.parse(sys.argv[2]).getroot().iter(ns + "rect") if "bar" in (r.get("class") or "")]
assert len(bars) == 3 and "failed" in bars[1].get("class"), [b.get("class") for b in bars]
' "$TMP/f.csv" "$TMP/f.svg"

run "$DTRAIN" bench $CFG --set data.dir="$DATA" --grid 1x1 --steps 100000000 --timeout 1
expect_rc "a sweep whose every run failed exits 1 (here: past --timeout)" 1
expect_out "the timeout is named" "FAILED: timed out after 1 s"
expect_err "every run failed: said on stderr" "every combination failed \(1 of 1\)"

run "$DTRAIN" bench $CFG $SWEEP --grid 1x1 --cores 4096
expect_rc "--cores beyond the usable CPUs still runs" 0
expect_err "--cores beyond the usable CPUs warns" "--cores 4096 exceeds the [0-9]+ usable CPUs"

run "$DTRAIN" bench $CFG --grid 2y2
expect_rc "bad --grid exits 2" 2
expect_err "bad --grid named" "--grid: '2y2' is not a list"
run "$DTRAIN" bench $CFG --steps 5 --epochs 1
expect_rc "--steps with --epochs exits 2" 2
run "$DTRAIN" bench "$TMP/none.cfg"
expect_rc "missing config exits 2 (usage) before any run" 2
if grep -q 'bench \[1/' "$TMP/err"; then fail "missing config: no run started" "$ERR"; else
    pass "missing config: no run started"; fi
run "$DTRAIN" bench $CFG --set data.dir="$DATA" --set train.nonsense=1
expect_rc "a bad --set exits 2 before any run" 2

# SIGINT after the first row: the rows done are printed, exit 130, no child left behind.
"$DTRAIN" bench $CFG --set data.dir="$DATA" --steps 10 --warmup 1 --grid 1x1,1x1,1x1,1x1,1x1,1x1 \
    --json >"$TMP/int.out" 2>"$TMP/int.err" &
pid=$!
i=0
while [ $i -lt 600 ] && ! grep -q '^dtrain: bench \[1/6\] 1 x 1: [0-9]' "$TMP/int.err" 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
done
kill -INT $pid
wait $pid
RC=$?
expect_rc "SIGINT stops the sweep with 130" 130
check "SIGINT: the rows done are printed" $PY -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
assert lines[0]["event"] == "bench_machine" and 1 <= len(lines) - 1 < 6, lines
assert all(r["ok"] for r in lines[1:]), lines
' "$TMP/int.out"
if grep -q "stopped by SIGINT after" "$TMP/int.err"; then pass "SIGINT: says it stopped"; else
    fail "SIGINT: says it stopped" "$(tail -c 300 "$TMP/int.err")"; fi

# ---- all-reduce ----
check_allreduce() { # name instances
    $PY -c '
import json, sys
n = int(sys.argv[2])
lines = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
assert lines[0]["event"] == "bench_machine", lines[0]
rows = lines[1:]
assert [r["bytes"] for r in rows] == [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192], rows
for r in rows:
    assert r["event"] == "allreduce_row" and r["ok"] and r["check"] == "ok", r
    assert r["us"] > 0 and r["algbw_GBs"] > 0, r
    assert abs(r["busbw_GBs"] - r["algbw_GBs"] * 2 * (n - 1) / n) <= 1e-6 * r["busbw_GBs"], r
' "$TMP/out" "$1"
}
for backend in tcp shm; do
    for n in 2 3; do
        run "$DTRAIN" bench allreduce --backend $backend --instances $n --min-bytes 4 \
            --max-bytes 8K --iters 20 --json
        expect_rc "allreduce $backend x $n exits 0" 0
        check "allreduce $backend x $n: every size, checked, busbw = algbw 2(n-1)/n" \
            check_allreduce $n
    done
done

run "$DTRAIN" bench allreduce --backend hier --instances 4 --nodes 2 --min-bytes 4 \
    --max-bytes 8K --iters 10 --json
expect_rc "allreduce hier 2 nodes x 2 exits 0" 0
check "allreduce hier 2 nodes x 2: every size, checked" check_allreduce 4

DTRAIN_MPI=${DTRAIN_MPI_BIN:-./build-mpi/dtrain}
if command -v mpirun >/dev/null && [ -x "$DTRAIN_MPI" ]; then
    run mpirun --allow-run-as-root --oversubscribe -np 3 "$DTRAIN_MPI" bench allreduce \
        --backend mpi --min-bytes 4 --max-bytes 8K --iters 20 --json
    expect_rc "allreduce mpi x 3 (mpirun) exits 0" 0
    check "allreduce mpi x 3: rank 0 alone reports every size, checked" check_allreduce 3
else
    skip "allreduce mpi" "no mpirun or no MPI=1 build (make dtrain-mpi)"
fi

run "$DTRAIN" bench allreduce --backend tcp --instances 2 --min-bytes 1K --max-bytes 4K \
    --iters 5 --csv "$TMP/a.csv" --plot "$TMP/a.svg"
expect_rc "allreduce text table exits 0" 0
expect_out "allreduce table header" "^ *size +bytes +us +algbw GB/s +busbw GB/s"
expect_out "allreduce row" "^ *4 KiB +4096 +[0-9.]+ "
check "allreduce CSV and SVG" $PY -c '
import csv, sys, xml.etree.ElementTree as ET
rows = list(csv.DictReader(open(sys.argv[1])))
assert [int(r["bytes"]) for r in rows] == [1024, 2048, 4096], rows
ns = "{http://www.w3.org/2000/svg}"
bars = [r for r in ET.parse(sys.argv[2]).getroot().iter(ns + "rect") if r.get("class") == "bar"]
assert len(bars) == 3, len(bars)
' "$TMP/a.csv" "$TMP/a.svg"

# across hosts: one process per "host" (here both on loopback), rank 0 reports
port=$((30000 + $$ % 20000))
DTRAIN_TOKEN=bench-across-hosts-$$-0123456789 "$DTRAIN" bench allreduce --backend tcp --nodes 3 \
    --node-rank 2 --master 127.0.0.1:$port --min-bytes 4 --max-bytes 8K --iters 10 --quiet \
    >"$TMP/h2.out" 2>"$TMP/h2.err" &
p2=$!
DTRAIN_TOKEN=bench-across-hosts-$$-0123456789 "$DTRAIN" bench allreduce --backend tcp --nodes 3 \
    --node-rank 1 --master 127.0.0.1:$port --min-bytes 4 --max-bytes 8K --iters 10 --quiet \
    >"$TMP/h1.out" 2>"$TMP/h1.err" &
p1=$!
DTRAIN_TOKEN=bench-across-hosts-$$-0123456789 run "$DTRAIN" bench allreduce --backend tcp \
    --nodes 3 --node-rank 0 --master 127.0.0.1:$port --min-bytes 4 --max-bytes 8K --iters 10 \
    --json
expect_rc "allreduce across hosts (--master), rank 0 exits 0" 0
check "allreduce across hosts: rank 0 reports every size, checked" check_allreduce 3
wait $p1 && wait $p2
expect_rc "allreduce across hosts: the other ranks exit 0" 0
if [ ! -s "$TMP/h1.out" ] && [ ! -s "$TMP/h2.out" ]; then pass "allreduce across hosts: only rank 0 prints"; else
    fail "allreduce across hosts: only rank 0 prints" "$(head -c 200 "$TMP/h1.out")"; fi
env -u DTRAIN_TOKEN "$DTRAIN" bench allreduce --backend tcp --nodes 2 --node-rank 0 \
    --master 127.0.0.1:$port >/dev/null 2>"$TMP/err"
RC=$? ERR=$(cat "$TMP/err")
expect_rc "across hosts without DTRAIN_TOKEN exits 2" 2
expect_err "across hosts without a token: says so" "DTRAIN_TOKEN"
run "$DTRAIN" bench allreduce --backend shm --nodes 2 --node-rank 0 --master 127.0.0.1:$port
expect_rc "--master with the shm backend exits 2" 2
expect_err "--master with shm: names what is needed" "--backend tcp --nodes M --node-rank K"
run "$DTRAIN" bench allreduce --backend tcp --nodes 2 --node-rank 2 --master 127.0.0.1:$port
expect_rc "--node-rank outside --nodes exits 2" 2
run "$DTRAIN" bench allreduce --backend tcp --nodes 2 --node-rank 0 --master 127.0.0.1
expect_rc "--master without a port exits 2" 2
run "$DTRAIN" bench configs/fashion-convnet.cfg --master 127.0.0.1:1
expect_rc "--master with a training sweep exits 2" 2
# the launch flags are train's (cmd/cli.c): the same names and ranges, --token-file included
env -u DTRAIN_TOKEN "$DTRAIN" bench allreduce --backend tcp --nodes 2 --node-rank 0 \
    --master 127.0.0.1:$port --token-file "$TMP/no-such-token" >/dev/null 2>"$TMP/err"
RC=$? ERR=$(cat "$TMP/err")
expect_err "across hosts with --token-file: reads that file" "no-such-token"
run "$DTRAIN" bench allreduce --backend tcp --nodes 70000 --node-rank 0 --master 127.0.0.1:1
expect_rc "--nodes beyond train's range exits 2" 2
expect_err "--nodes beyond the range: names it" "--nodes: expected an integer between 1 and 65536"
run "$DTRAIN" bench configs/fashion-convnet.cfg --token-file "$TMP/t"
expect_err "--token-file with a training sweep: belongs to allreduce" "belong to 'bench allreduce'"
DTRAIN_SOCKET_BUFFER=256K run "$DTRAIN" bench allreduce --backend tcp --instances 2 \
    --min-bytes 4 --max-bytes 8K --iters 10 --json
expect_rc "DTRAIN_SOCKET_BUFFER=256K: exits 0" 0
check "DTRAIN_SOCKET_BUFFER=256K: every size, checked" check_allreduce 2
DTRAIN_SOCKET_BUFFER=12X run "$DTRAIN" bench allreduce --backend tcp --instances 2
expect_rc "a malformed DTRAIN_SOCKET_BUFFER exits 2" 2
expect_err "a malformed DTRAIN_SOCKET_BUFFER: names the variable and the value" \
    "DTRAIN_SOCKET_BUFFER: expected a size.*got '12X'"
DTRAIN_SOCKET_BUFFER=2G run "$DTRAIN" train configs/fashion-convnet.cfg --instances 2 --backend tcp \
    --set data.dir=/usr/share/datasets/fashion-mnist --set checkpoint.dir="$TMP/ck_sockbuf"
expect_rc "train: DTRAIN_SOCKET_BUFFER above 1G exits 2" 2

run "$DTRAIN" bench allreduce --backend hier --instances 3 --nodes 2
expect_rc "hier with ranks not divisible by nodes exits 2" 2
run "$DTRAIN" bench allreduce --steps 3
expect_rc "a sweep option with allreduce exits 2" 2
run "$DTRAIN" bench allreduce --backend shm --instances 2 --max-bytes 4K --no-pin --json --quiet
expect_rc "allreduce --no-pin exits 0" 0
run "$DTRAIN" bench allreduce --min-bytes 1M --max-bytes 1K
expect_rc "--min-bytes above --max-bytes exits 2" 2

finish
