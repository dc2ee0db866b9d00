# --instances auto / --threads auto: a short probe of the shapes that fit the CPUs (bench's sweep,
# in child processes) picks the fastest before training; the choice and the table are printed,
# kept in the run directory (probe.json) and cached per config model and machine under
# $XDG_CACHE_HOME/dtrain, so the next run skips the probe (--probe-again measures again). The
# ranks fork after the probe, at 2 x 2 too; bad values are usage errors.
. tests/cli/lib.sh

PY=/usr/bin/python3
export XDG_CACHE_HOME="$TMP/cache"
$PY tests/fixtures/mkdata.py idx "$TMP/d" --train 256 --test 20 >/dev/null
CFG=configs/fashion-convnet.cfg
BASE="--set data.dir=$TMP/d --set train.batch_size=32 --set train.max_steps=4"

field() { # FILE KEY: a top-level value of a JSON file (or of the first line with "event")
    $PY -c 'import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        e=json.loads(l)
        if e.get("event") in (None, sys.argv[3]) or sys.argv[3] == "":
            print(e[sys.argv[2]]); break' "$1" "$2" "${3:-}"
}

run "$DTRAIN" train $CFG $BASE --instances auto --set checkpoint.dir="$TMP/a1"
expect_rc "--instances auto: exit 0" 0
expect_err "probes the shapes of the usable CPUs" "auto shape: probing [0-9]+ shapes? of [0-9]+ CPUs?: 2 warm-up steps, then about [0-9.]+ s of timed steps each|auto shape: [0-9]+ x [0-9]+ \(the only shape"
expect_err "prints the choice" "auto shape: [0-9]+ x [0-9]+ \("
check "probe.json in the run directory" test -s "$TMP/a1/probe.json"
check "events.jsonl: the probe event first, as probe.json holds it, then start" $PY -c "
import json; ev=[json.loads(l) for l in open('$TMP/a1/events.jsonl')]
assert ev[0] == json.load(open('$TMP/a1/probe.json')), ev[0]
assert ev[1]['event'] == 'start', ev[1]"
ncpu=$($PY -c 'import os; print(len(os.sched_getaffinity(0)))')
if [ "$ncpu" -ge 2 ]; then
    expect_err "...with its table, the choice marked" "[0-9]+ x [0-9]+ +[0-9.]+ samples/s  <- chosen"
    check "probe.json: one row per shape (I x T = CPUs), measured" $PY -c "
import json; p=json.load(open('$TMP/a1/probe.json'))
rows=p['rows']; assert len(rows)>=2 and all(r['ok'] and r['samples_per_s']>0 for r in rows), rows
assert all(r['instances']*r['threads']==$ncpu for r in rows), rows
best=max(rows, key=lambda r: r['samples_per_s'])
assert (best['instances'], best['threads']) == (p['instances'], p['threads']), p
assert p['cached'] is False and p['cache_file'].startswith('$TMP/cache/dtrain/shape-')"
    cache=$(field "$TMP/a1/probe.json" cache_file)
    check "the cache file is written" test -s "$cache"

    run "$DTRAIN" train $CFG $BASE --instances auto --set checkpoint.dir="$TMP/a2"
    expect_rc "second run: exit 0" 0
    check "...skips the probe" sh -c "! grep -q 'probing' '$TMP/err'"
    expect_err "...and says where the cached choice came from" "auto shape: [0-9]+ x [0-9]+ \(probed .*, cached in $cache; --probe-again measures again\)"
    check "...its probe.json says cached" test "$(field "$TMP/a2/probe.json" cached)" = True

    run "$DTRAIN" train $CFG $BASE --instances auto --probe-again --set checkpoint.dir="$TMP/a3"
    expect_err "--probe-again measures again" "auto shape: probing"
    run "$DTRAIN" train $CFG $BASE --set train.batch_size=16 --instances auto --set checkpoint.dir="$TMP/a4"
    expect_err "another batch size is another cache key" "auto shape: probing"
    printf '{"key": "torn' >"$cache"
    run "$DTRAIN" train $CFG $BASE --instances auto --set checkpoint.dir="$TMP/a5"
    expect_rc "a torn cache file: exit 0" 0
    expect_err "...probes again" "auto shape: probing"
    run "$DTRAIN" train $CFG $BASE --instances auto --set checkpoint.dir="$TMP/a6" --json --quiet
    check "--json: a probe event before the start event" test "$(head -n 1 "$TMP/out" | cut -c1-17)" = '{"event":"probe",'
else
    skip "the probe table" "one usable CPU"
fi

