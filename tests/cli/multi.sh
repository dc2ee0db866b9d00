# Several instances on one machine: the same trajectory for 1, 2 and 4 instances at the same
# global batch, pinning and oversubscription messages, and supervision: a rank killed with
# SIGKILL, a rank failing on its own, SIGINT/SIGTERM/SIGKILL to the parent. After every run: no
# processes and no /dev/shm segment left behind. Uses Debian's Fashion-MNIST.
. tests/cli/lib.sh

FASHION=/usr/share/datasets/fashion-mnist
CFG=configs/fashion-convnet.cfg
# Dropout off and plain SGD with a small step: the check is of the math (gradients summed over
# ranks, divided by the global batch), so float summation-order noise (~1e-7) must stay noise.
# With the reference Adadelta (lr 0.5) or SGD at lr 0.05, after ~15 steps that noise flips a few
# ReLU/max-pool decisions and single weights drift apart by 1e-5..1e-4 (measured): chaos of the
# training dynamics, the same in any data-parallel implementation.
COMMON="--set data.dir=$FASHION --set model.layers.5.p=0 --set model.layers.9.p=0 --threads 1
        --set optimizer.type=sgd --set optimizer.lr=0.01"

leftover_segments() { ls /dev/shm 2>/dev/null | grep -c "^dtrain-$1-"; }

# ---- same global batch, same weights ----
for n in 1 2 4; do
    run "$DTRAIN" train $CFG $COMMON --instances $n --set train.max_steps=20 \
        --set checkpoint.dir="$TMP/n$n" --quiet
    expect_rc "$n instance(s): 20 steps exit 0" 0
done
check "1, 2 and 4 instances: weights equal within 1e-5 after 20 steps" \
    /usr/bin/python3 tests/tools/compare_weights.py --rtol 1e-5 \
    "$TMP/n1/last.safetensors" "$TMP/n2/last.safetensors" "$TMP/n4/last.safetensors"

run "$DTRAIN" train $CFG $COMMON --instances 2 --set train.max_steps=20 \
    --set checkpoint.dir="$TMP/n2b" --quiet
check "2 instances twice: bit-identical weights" \
    /usr/bin/python3 tests/tools/compare_weights.py "$TMP/n2/last.safetensors" "$TMP/n2b/last.safetensors"

# ---- resume with shared weights: 2 instances, 2 epochs = 1 epoch + resume for 1 ----
/usr/bin/python3 tests/fixtures/mkdata.py idx "$TMP/fix" --train 256 --test 64
RESUME="--set data.dataset=mnist --set data.dir=$TMP/fix --instances 2 --threads 1 --quiet"
run "$DTRAIN" train $CFG $RESUME --set train.epochs=2 --set checkpoint.dir="$TMP/e2"
expect_rc "2 instances, 2 epochs: exit 0" 0
run "$DTRAIN" train $CFG $RESUME --set train.epochs=1 --set checkpoint.dir="$TMP/e1"
run "$DTRAIN" train $CFG $RESUME --set train.epochs=2 --set checkpoint.dir="$TMP/e1r" \
    --resume "$TMP/e1/last.safetensors"
expect_rc "2 instances, resumed for epoch 2: exit 0" 0
check "2 instances: 1 epoch + resume = 2 epochs, bit for bit" \
    /usr/bin/python3 tests/tools/compare_weights.py "$TMP/e2/last.safetensors" "$TMP/e1r/last.safetensors"

# ---- oversubscription and --verbose ----
run "$DTRAIN" train $CFG --set data.dir=$FASHION --instances 4 --threads 4 \
    --set train.max_steps=4 --set checkpoint.dir="$TMP/over" --verbose
expect_rc "4 x 4 on this machine still trains" 0
n=$(grep -c "oversubscribed" "$TMP/err")
if [ "$(nproc)" -lt 16 ]; then
    if [ "$n" -eq 1 ]; then pass "oversubscription warned once"; else
        fail "oversubscription warned once" "$n warnings: $(head -c 400 "$TMP/err")"; fi
