# dist.grad_dtype = "bf16": the ConvNet trains on generated data at 2 instances over every
# backend this machine can run (shm; tcp on loopback; hier as 2 hosts x 1 on loopback; mpi under
# mpirun with an MPI=1 build), each run bit-identical when repeated, its final loss close to
# fp32's, and its weights different from fp32's (the rounding acted). At 2 ranks every backend
# defines the same sum (one fp32 addition of two bf16 terms, rounded), so shm, tcp and hier give
# the same bits. bf16 gradients with fp32 training and with bf16 training. Bad values and the
# combination with dist.split_invariant are one-line config errors (exit 2); --print-config and
# --config-reference show the key; `bench allreduce --dtype bf16` checks every size exactly
# (shm, tcp, hier, mpi; shm and tcp again with the generic and avx2 loops).
. tests/cli/lib.sh

PY=/usr/bin/python3
FIX="$TMP/fix"
$PY tests/fixtures/mkdata.py idx "$FIX" --train 256 --test 64
CFG=configs/fashion-convnet.cfg
# dropout off and plain SGD, as multi.sh: the check is of the sums, not of chaotic dynamics
COMMON="--set data.dataset=mnist --set data.dir=$FIX --set model.layers.5.p=0
        --set model.layers.9.p=0 --set optimizer.type=sgd --set optimizer.lr=0.01
        --set train.batch_size=32 --set train.epochs=2 --threads 1 --json"
BF16="--set dist.grad_dtype=\"bf16\""

final_loss() { grep '"event":"final"' "$1" | $PY -c 'import json,sys; print(json.loads(sys.stdin.read())["test_loss"])'; }
# the final test loss of run $1 within 2 % of run $2's
close_loss() {
    $PY -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 0.02 * b)' \
        "$(final_loss "$1")" "$(final_loss "$2")"
}
same_bits() { $PY tests/tools/compare_weights.py "$1/last.safetensors" "$2/last.safetensors"; }

train() { # dir args...
    dir=$1
    shift
    "$DTRAIN" train $CFG $COMMON --set checkpoint.dir="$TMP/$dir" "$@" >"$TMP/$dir.out" 2>"$TMP/$dir.err"
    RC=$?
    cp "$TMP/$dir.out" "$TMP/out"
    cp "$TMP/$dir.err" "$TMP/err"
}

# ---- shm: the reference run of each dtype ----
train fp32 --instances 2
expect_rc "fp32 gradients, 2 instances (shm): exit 0" 0
train shm --instances 2 $BF16 --verbose
expect_rc "bf16 gradients, 2 instances (shm): exit 0" 0
expect_err "bf16 gradients over shm" "backend shm"
expect_out "the final event records grad_dtype" '"event":"final".*"grad_dtype":"bf16"'
train shm2 --instances 2 $BF16
check "bf16 gradients (shm) twice: bit-identical weights" same_bits "$TMP/shm" "$TMP/shm2"
if same_bits "$TMP/shm" "$TMP/fp32" >/dev/null 2>&1; then
    fail "bf16 gradients differ from fp32's" "the same weights: the rounding did not act"
else pass "bf16 gradients differ from fp32's"; fi
check "bf16 gradients stay close to fp32's (weights, rtol 0.02)" $PY tests/tools/compare_weights.py \
    --rtol 0.02 "$TMP/fp32/last.safetensors" "$TMP/shm/last.safetensors"
check "bf16 gradients: final test loss within 2 % of fp32's" close_loss "$TMP/shm.out" "$TMP/fp32.out"

# ---- resume: 1 epoch + resume = 2 epochs, bit for bit ----
train e1 --instances 2 $BF16 --set train.epochs=1
train e1r --instances 2 $BF16 --resume "$TMP/e1/last.safetensors"
expect_rc "bf16 gradients, resumed for epoch 2: exit 0" 0
check "bf16 gradients: 1 epoch + resume = 2 epochs, bit for bit" same_bits "$TMP/e1r" "$TMP/shm"

# ---- tcp on loopback ----
train tcp --instances 2 --backend tcp $BF16
expect_rc "bf16 gradients, 2 instances over tcp: exit 0" 0
train tcp2 --instances 2 --backend tcp $BF16
check "bf16 gradients (tcp) twice: bit-identical weights" same_bits "$TMP/tcp" "$TMP/tcp2"
check "2 ranks: tcp and shm give the same bits (one addition, rounded)" same_bits "$TMP/tcp" "$TMP/shm"
check "bf16 gradients (tcp): final test loss within 2 % of fp32's" close_loss "$TMP/tcp.out" "$TMP/fp32.out"