# 2 x 2: the probe runs (two shapes of 4 CPUs with 2 instances), then the ranks fork; the
# launcher refuses to fork when a thread was started before it.
run "$DTRAIN" train $CFG $BASE --instances 2 --threads auto --cores 4 \
    --set checkpoint.dir="$TMP/b1" --json
expect_rc "--instances 2 --threads auto --cores 4: exit 0" 0
expect_err "...probes 2 x 1 and 2 x 2" "auto shape: probing 2 shapes of 4 CPUs"
check "...then forks 2 instances" test "$(field "$TMP/out" instances start)" = 2
# The cached choice made 2 x 2, whatever this machine measured: the run forks 2 ranks of 2
# threads after reading it.
$PY -c "
import json; p=json.load(open('$TMP/b1/probe.json'))
p['instances'], p['threads'] = 2, 2
open(p['cache_file'], 'w').write(json.dumps(p))"
run "$DTRAIN" train $CFG $BASE --instances 2 --threads auto --cores 4 \
    --set checkpoint.dir="$TMP/b2" --json
expect_rc "2 x 2 from the cache: exit 0" 0
check "...trains 2 instances" test "$(field "$TMP/out" instances start)" = 2
check "...of 2 threads" test "$(field "$TMP/out" threads start)" = 2
check "...and the effective config in the checkpoint says so" $PY -c "
import json,struct; f=open('$TMP/b2/last.safetensors','rb'); n=struct.unpack('<Q',f.read(8))[0]
c=json.loads(f.read(n))['__metadata__']['config']
assert 'instances = 2;' in c and 'threads = 2;' in c, c"

# The probe runs on the run's own datasets: the parent reads them once, before the probe, and
# the probe's ranks and then the run's train on them (no probe process reads or decodes them).
if command -v strace >/dev/null 2>&1 && strace -f -o /dev/null true 2>/dev/null; then
    run strace -f -qq -e trace=openat -o "$TMP/trace" "$DTRAIN" train $CFG $BASE --instances auto \
        --cores 2 --probe-again --set checkpoint.dir="$TMP/c1"
    expect_rc "under strace: exit 0" 0
    expect_err "...after probing 2 shapes" "auto shape: probing 2 shapes of 2 CPUs"
    check "the training images are opened once in the whole process tree" \
        test "$(grep -c 'train-images-idx3-ubyte' "$TMP/trace")" = 1
    check "...by the parent, before any fork" \
        test "$(grep 'train-images-idx3-ubyte' "$TMP/trace" | cut -d' ' -f1)" = "$(head -n 1 "$TMP/trace" | cut -d' ' -f1)"
else
    skip "the datasets are read once" "strace is missing or cannot trace here"
fi

# ---- a probe that fails ----
# Every shape fails alike (a value only a rank's set-up can check against the data): one line
# naming the first shape and the rank's own error, exit 1, no run directory.
run "$DTRAIN" train $CFG $BASE --instances auto --cores 2 --probe-again \
    --set data.crop_padding=28 --set checkpoint.dir="$TMP/f1"
expect_rc "every probe shape failing: exit 1" 1
expect_err "...one error naming the shape and the rank's own message" \
    "error: --instances/--threads auto: every probe run failed; 1 x 2: rank 0: .*data.crop_padding: 28 must be 0 or more and below the image size 28x28"
check "...and nothing else on stderr but the probe's first line" test "$(grep -vc 'auto shape: probing' "$TMP/err")" = 1
check "...no run directory" test ! -e "$TMP/f1"
# A value that fails the parent's own set-up of each shape (its CPU pinning).
run "$DTRAIN" train $CFG $BASE --instances auto --cores 2 --probe-again \
    --set dist.cpu_list=4095 --set checkpoint.dir="$TMP/f2"
expect_rc "every shape failing to pin: exit 1" 1
expect_err "...names the shape and why" "every probe run failed; 1 x 2: pin list: CPU 4095 is not usable"

# ---- bad values ----
run "$DTRAIN" train $CFG $BASE --instances autox
expect_rc "--instances autox: exit 2" 2
expect_err "...names the flag and what it takes" "--instances: expected a count from 1 to 1024 or auto, got 'autox'"
expect_err_lines "...on one line" 1
run "$DTRAIN" train $CFG $BASE --threads Auto
expect_rc "--threads Auto: exit 2" 2
expect_err "...names the flag" "--threads: expected a count from 0 to 1024 or auto, got 'Auto'"
run "$DTRAIN" train $CFG $BASE --instances auto --cores 0
expect_rc "--cores 0: exit 2" 2
run "$DTRAIN" train $CFG $BASE --instances auto --nodes 2 --node-rank 0 --master 127.0.0.1:1
expect_rc "--instances auto across hosts: exit 2" 2
expect_err "...says why" "--instances auto: probes the shapes of a job on this host"

finish
