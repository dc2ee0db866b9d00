# docs/slurm/train.sbatch under a fake Slurm: the job shell gets SIGUSR1 as --signal=B:USR1
# would deliver it, passes it to dtrain, which checkpoints at a step all ranks agree on and
# exits 143; the script calls `scontrol requeue` (a fake that records the call); the requeued
# script resumes with --resume auto and ends with the weights of an uninterrupted run.
. tests/cli/lib.sh

FIX="$TMP/fix"
/usr/bin/python3 tests/fixtures/mkdata.py idx "$FIX" --train 256 --test 64
mkdir "$TMP/bin"
cat >"$TMP/bin/scontrol" <<'SH'
#!/bin/sh
echo "$*" >>"$FAKE_SLURM_LOG"
SH
chmod +x "$TMP/bin/scontrol"
export PATH="$TMP/bin:$PATH" FAKE_SLURM_LOG="$TMP/slurm.log" DTRAIN SLURM_JOB_ID=4242
export CONFIG="$(pwd)/configs/fashion-convnet.cfg" RUN_DIR="$TMP/run"
ARGS="--threads 1 --instances 2 --set data.dir=$FIX --set train.batch_size=32 --set train.epochs=60 --quiet"
# The script asks for 4 x 4; the last --instances/--threads win, so 2 x 1 here.

run "$DTRAIN" train "$CONFIG" $ARGS --set checkpoint.dir="$TMP/full"
expect_rc "uninterrupted reference run" 0

bash docs/slurm/train.sbatch $ARGS >"$TMP/out" 2>"$TMP/err" &
job=$!
i=0
while [ ! -s "$TMP/run/last.safetensors" ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
sleep 0.3
kill -USR1 $job # what Slurm does 90 s before the limit (B: the batch shell only)
wait $job
RC=$?
expect_rc "the job script ends with dtrain's 143 after SIGUSR1" 143
check "the job script requeued itself" grep -qx "requeue 4242" "$TMP/slurm.log"

run bash docs/slurm/train.sbatch $ARGS
expect_rc "the requeued job finishes" 0
check "no second requeue" test "$(wc -l <"$TMP/slurm.log")" -eq 1
check "requeued run = uninterrupted run, bit for bit" \
    /usr/bin/python3 tests/tools/compare_weights.py "$TMP/full/last.safetensors" "$TMP/run/last.safetensors"

finish