fi
expect_err "--verbose prints each rank's cores" "rank 3: cpus [0-9]"

run "$DTRAIN" train $CFG --set data.dir=$FASHION --instances 2 --cpu-list 0-x --dry-run
expect_rc "bad --cpu-list: exit 2" 2
expect_err "bad --cpu-list: names the list" "cpu_list"

# ---- placement and multi-host usage errors: one line, exit 2 ----
usage_error() { # name pattern args...
    name=$1 pattern=$2
    shift 2
    run "$DTRAIN" train $CFG --set data.dir=$FASHION --set train.max_steps=1 \
        --set checkpoint.dir="$TMP/usage" "$@"
    expect_rc "$name: exit 2" 2
    expect_err "$name: says what is wrong" "$pattern"
    expect_err_lines "$name: one line" 1
}
usage_error "--timeout x" "--timeout expects a number" --timeout x
usage_error "--rendezvous-timeout 0" "--rendezvous-timeout expects a number" --rendezvous-timeout 0
usage_error "--nodes 0" "--nodes: expected an integer" --nodes 0
usage_error "--node-rank past --nodes" "--node-rank 2 out of range for 2 nodes" --nodes 2 --node-rank 2 --master 127.0.0.1:1
usage_error "2 nodes without a master" "2 nodes need a master address" --nodes 2 --node-rank 1
usage_error "--backend bogus" "dist.backend" --backend bogus
usage_error "--backend shm across hosts" "dist.backend shm: the job spans 2 hosts" --backend shm --nodes 2 --node-rank 1 --master 127.0.0.1:1
usage_error "--backend mpi without mpirun" "start dtrain with mpirun" --backend mpi --instances 2
usage_error "--pin bogus" "dist.pin" --pin bogus
run env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0 \
    OMPI_COMM_WORLD_LOCAL_SIZE=2 MASTER_ADDR=127.0.0.1 "$DTRAIN" train $CFG --set data.dir=$FASHION \
    --instances 2
expect_rc "--instances under mpirun: exit 2" 2
expect_err "--instances under mpirun: says one process is one rank" "leave instances at 1"

# ---- a rank killed mid-training ----
start_bg() { # dir
    "$DTRAIN" train $CFG --set data.dir=$FASHION --instances 2 --threads 1 \
        --set train.epochs=3 --set checkpoint.dir="$1" >"$TMP/bg.out" 2>"$TMP/bg.err" &
    BG=$!
    # wait until both ranks are running
    for _ in $(seq 100); do
        [ "$(pgrep -P $BG | wc -l)" -ge 2 ] && break
        sleep 0.1
    done
    sleep 1
}
wait_bg() { # -> RC, SECS
    t0=$(date +%s.%N)
    wait $BG
    RC=$?
    SECS=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
}

start_bg "$TMP/kill"
victim=$(pgrep -P $BG | sort -n | tail -n 1)
kill -9 "$victim"
wait_bg
if [ "$RC" -eq 1 ]; then pass "rank killed: parent exits 1"; else fail "rank killed: parent exits 1" "exit $RC"; fi
if awk -v s="$SECS" 'BEGIN { exit !(s < 5) }'; then pass "rank killed: parent exits within 5 s"; else
    fail "rank killed: parent exits within 5 s" "$SECS s"; fi
if grep -Eq "rank 1 .*killed by SIGKILL" "$TMP/bg.err"; then pass "rank killed: message names rank and signal"; else
    fail "rank killed: message names rank and signal" "$(tail -c 400 "$TMP/bg.err")"; fi
if [ -z "$(pgrep -P $BG)" ] && ! kill -0 "$victim" 2>/dev/null; then pass "rank killed: no processes left"; else
    fail "rank killed: no processes left" "$(pgrep -P $BG)"; fi
