# Runs that survive: mid-epoch checkpoints that resume bit for bit, SIGTERM/SIGINT/SIGUSR1
# agreed by every rank at one step (checkpoint there, then stop or go on), --resume auto, and
# run directories that never replace another run's checkpoints by accident.
#
# A generated 1x28x28 set (256 samples) with batch 32 gives 8 steps per epoch; the runs that
# are interrupted train 60 epochs (480 steps, a few seconds) so a signal lands mid-run.
. tests/cli/lib.sh

CFG="$(pwd)/configs/fashion-convnet.cfg"
FIX="$TMP/fix"
/usr/bin/python3 tests/fixtures/mkdata.py idx "$FIX" --train 256 --test 64
COMMON="--threads 1 --set data.dir=$FIX --set train.batch_size=32"
same() { # NAME A B: bit-identical model tensors
    check "$1" /usr/bin/python3 tests/tools/compare_weights.py "$2" "$3"
}
step_of() { # the "step" metadata of a checkpoint
    /usr/bin/python3 -c '
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
print(json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]["step"])' "$1"
}

# ---- a run cut mid-epoch resumes bit for bit ----
run "$DTRAIN" train "$CFG" $COMMON --set train.epochs=3 --set checkpoint.dir="$TMP/u" --quiet
expect_rc "uninterrupted: 24 steps" 0
run "$DTRAIN" train "$CFG" $COMMON --set train.epochs=3 --set train.max_steps=13 \
    --set checkpoint.dir="$TMP/m" --quiet
check "cut at step 13 (mid-epoch 2): last.safetensors says step 13" \
    test "$(step_of "$TMP/m/last.safetensors")" = 13
run "$DTRAIN" train "$CFG" $COMMON --set train.epochs=3 --set checkpoint.dir="$TMP/m" \
    --resume auto --quiet
expect_rc "--resume auto from step 13" 0
same "mid-epoch resume: the same weights as the uninterrupted run" "$TMP/u/last.safetensors" \
    "$TMP/m/last.safetensors"

# checkpoint.every_steps writes last.safetensors mid-epoch
run "$DTRAIN" train "$CFG" $COMMON --set train.epochs=1 --set train.max_steps=5 \
    --set checkpoint.every_steps=3 --set checkpoint.every=0 --set checkpoint.dir="$TMP/k" --log-every 1
expect_rc "every_steps: exit 0" 0
check "every_steps: the final checkpoint is the run's end (step 5)" \
    test "$(step_of "$TMP/k/last.safetensors")" = 5