# ---- hier: 2 "hosts" of 1 instance on loopback, their leaders on a tcp ring ----
HIER_PORT=$((20000 + $$ % 15000))
hier() { # dir
    HIER_PORT=$((HIER_PORT + 1))
    port=$HIER_PORT
    for k in 0 1; do
        DTRAIN_TOKEN=grad-dtype-test-token-0123456789 "$DTRAIN" train $CFG $COMMON --instances 1 \
            --nodes 2 --node-rank $k --master 127.0.0.1:$port $BF16 --verbose \
            --set checkpoint.dir="$TMP/$1-$k" >"$TMP/$1-$k.out" 2>"$TMP/$1-$k.err" &
        eval "HP$k=\$!"
    done
    RC=0
    wait $HP0 || RC=$?
    wait $HP1 || RC=$?
}
hier hier
expect_rc "bf16 gradients, hier (2 hosts x 1 on loopback): exit 0" 0
if grep -q "backend hier" "$TMP/hier-0.err"; then pass "hier: the job ran hier"; else
    fail "hier: the job ran hier" "$(head -c 300 "$TMP/hier-0.err")"; fi
hier hier2
check "bf16 gradients (hier) twice: bit-identical weights" same_bits "$TMP/hier-0" "$TMP/hier2-0"
check "2 ranks: hier and shm give the same bits" same_bits "$TMP/hier-0" "$TMP/shm"

# ---- mpi ----
DTRAIN_MPI=${DTRAIN_MPI_BIN:-./build-mpi/dtrain}
if command -v mpirun >/dev/null && [ -x "$DTRAIN_MPI" ]; then
    for d in mpi mpi2; do
        run mpirun --allow-run-as-root --oversubscribe -np 2 "$DTRAIN_MPI" train $CFG $COMMON \
            --backend mpi $BF16 --set checkpoint.dir="$TMP/$d"
        cp "$TMP/out" "$TMP/$d.out"
    done
    expect_rc "bf16 gradients, mpirun -np 2, mpi backend: exit 0" 0
    check "bf16 gradients (mpi) twice: bit-identical weights" same_bits "$TMP/mpi" "$TMP/mpi2"
    check "bf16 gradients (mpi): final test loss within 2 % of fp32's" close_loss "$TMP/mpi.out" \
        "$TMP/fp32.out"
    if same_bits "$TMP/mpi" "$TMP/fp32" >/dev/null 2>&1; then
        fail "bf16 gradients (mpi) differ from fp32's" "the same weights: the operator did not act"
    else pass "bf16 gradients (mpi) differ from fp32's"; fi
else
    skip "bf16 gradients over mpi" "no mpirun or no MPI=1 build (make dtrain-mpi)"
fi

# ---- independent of train.precision ----
train prec --instances 2 $BF16 --precision bf16
expect_rc "bf16 gradients with train.precision bf16: exit 0" 0
train prec32 --instances 2 --precision bf16
check "bf16 training: bf16 gradients within 2 % of fp32 gradients' final loss" close_loss \
    "$TMP/prec.out" "$TMP/prec32.out"
train one --instances 1 $BF16
train one32 --instances 1
check "1 instance: nothing is sent, so nothing is rounded (the same bits as fp32)" same_bits \
    "$TMP/one" "$TMP/one32"

# ---- config ----
run "$DTRAIN" train $CFG --set data.dir=$FIX --set dist.grad_dtype=\"fp16\" --dry-run
expect_rc "dist.grad_dtype = fp16: exit 2" 2
expect_err_lines "dist.grad_dtype = fp16: one line" 1
expect_err "dist.grad_dtype = fp16: names the key and the values" "dist.grad_dtype.*fp32, bf16"
run "$DTRAIN" train $CFG --set data.dir=$FIX --set dist.grad_dtype=\"bf61\" --dry-run
expect_err "dist.grad_dtype = bf61: suggests bf16" "bf16"
sed 's/^dist = {/&\n  grad_dtype = "half";/' $CFG >"$TMP/bad.cfg"
if grep -q 'grad_dtype = "half"' "$TMP/bad.cfg"; then
    run "$DTRAIN" train "$TMP/bad.cfg" --set data.dir=$FIX --dry-run
    expect_rc "grad_dtype = \"half\" in the file: exit 2" 2
    expect_err "grad_dtype = \"half\": file, line and key" "bad.cfg:[0-9]+.*dist.grad_dtype"
else
    skip "grad_dtype in the file" "$CFG has no 'dist = {' group to add it to"