if [ "$(leftover_segments $BG)" -eq 0 ]; then pass "rank killed: no /dev/shm segment left"; else
    fail "rank killed: no /dev/shm segment left" "$(ls /dev/shm)"; fi

# ---- a rank that fails on its own: the ranks refuse a checkpoint of another model ----
# (The parent checks the checkpoint directory before it forks, so a bad directory is no longer
# a rank's error: a checkpoint whose shapes do not fit is one only the ranks find.)
run "$DTRAIN" train $CFG --threads 1 --set data.dir="$TMP/fix" --set train.max_steps=1 \
    --set model.layers.7.out_features=32 --set checkpoint.dir="$TMP/other" --quiet
expect_rc "rank error: a checkpoint of another model" 0
run "$DTRAIN" train $CFG $COMMON --instances 2 --set train.max_steps=40 --set train.epochs=1 \
    --set checkpoint.dir="$TMP/rank-error" --resume "$TMP/other/last.safetensors"
expect_rc "rank error: parent exits 1" 1
expect_err "rank error: the rank's own message" "rank [01]: error: .*$TMP/other/last.safetensors: tensor layers.7.weight"
expect_err "rank error: the parent names the rank and its exit code" "rank [01] .*exited with code"

# ---- SIGINT / SIGTERM to the parent ----
for sig in INT TERM; do
    start_bg "$TMP/sig$sig"
    kids=$(pgrep -P $BG)
    kill -$sig $BG
    wait_bg
    want=130
    [ $sig = TERM ] && want=143
    if [ "$RC" -eq $want ]; then pass "SIG$sig: exit $want"; else fail "SIG$sig: exit $want" "exit $RC: $(tail -c 300 "$TMP/bg.err")"; fi
    alive=0
    for k in $kids; do kill -0 "$k" 2>/dev/null && alive=1; done
    if [ $alive -eq 0 ]; then pass "SIG$sig: no ranks left"; else fail "SIG$sig: no ranks left" "$kids"; fi
    if [ "$(leftover_segments $BG)" -eq 0 ]; then pass "SIG$sig: no /dev/shm segment left"; else
        fail "SIG$sig: no /dev/shm segment left" "$(ls /dev/shm)"; fi
    if ls "$TMP/sig$sig" 2>/dev/null | grep -q '\.tmp'; then fail "SIG$sig: no temp checkpoint left" "$(ls "$TMP/sig$sig")"; else
        pass "SIG$sig: no temp checkpoint left"; fi
done

# ---- SIGKILL to the parent: it cannot clean up, yet nothing stays behind. The segment's name
# is unlinked as soon as it is mapped (the ranks inherit the mapping) and the ranks die with
# the parent (PR_SET_PDEATHSIG), so the memory goes with the last rank. ----
start_bg "$TMP/sigKILL"
kids=$(pgrep -P $BG)
kill -9 $BG
wait $BG 2>/dev/null
alive=1
for _ in $(seq 50); do
    alive=0
    for k in $kids; do kill -0 "$k" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
done
if [ $alive -eq 0 ]; then pass "parent SIGKILLed: its ranks die with it"; else
    fail "parent SIGKILLed: its ranks die with it" "still alive: $kids"; fi
if [ "$(leftover_segments $BG)" -eq 0 ]; then pass "parent SIGKILLed: no /dev/shm segment left"; else
    fail "parent SIGKILLed: no /dev/shm segment left" "$(ls /dev/shm)"; fi

# ---- a full /dev/shm: a clear error before any rank starts, not SIGBUS in a collective ----
if unshare -m true 2>/dev/null; then
    cat >"$TMP/shmfull.sh" <<SH
mount -t tmpfs -o size=64k tmpfs /dev/shm || exit 99
exec "$DTRAIN" train $CFG $(echo $COMMON) --instances 2 --set train.max_steps=2 \
    --set checkpoint.dir="$TMP/shmfull"
