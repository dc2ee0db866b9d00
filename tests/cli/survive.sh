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
expect_err "unwritable checkpoint.dir: named before any data is read" "$TMP/afile/sub.*Not a directory"
run "$DTRAIN" train "$CFG" $COMMON --set checkpoint.dir="$TMP/afile/sub" --dry-run
expect_rc "the dry run checks checkpoint.dir too" 1
expect_err "the dry run names it" "checkpoint.dir $TMP/afile/sub: $TMP/afile is not a directory"

mkdir -p "$TMP/st"
echo torn >"$TMP/st/last.safetensors.tmp.999999999"
run "$DTRAIN" train "$CFG" $COMMON --set train.max_steps=2 --set checkpoint.dir="$TMP/st"
expect_rc "a crashed write's temp file: the run goes on" 0
expect_err "a crashed write's temp file: removed, and said" "removed 1 temp file of a checkpoint write that never finished"
check "a crashed write's temp file: gone" test ! -e "$TMP/st/last.safetensors.tmp.999999999"

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