fi
run "$DTRAIN" train $CFG --set data.dir=$FIX --set dist.grad_dtype=16 --dry-run
expect_rc "dist.grad_dtype = 16 (not a string): exit 2" 2
run "$DTRAIN" train $CFG --set data.dir=$FIX $BF16 --set dist.split_invariant=true --dry-run
expect_rc "bf16 gradients with split_invariant: exit 2" 2
expect_err_lines "bf16 gradients with split_invariant: one line" 1
expect_err "bf16 gradients with split_invariant: says why" \
    "dist.grad_dtype.*cannot be combined with dist.split_invariant"
run "$DTRAIN" train $CFG --set data.dir=$FIX $BF16 --print-config
expect_out "--print-config shows grad_dtype" 'grad_dtype = "bf16";'
run "$DTRAIN" train --config-reference
expect_out "--config-reference: dist.grad_dtype and its values" '^\| `dist.grad_dtype` .*fp32, bf16'

# ---- bench allreduce --dtype ----
check_rows() { # n dtype
    $PY -c '
import json, sys
n, dtype = int(sys.argv[2]), sys.argv[3]
lines = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
rows = lines[1:]
assert [r["bytes"] for r in rows] == [2 ** k for k in range(2, 19)], rows
for r in rows:
    assert r["ok"] and r["check"] == "ok" and r["dtype"] == dtype, r
    assert abs(r["busbw_GBs"] - r["algbw_GBs"] * 2 * (n - 1) / n) <= 1e-6 * r["busbw_GBs"], r
' "$TMP/out" "$1" "$2"
}
for backend in shm tcp; do
    run "$DTRAIN" bench allreduce --backend $backend --instances 2 --dtype bf16 --min-bytes 4 \
        --max-bytes 256K --iters 5 --json
    expect_rc "bench allreduce $backend --dtype bf16: exit 0" 0
    check "bench allreduce $backend --dtype bf16: every size checked exactly" check_rows 2 bf16
done
# the narrower vector builds of the conversions and sums (util/vec_isa.h), forced the way a user
# forces the kernels' path: the same exact sums, and the header names the build
for isa in generic avx2; do
    if ! DTRAIN_ISA=$isa "$DTRAIN" --version >/dev/null 2>&1; then
        skip "bench allreduce --dtype bf16 with DTRAIN_ISA=$isa" "this CPU cannot run $isa"
        continue
    fi
    for backend in shm tcp; do
        run env DTRAIN_ISA=$isa "$DTRAIN" bench allreduce --backend $backend --instances 2 \
            --dtype bf16 --min-bytes 4 --max-bytes 256K --iters 5 --json
        check "bench allreduce $backend --dtype bf16, $isa loops: every size checked exactly" \
            check_rows 2 bf16
        expect_out "bench allreduce $backend --dtype bf16, $isa loops: the header names them" \
            "bf16 on the wire, $isa loops"
    done
done
run "$DTRAIN" bench allreduce --backend hier --instances 4 --nodes 2 --dtype bf16 --min-bytes 4 \
    --max-bytes 256K --iters 3 --json
check "bench allreduce hier 2 x 2 --dtype bf16: every size checked exactly" check_rows 4 bf16
if command -v mpirun >/dev/null && [ -x "$DTRAIN_MPI" ]; then
    run mpirun --allow-run-as-root --oversubscribe -np 3 "$DTRAIN_MPI" bench allreduce \
        --backend mpi --dtype bf16 --min-bytes 4 --max-bytes 256K --iters 3 --json
    expect_rc "bench allreduce mpi x 3 --dtype bf16 (mpirun): exit 0" 0
    check "bench allreduce mpi x 3 --dtype bf16: every size checked exactly" check_rows 3 bf16
else
    skip "bench allreduce mpi --dtype bf16" "no mpirun or no MPI=1 build (make dtrain-mpi)"
fi
run "$DTRAIN" bench allreduce --backend tcp --instances 2 --dtype bf16 --min-bytes 1K \
    --max-bytes 1K --iters 3
expect_out "bench allreduce --dtype bf16: the header says bf16 on the wire" "bf16 on the wire"
run "$DTRAIN" bench allreduce --dtype bf15
expect_rc "bench allreduce --dtype bf15: exit 2" 2
expect_err "bench allreduce --dtype bf15: names the values" "unknown dtype 'bf15' \\(valid: fp32, bf16\\)"
run "$DTRAIN" bench $CFG --dtype bf16
expect_rc "bench CONFIG --dtype: exit 2" 2
expect_err "bench CONFIG --dtype: points at --set dist.grad_dtype" "dist.grad_dtype"

finish