# ---- signals: every rank stops after the same step, rank 0 checkpoints there ----
LONG="--set train.epochs=60"
run "$DTRAIN" train "$CFG" $COMMON $LONG --set checkpoint.dir="$TMP/full1" --quiet
run "$DTRAIN" train "$CFG" $COMMON $LONG --instances 2 --set checkpoint.dir="$TMP/full2" --quiet
signal_then_resume() { # NAME SIGNAL EXPECTED_RC DIR [train options...]
    name=$1 sig=$2 want=$3 dir=$4
    shift 4
    "$DTRAIN" train "$CFG" $COMMON $LONG --set checkpoint.dir="$dir" "$@" >"$TMP/out" 2>"$TMP/err" &
    pid=$!
    i=0
    while [ ! -s "$dir/last.safetensors" ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
    sleep "0.$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')" # somewhere mid-epoch
    kill -s "$sig" $pid
    wait $pid
    RC=$?
    expect_rc "$name: SIG$sig exits $want" "$want"
    stopped=$(sed -n "s/^dtrain[a-z0-9 ]*: stopped by SIG$sig at step \([0-9]*\);.*/\1/p" "$TMP/err")
    if [ -n "$stopped" ] && [ "$(step_of "$dir/last.safetensors")" = "$stopped" ]; then
        pass "$name: last.safetensors holds the step it stopped at ($stopped)"
    else fail "$name: last.safetensors holds the step it stopped at" "$(tail -n 2 "$TMP/err")"; fi
    run "$DTRAIN" train "$CFG" $COMMON $LONG --set checkpoint.dir="$dir" "$@" --resume auto --quiet
    expect_rc "$name: --resume auto finishes the run" 0
}
signal_then_resume "1 instance" TERM 143 "$TMP/t1"
same "1 instance: SIGTERM + resume gives the uninterrupted weights" "$TMP/full1/last.safetensors" \
    "$TMP/t1/last.safetensors"
signal_then_resume "2 instances" TERM 143 "$TMP/t2" --instances 2
same "2 instances: SIGTERM + resume gives the uninterrupted weights" "$TMP/full2/last.safetensors" \
    "$TMP/t2/last.safetensors"
signal_then_resume "2 instances" INT 130 "$TMP/i2" --instances 2
same "2 instances: SIGINT + resume gives the uninterrupted weights" "$TMP/full2/last.safetensors" \
    "$TMP/i2/last.safetensors"
signal_then_resume "SIGUSR1 (on_usr1 = stop)" USR1 143 "$TMP/u1" --instances 2
same "SIGUSR1 + resume gives the uninterrupted weights" "$TMP/full2/last.safetensors" \
    "$TMP/u1/last.safetensors"

# --json --quiet: stdout alone tells a script what happened: a `start` event first, and on
# SIGTERM a `stop` event whose command line continues the run to the uninterrupted weights.
"$DTRAIN" train "$CFG" $COMMON $LONG --instances 2 --set checkpoint.dir="$TMP/js" --json --quiet \
    >"$TMP/js.out" 2>"$TMP/js.err" &
pid=$!
i=0
while [ ! -s "$TMP/js/last.safetensors" ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
kill -TERM $pid
wait $pid
RC=$?
expect_rc "--json --quiet, SIGTERM: exit 143" 143
check "--json --quiet: start and stop events on stdout" /usr/bin/python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
s, e = ev[0], ev[-1]
assert s["event"] == "start" and s["checkpoint_dir"] == sys.argv[2] and s["resume"] is None, s
assert (s["train_samples"], s["val_samples"], s["test_samples"]) == (256, 0, 64), s
assert (s["hosts"], s["instances"], s["threads"], s["precision"]) == (1, 2, 1, "fp32"), s
assert e["event"] == "stop" and e["reason"] == "SIGTERM", e
assert e["checkpoint"] == sys.argv[2] + "/last.safetensors" and e["step"] > 0, e
assert "--resume " + sys.argv[2] + "/last.safetensors" in e["resume"], e
open(sys.argv[3], "w").write(e["resume"] + "\n" + str(e["step"]) + "\n")
' "$TMP/js.out" "$TMP/js" "$TMP/js.cmd"
check "stop event: its step is the checkpoint's" test "$(step_of "$TMP/js/last.safetensors")" = "$(sed -n 2p "$TMP/js.cmd")"
run sh -c "$(head -n 1 "$TMP/js.cmd")"
expect_rc "the stop event's command line continues the run" 0
same "... to the uninterrupted weights" "$TMP/full2/last.safetensors" "$TMP/js/last.safetensors"

# --max-restarts: kill -9 of a rank mid-run; the job stops every rank, restarts from the newest
# last.safetensors (every 5 steps here) and ends with the uninterrupted run's weights.
"$DTRAIN" train "$CFG" $COMMON $LONG --instances 2 --set checkpoint.dir="$TMP/mr" \
    --set checkpoint.every_steps=5 --max-restarts 2 --json >"$TMP/out" 2>"$TMP/err" &
pid=$!
i=0
while [ ! -s "$TMP/mr/last.safetensors" ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
sleep "0.$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')"
victim=$(pgrep -P $pid | head -n 1)
kill -9 "$victim"
wait $pid
RC=$?
expect_rc "--max-restarts 2: a rank killed with SIGKILL, the run still ends with 0" 0
expect_err "--max-restarts: the restart is reported" "restart 1 of 2 after: rank [01] \(pid $victim\) was killed by SIGKILL.*; resuming from $TMP/mr/last.safetensors"
check "--max-restarts: a restart event in the JSON" grep -q '"event":"restart","restart":1,"max_restarts":2' "$TMP/out"
same "--max-restarts: the uninterrupted run's weights" "$TMP/full2/last.safetensors" \
    "$TMP/mr/last.safetensors"
check "--max-restarts: no rank left" test -z "$(pgrep -P $pid 2>/dev/null)"

# on_usr1 = "continue": a checkpoint at one step, and the run goes on to the end
"$DTRAIN" train "$CFG" $COMMON $LONG --instances 2 --set checkpoint.dir="$TMP/uc" \
    --set checkpoint.on_usr1=continue >"$TMP/out" 2>"$TMP/err" &
pid=$!
i=0
while [ ! -s "$TMP/uc/last.safetensors" ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
kill -USR1 $pid
wait $pid
RC=$?
expect_rc "SIGUSR1 with on_usr1 = continue: the run finishes (exit 0)" 0
expect_err "SIGUSR1 with on_usr1 = continue: says where it checkpointed" \
    "^dtrain( rank 0)?: SIGUSR1: checkpoint at step [0-9]+, training goes on$"
same "SIGUSR1 with on_usr1 = continue: the weights of an undisturbed run" \
    "$TMP/full2/last.safetensors" "$TMP/uc/last.safetensors"

# --resume auto in an empty directory is a fresh start
run "$DTRAIN" train "$CFG" $COMMON --set train.max_steps=2 --set checkpoint.dir="$TMP/fresh" \
    --resume auto
expect_rc "--resume auto with no checkpoint: exit 0" 0
expect_err "--resume auto with no checkpoint: says it starts fresh" "no checkpoint in $TMP/fresh yet, starting from step 0"

# --resume auto with best.safetensors but no last.safetensors (a run killed before its first
# last.safetensors, or it was deleted): resumes from best, says so, and ends on the trajectory.
run "$DTRAIN" train "$CFG" $COMMON --set train.epochs=1 --set checkpoint.dir="$TMP/bo" --quiet
rm "$TMP/bo/last.safetensors"
run "$DTRAIN" train "$CFG" $COMMON --set train.epochs=3 --set checkpoint.dir="$TMP/bo" --resume auto
expect_rc "--resume auto with only best.safetensors: exit 0" 0
expect_err "... warns that it resumes from best" "warning: --resume auto: $TMP/bo has no last.safetensors; resuming from $TMP/bo/best.safetensors \(the steps after it are trained again\)"
expect_err "... in the epoch lines' numbering" "resuming from $TMP/bo/best.safetensors at step 8: the start of epoch 2/3$"
same "... to the uninterrupted weights" "$TMP/u/last.safetensors" "$TMP/bo/last.safetensors"
run "$DTRAIN" train "$CFG" $COMMON --set train.epochs=3 --set checkpoint.dir="$TMP/m" \
    --set train.max_steps=13 --overwrite --quiet
run "$DTRAIN" train "$CFG" $COMMON --set train.epochs=3 --set checkpoint.dir="$TMP/m" --resume auto
expect_err "a mid-epoch resume says epoch and step as the progress lines do" "at step 13: epoch 2/3 step 5/8$"

# A checkpoint whose run step disagrees with its optimizer's step count (here an edited "step"
# in the header) is refused before anything runs, naming the file and both numbers.
/usr/bin/python3 - "$TMP/u/last.safetensors" "$TMP/edited.safetensors" <<'PYEOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
h["__metadata__"]["step"] = "30"
hb = json.dumps(h, separators=(",", ":")).encode()
hb += b" " * (-len(hb) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
PYEOF
for n in 1 2; do
    run "$DTRAIN" train "$CFG" $COMMON --instances $n --set train.epochs=5 \
        --set checkpoint.dir="$TMP/ed$n" --resume "$TMP/edited.safetensors"
    expect_rc "step edited, $n instance(s): exit 3" 3
    expect_err "... names the file and both steps" "$TMP/edited.safetensors: metadata step 30 but optimizer_step 24"
    expect_err_lines "... in one line, before anything else" 1
done
# and when the optimizer's count is edited alike, the tensor itself gives it away
/usr/bin/python3 - "$TMP/edited.safetensors" <<'PYEOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
h["__metadata__"]["optimizer_step"] = "30"
hb = json.dumps(h, separators=(",", ":")).encode()
hb += b" " * (-len(hb) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
PYEOF
run "$DTRAIN" train "$CFG" $COMMON --set train.epochs=5 --set checkpoint.dir="$TMP/ed3" \
    --resume "$TMP/edited.safetensors"
expect_rc "step and optimizer_step edited: exit 3" 3
expect_err "... the optimizer.step tensor says 24" "$TMP/edited.safetensors: metadata step 30 but the optimizer has taken 24 steps"

# ---- the best epoch survives a resume ----
# One epoch with a validation split (5 steps of 32 samples), then resumed to two at
# lr 0: epoch 2 has epoch 1's weights, so the same validation accuracy, and a tie keeps the
# earlier epoch. best.safetensors must stay epoch 1's: the score it was chosen on travels in
# last.safetensors ("best_score"), not only the weights.
run "$DTRAIN" train "$CFG" $COMMON --set data.val_fraction=0.25 --set train.epochs=1 \
    --set checkpoint.dir="$TMP/best" --quiet
expect_rc "validation split, epoch 1: exit 0" 0
check "best.safetensors holds epoch 1" test "$(step_of "$TMP/best/best.safetensors")" = 5
run "$DTRAIN" train "$CFG" $COMMON --set data.val_fraction=0.25 --set train.epochs=2 \
    --set optimizer.lr=0 --set checkpoint.dir="$TMP/best" --resume auto --quiet
expect_rc "resumed for epoch 2: exit 0" 0
check "resumed: last.safetensors at epoch 2" test "$(step_of "$TMP/best/last.safetensors")" = 10
check "resumed: an epoch that only ties keeps best.safetensors at epoch 1" \
    test "$(step_of "$TMP/best/best.safetensors")" = 5

# ---- run directories ----
mkdir "$TMP/cwd"
(cd "$TMP/cwd" && "$DTRAIN" train "$CFG" $COMMON --set train.max_steps=2 --quiet)
(cd "$TMP/cwd" && "$DTRAIN" train "$CFG" $COMMON --set train.max_steps=2 --json) >"$TMP/out" 2>"$TMP/err"
RC=$?
expect_rc "second run, derived directory: exit 0" 0
expect_err "second run goes to runs/NAME-2 and says so" "runs/fashion-convnet holds another run's checkpoints .* this run writes to runs/fashion-convnet-2"
check "second run's checkpoint in runs/NAME-2" test -s "$TMP/cwd/runs/fashion-convnet-2/last.safetensors"
check "the final event names the directory and the files" /usr/bin/python3 -c '
import json, sys
f = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert f["event"] == "final" and f["checkpoint_dir"] == "runs/fashion-convnet-2", f
assert f["checkpoints"] == ["last.safetensors", "best.safetensors"], f
' "$TMP/out"

run "$DTRAIN" train "$CFG" $COMMON --set train.max_steps=2 --set checkpoint.dir="$TMP/u"
expect_rc "a named directory holding a run: exit 2" 2
expect_err "a named directory holding a run: says what to pass" "checkpoint.dir $TMP/u already holds a run's checkpoints: --overwrite"
run "$DTRAIN" train "$CFG" $COMMON --set train.max_steps=2 --set checkpoint.dir="$TMP/u" --overwrite --quiet
expect_rc "--overwrite replaces it" 0

echo "a file" >"$TMP/afile"
run "$DTRAIN" train "$CFG" --set data.dir="$TMP/nodata" --set checkpoint.dir="$TMP/afile/sub"
expect_rc "unwritable checkpoint.dir: exit 1" 1
expect_err "unwritable checkpoint.dir: named before any data is read" "checkpoint.dir $TMP/afile/sub: $TMP/afile is not a directory"
run "$DTRAIN" train "$CFG" $COMMON --set checkpoint.dir="$TMP/afile/sub" --dry-run
expect_rc "the dry run checks checkpoint.dir too" 1
expect_err "the dry run names it" "checkpoint.dir $TMP/afile/sub: $TMP/afile is not a directory"

# Temp files: only dtrain's own (".NAME.tmp.HOST.PID.START", a checkpoint's first bytes) whose
# writer is gone are removed; a user's file that merely looks like a temp name stays.
mkdir -p "$TMP/st"
echo "my notes" >"$TMP/st/last.safetensors.tmp.999999999"
host=$(hostname | sed 's/[^A-Za-z0-9_-]/_/g')
sh -c 'exit 0' & dead=$!
wait $dead
cp "$TMP/u/last.safetensors" "$TMP/st/.last.safetensors.tmp.$host.$dead.1"
truncate -s 100 "$TMP/st/.last.safetensors.tmp.$host.$dead.1" # torn mid-write
run "$DTRAIN" train "$CFG" $COMMON --set train.max_steps=2 --set checkpoint.dir="$TMP/st"
expect_rc "a crashed write's temp file: the run goes on" 0
expect_err "a crashed write's temp file: removed, and said" "removed 1 temp file of a checkpoint write that never finished"
check "a crashed write's temp file: gone" test ! -e "$TMP/st/.last.safetensors.tmp.$host.$dead.1"
check "a user's file named like an old temp file: kept" test -s "$TMP/st/last.safetensors.tmp.999999999"

# A run that fails on its data leaves no run directory behind (and none in the current
# directory): checkpoint.dir is made only once the data has loaded.
mkdir -p "$TMP/nod"
(cd "$TMP/nod" && "$DTRAIN" train "$CFG" --threads 1 --set data.dir="$TMP/nodata" --quiet)
check "data error, derived directory: no runs/ made" test ! -e "$TMP/nod/runs"
run "$DTRAIN" train "$CFG" --threads 1 --set data.dir="$TMP/nodata" --set checkpoint.dir="$TMP/nod/a/b"
expect_rc "data error: exit 3" 3
check "data error, named directory: not made" test ! -e "$TMP/nod/a"
(cd "$TMP/cwd" && "$DTRAIN" train "$CFG" --threads 1 --set data.dir="$TMP/nodata" --quiet)
check "data error beside a run's checkpoints: no empty runs/NAME-3" test ! -e "$TMP/cwd/runs/fashion-convnet-3"
# ... and one that fails after the data (here: a multi-host job's rendezvous) removes what it made
run env DTRAIN_TOKEN=t-$$ "$DTRAIN" train "$CFG" $COMMON --nodes 2 --node-rank 0 \
    --master 127.0.0.1:1 --rendezvous-timeout 0.5 --set checkpoint.dir="$TMP/nod/c/d"
check "a failed job: exit 1 or 2 ($RC)" test "$RC" -eq 1 -o "$RC" -eq 2
check "a failed job: no empty directory left" test ! -e "$TMP/nod/c"

# A multi-host job without its token is refused before anything is created.
run env -u DTRAIN_TOKEN "$DTRAIN" train "$CFG" $COMMON --nodes 2 --node-rank 0 \
    --master 127.0.0.1:1 --set checkpoint.dir="$TMP/tok"
expect_rc "no job token: exit 2" 2
expect_err "no job token: says what to set" "no job token: set DTRAIN_TOKEN or pass --token-file"
check "no job token: no checkpoint directory made" test ! -e "$TMP/tok"
expect_err_lines "no job token: one line" 1

# Checkpoints are written by a background thread (train/ckpt_writer.c); a write that fails
# there (a full disk, in a private mount namespace) still stops the run with exit 1 and the
# file named, and leaves no temp file behind.
if [ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null; then
    mkdir -p "$TMP/full"
    run unshare -m sh -c "mount -t tmpfs -o size=256k tmpfs '$TMP/full' && $DTRAIN train $CFG \
        $(echo $COMMON) --set train.max_steps=6 --set checkpoint.every_steps=2 \
        --set checkpoint.dir='\"$TMP/full\"'; echo rc=\$?; ls '$TMP/full'"
    expect_out "disk full under a checkpoint write: exit 1" "^rc=1$"
    expect_err "... names the file and the reason" "$TMP/full/last.safetensors.*No space left on device"
    check "... and leaves no temp file" sh -c "! grep -q tmp '$TMP/out'"
    # --max-restarts on a failure that repeats: one restart, after a 1 s wait, then the run
    # stops with the failure (not 5 restarts in half a second). stderr lines are timestamped as
    # they come, to measure the wait.
    unshare -m sh -c "mount -t tmpfs -o size=256k tmpfs '$TMP/full' && $DTRAIN train $CFG \
        $(echo $COMMON) --set train.max_steps=6 --set checkpoint.every_steps=2 --max-restarts 5 \
        --json --set checkpoint.dir='\"$TMP/full\"' >'$TMP/out'; echo rc=\$? >&2" 2>&1 |
        while IFS= read -r l; do echo "$(date +%s.%N) $l"; done >"$TMP/times"
    check "a repeating failure: exit 1" grep -q " rc=1$" "$TMP/times"
    check "a repeating failure: one restart, not five" test "$(grep -c '"event":"restart"' "$TMP/out")" -eq 1
    check "... the restart event says it waited 1 s" grep -q '"event":"restart","restart":1,"max_restarts":5,.*"delay_s":1}' "$TMP/out"
    check "... then the run stops, saying why" grep -q "No space left on device; the same failure again after restart 1 of 5: not restarting again" "$TMP/times"
    check "... and the attempts were >= 1 s apart" /usr/bin/python3 -c '
import sys
lines = open(sys.argv[1]).read().splitlines()
warn = [float(l.split()[0]) for l in lines if "warning: restart 1 of 5" in l]
err = [float(l.split()[0]) for l in lines if "not restarting again" in l]
assert len(warn) == 1 and len(err) == 1 and err[0] - warn[0] >= 1.0, lines
' "$TMP/times"
    # SIGTERM while the job waits to restart: stops there (143) with a stop event, no restart
    rm -f "$TMP/pid" "$TMP/out"
    unshare -m sh -c "mount -t tmpfs -o size=256k tmpfs '$TMP/full' && echo \$\$ >'$TMP/pid' &&
        exec $DTRAIN train $CFG $(echo $COMMON) --set train.max_steps=6 \
        --set checkpoint.every_steps=2 --max-restarts 5 --json --quiet \
        --set checkpoint.dir='\"$TMP/full\"'" >"$TMP/out" 2>"$TMP/err" &
    pid=$!
    i=0
    while ! grep -qs '"event":"restart"' "$TMP/out" && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    kill -TERM "$(cat "$TMP/pid")" # dtrain itself (exec'd by the shell that wrote its pid)
    wait $pid
    RC=$?
    expect_rc "SIGTERM between restarts: exit 143" 143
    check "... a stop event, no second attempt" /usr/bin/python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert [e["event"] for e in ev] == ["start", "restart", "stop"], ev
assert ev[-1]["reason"] == "SIGTERM" and ev[-1]["checkpoint"] is None, ev[-1]
' "$TMP/out"
fi

# ---- the watchdog: ranks that make no progress outside any collective ----
# Both ranks stopped (SIGSTOP) wait in no collective, so no collective timeout can fire; the
# parent's heartbeat check must end the job after dist.timeout and name a rank.
"$DTRAIN" train "$CFG" $COMMON $LONG --instances 2 --timeout 2 --set checkpoint.dir="$TMP/stall" \
    --quiet >"$TMP/out" 2>"$TMP/err" &
pid=$!
i=0
while [ ! -s "$TMP/stall/last.safetensors" ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
ranks=$(pgrep -P $pid | tr "\n" " ")
kill -STOP $ranks
t0=$(date +%s)
wait $pid
RC=$?
t1=$(date +%s)
kill -CONT $ranks 2>/dev/null
expect_rc "stalled ranks: the job fails (exit 1)" 1
expect_err "...naming the rank and the timeout" 'rank [01] \(pid [0-9]+\) made no progress for [0-9.]+ s \(after step [0-9]+; dist.timeout\)'
check "...within dist.timeout plus the grace period ($((t1 - t0)) s)" test $((t1 - t0)) -le 15
check "...and leaves no rank behind" sh -c "for p in $ranks; do kill -0 \$p 2>/dev/null && exit 1; done; exit 0"

finish