SH
    run unshare -m sh "$TMP/shmfull.sh"
    expect_rc "full /dev/shm: exit 1" 1
    expect_err "full /dev/shm: says so and what to do" "/dev/shm has no room for the [0-9]+-byte segment of 2 ranks .*--shm-size"
    expect_err_lines "full /dev/shm: one line after the start line" 2
else
    skip "full /dev/shm" "no mount namespace (unshare -m) on this machine"
fi

# ---- mpirun on one host with no variables: no MASTER_ADDR, no token, placement as bound ----
if command -v mpirun >/dev/null; then
    run env -u MASTER_ADDR -u MASTER_PORT -u DTRAIN_TOKEN mpirun --allow-run-as-root \
        --oversubscribe -np 2 "$DTRAIN" train $CFG --threads 1 --set data.dir="$TMP/fix" \
        --set train.max_steps=4 --set checkpoint.dir="$TMP/mpi" --verbose
    expect_rc "mpirun -np 2, no variables: exit 0" 0
    expect_err "mpirun: one job of 2 ranks over tcp" "job: 2 ranks on 1 host, backend tcp, launch ompi"
    if grep -q "exceeds the" "$TMP/err"; then fail "mpirun: no oversubscription warning" "$ERR"; else
        pass "mpirun: no oversubscription warning"; fi
    if grep -Eq "rank [01]: cpus .*bound by ompi" "$TMP/err"; then
        check "mpirun: each rank reports the CPUs mpirun bound it to, and they differ" sh -c \
            "test \$(grep -Eo 'rank [01]: cpus [0-9,-]+ \\(bound' '$TMP/err' | sort -u -k3 | wc -l) -eq 2"
    else
        pass "mpirun: ranks not bound by mpirun here (one CPU?), nothing to report"
    fi
    check "mpirun: the rendezvous file is gone" sh -c "! ls \${XDG_RUNTIME_DIR:-/nonexistent}/dtrain-rdv-* \${TMPDIR:-/tmp}/dtrain-$(id -u)/dtrain-rdv-* 2>/dev/null"
else
    skip "mpirun on one host" "no mpirun"
fi

# ---- srun on one host with no variables: the same, the rendezvous file keyed by the job and
# step ids (srun cannot run here, so two processes get the variables srun gives its tasks) ----
for p in 0 1; do
    env -u MASTER_ADDR -u MASTER_PORT -u DTRAIN_TOKEN SLURM_PROCID=$p SLURM_NTASKS=2 \
        SLURM_LOCALID=$p SLURM_NODEID=0 SLURM_NNODES=1 SLURM_JOB_NODELIST="$(hostname)" \
        SLURM_JOB_ID=$((4000 + $$ % 1000)) SLURM_STEP_ID=3 \
        "$DTRAIN" train $CFG --threads 1 --set data.dir="$TMP/fix" --set train.max_steps=4 \
        --set checkpoint.dir="$TMP/srun" --verbose >"$TMP/srun$p.out" 2>"$TMP/srun$p.err" &
    eval "SRUN$p=\$!"
done
wait $SRUN0
RC=$?
wait $SRUN1
RC1=$?
[ $RC -eq 0 ] && RC=$RC1
expect_rc "srun -n 2 on one host, no variables: both tasks exit 0" 0
if grep -q "job: 2 ranks on 1 host, backend tcp, launch slurm" "$TMP/srun0.err"; then
    pass "srun: one job of 2 ranks over tcp, ranks from SLURM_*"
else
    fail "srun: one job of 2 ranks over tcp, ranks from SLURM_*" "$(head -c 300 "$TMP/srun0.err")"
fi
check "srun: rank 0 wrote the checkpoint" test -s "$TMP/srun/last.safetensors"
check "srun: the rendezvous file is gone" sh -c "! ls \${XDG_RUNTIME_DIR:-/nonexistent}/dtrain-rdv-* \${TMPDIR:-/tmp}/dtrain-$(id -u)/dtrain-rdv-* 2>/dev/null"

finish
