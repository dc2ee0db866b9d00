# The rendezvous under hostile connections, on loopback with --nodes 2: idle connections that
# fill every pending slot do not keep a genuine rank out, a rank with the wrong token is told
# so (the master reports it too) instead of seeing "connection closed", and a flood of garbage
# connections is logged as a few lines and a count, not a line each. Then the one-host
# rendezvous file of srun/mpirun ranks: a file or directory another user planted (simulated as
# root by chown to 65534) or a symbolic link is refused with one line, not read or followed.
. tests/cli/lib.sh

/usr/bin/python3 tests/fixtures/mkdata.py idx "$TMP/fix" --train 256 --test 16
PORT=$((20000 + $$ % 20000))
GOOD=0123456789abcdef0123456789abcdef
ARGS="configs/fashion-convnet.cfg --threads 1 --set data.dir=$TMP/fix --set train.max_steps=2 --nodes 2 --master 127.0.0.1:$PORT"
wait_port() {
    /usr/bin/python3 -c '
import socket, sys, time
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close(); sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)' "$PORT"
}

# ---- 80 idle connections in front of the genuine rank ----
DTRAIN_TOKEN=$GOOD "$DTRAIN" train $ARGS --node-rank 0 --set checkpoint.dir="$TMP/n0" \
    --rendezvous-timeout 30 >"$TMP/n0.out" 2>"$TMP/n0.err" &
n0=$!
wait_port
/usr/bin/python3 -c '
import socket, sys, time
held = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(80)]
time.sleep(12)' "$PORT" &
squat=$!
sleep 0.5
run env DTRAIN_TOKEN=$GOOD "$DTRAIN" train $ARGS --node-rank 1 --set checkpoint.dir="$TMP/n1" \
    --rendezvous-timeout 10 --quiet
expect_rc "80 idle connections holding the slots: the genuine rank still joins" 0
wait $n0
RC=$?
expect_rc "... and the master's run ends normally" 0
kill $squat 2>/dev/null
wait $squat 2>/dev/null
if grep -q "too many connections waiting to authenticate" "$TMP/n0.err"; then
    pass "the master says it made room"
else fail "the master says it made room" "$(tail -c 300 "$TMP/n0.err")"; fi

# ---- the wrong token: both sides say so ----
PORT=$((PORT + 1))
ARGS="configs/fashion-convnet.cfg --threads 1 --set data.dir=$TMP/fix --set train.max_steps=2 --nodes 2 --master 127.0.0.1:$PORT"
DTRAIN_TOKEN=$GOOD "$DTRAIN" train $ARGS --node-rank 0 --set checkpoint.dir="$TMP/w0" \
    --rendezvous-timeout 4 >"$TMP/w0.out" 2>"$TMP/w0.err" &
w0=$!
wait_port
run env DTRAIN_TOKEN=ffffffffffffffffffffffffffffffff "$DTRAIN" train $ARGS --node-rank 1 \
    --set checkpoint.dir="$TMP/w1" --rendezvous-timeout 4
expect_rc "wrong token: the joining host exits 1" 1
expect_err "wrong token: the joining host is told why" "authentication failed \\(wrong job token\\?\\)"
wait $w0
if grep -q "dropped connection from 127.0.0.1.*authentication failed (wrong job token?)" "$TMP/w0.err"; then
    pass "wrong token: the master reports it too"
else fail "wrong token: the master reports it too" "$(tail -c 300 "$TMP/w0.err")"; fi

# ---- 2000 garbage connections: a few lines and a count, not 2000 warnings ----
PORT=$((PORT + 1))
ARGS="configs/fashion-convnet.cfg --threads 1 --set data.dir=$TMP/fix --set train.max_steps=2 --nodes 2 --master 127.0.0.1:$PORT"
DTRAIN_TOKEN=$GOOD "$DTRAIN" train $ARGS --node-rank 0 --set checkpoint.dir="$TMP/g0" \
    --rendezvous-timeout 60 >"$TMP/g0.out" 2>"$TMP/g0.err" &
g0=$!
wait_port
timeout 60 /usr/bin/python3 -c '
import socket, sys
for _ in range(2000):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
    s.settimeout(5)
    try:
        s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n" + b"x" * 32)
        while s.recv(4096):
            pass
    except OSError:
        pass
    s.close()' "$PORT"
run env DTRAIN_TOKEN=$GOOD "$DTRAIN" train $ARGS --node-rank 1 --set checkpoint.dir="$TMP/g1" \
    --rendezvous-timeout 20 --quiet
expect_rc "after 2000 garbage connections the genuine host still joins" 0
if grep -q "finished" "$TMP/err"; then fail "host 1 with --quiet: no line on success" "$(cat "$TMP/err")"; else
    pass "host 1 with --quiet: no line on success"; fi
wait $g0
RC=$?
expect_rc "... and the master's run ends normally" 0
lines=$(grep -c "rendezvous: " "$TMP/g0.err")
if [ "$lines" -le 12 ]; then pass "garbage flood: at most 12 rendezvous lines ($lines)"; else
    fail "garbage flood: at most 12 rendezvous lines" "$lines lines, $(wc -c <"$TMP/g0.err") bytes"; fi
verbatim=$(grep -c "rendezvous: dropped connection from 127.0.0.1" "$TMP/g0.err")
summed=$(grep -Eo "rendezvous: [0-9]+ more rejected connections? in the last [0-9.]+ s" "$TMP/g0.err" |
    awk '{ n += $2 } END { print n + 0 }')
# 2001: wait_port's probe, which connected and closed, was rejected too
if [ $((verbatim + summed)) -eq 2001 ]; then
    pass "garbage flood: $verbatim shown + $summed counted = every rejected connection"
else fail "garbage flood: every rejected connection counted" "$verbatim shown + $summed counted: $(tail -c 400 "$TMP/g0.err")"; fi

# ---- a Kubernetes PyTorchJob's two pods, faked on loopback: RANK / WORLD_SIZE count pods
# when dtrain forks --instances 2 in each (no LOCAL_RANK), so 4 ranks on 2 hosts ----
PORT=$((PORT + 1))
for k in 0 1; do
    env -u LOCAL_RANK -u LOCAL_WORLD_SIZE RANK=$k WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
        DTRAIN_TOKEN=$GOOD timeout 120 "$DTRAIN" train configs/fashion-convnet.cfg --threads 1 \
        --instances 2 --set data.dir=$TMP/fix --set train.max_steps=2 \
        --set checkpoint.dir="$TMP/pod$k" --rendezvous-timeout 30 --verbose \
        >"$TMP/pod$k.out" 2>"$TMP/pod$k.err" &
    eval "POD$k=\$!"
done
wait $POD0
RC=$?
wait $POD1
RC1=$?
[ $RC -eq 0 ] && RC=$RC1
expect_rc "PyTorchJob pods with --instances 2: both exit 0" 0
if grep -q "job: 4 ranks on 2 hosts, backend hier, launch torchrun" "$TMP/pod0.err"; then
    pass "PyTorchJob pods: RANK/WORLD_SIZE counted pods, 2 ranks forked in each"
else fail "PyTorchJob pods: RANK/WORLD_SIZE counted pods" "$(grep -m3 "job:\|error" "$TMP/pod0.err" "$TMP/pod1.err")"; fi
if grep -q "dtrain rank 2: host 1: ranks 2-3 finished, 2 steps" "$TMP/pod1.err"; then
    pass "the second pod says its ranks finished, in global numbers"
else fail "the second pod says its ranks finished" "$(tail -c 300 "$TMP/pod1.err")"; fi

# ---- the one-host rendezvous file (srun -n 2 on one machine, no master) ----
# A rank 1 alone, with the variables srun gives a task; rank 0's file is whatever the test
# planted. Refusals end the wait at once (the timeout is 30 s, the check allows 10).
export TMPDIR="$TMP/tmpdir"
mkdir -p "$TMPDIR"
unset XDG_RUNTIME_DIR
UID0=$(id -u)
RDV_DIR="$TMPDIR/dtrain-$UID0"
rank1() {
    run timeout 10 env -u MASTER_ADDR -u MASTER_PORT -u DTRAIN_TOKEN SLURM_PROCID=1 SLURM_NTASKS=2 \
        SLURM_LOCALID=1 SLURM_NODEID=0 SLURM_NNODES=1 SLURM_JOB_NODELIST="$(hostname)" \
        SLURM_JOB_ID=77 SLURM_STEP_ID=0 "$DTRAIN" train configs/fashion-convnet.cfg --threads 1 \
        --set data.dir="$TMP/fix" --set train.max_steps=1 --set checkpoint.dir="$TMP/rf" \
        --rendezvous-timeout 30
}
mkdir -m 700 "$RDV_DIR"
# a live pid and a port: the old reader took such a file as rank 0's
echo "$$ 1 0123456789abcdef0123456789abcdef" >"$RDV_DIR/dtrain-rdv-slurm-77.0"
chmod 600 "$RDV_DIR/dtrain-rdv-slurm-77.0"
if [ "$UID0" -eq 0 ]; then
    chown 65534 "$RDV_DIR/dtrain-rdv-slurm-77.0"
    rank1
    expect_rc "another user's rendezvous file: exit 1 at once" 1
    expect_err "another user's rendezvous file: refused, saying whose" "refusing $RDV_DIR/dtrain-rdv-slurm-77.0: it belongs to uid 65534, not to you"
    expect_err_lines "another user's rendezvous file: one line" 1
    chown 0 "$RDV_DIR/dtrain-rdv-slurm-77.0"
else
    skip "another user's rendezvous file" "needs root to chown"
fi
mv "$RDV_DIR/dtrain-rdv-slurm-77.0" "$TMP/decoy"
ln -s "$TMP/decoy" "$RDV_DIR/dtrain-rdv-slurm-77.0"
rank1
expect_rc "a symbolic link planted as the rendezvous file: exit 1 at once" 1
expect_err "a symbolic link planted as the rendezvous file: refused, not followed" "refusing $RDV_DIR/dtrain-rdv-slurm-77.0: it is a symbolic link"
rm "$RDV_DIR/dtrain-rdv-slurm-77.0"
chmod 777 "$RDV_DIR"
rank1
expect_rc "a rendezvous directory others may write: exit 1" 1
expect_err "a rendezvous directory others may write: refused" "refusing directory $RDV_DIR: its mode 0777 lets others write to it"
rmdir "$RDV_DIR"
if [ "$UID0" -eq 0 ]; then
    mkdir -m 700 "$RDV_DIR"
    chown 65534 "$RDV_DIR"
    rank1
    expect_rc "another user's rendezvous directory: exit 1" 1
    expect_err "another user's rendezvous directory: refused" "refusing directory $RDV_DIR: it belongs to uid 65534"
    rmdir "$RDV_DIR"
fi
mkdir -p "$TMP/elsewhere"
ln -s "$TMP/elsewhere" "$RDV_DIR"
rank1
expect_rc "a symbolic link planted as the rendezvous directory: exit 1" 1
expect_err "a symbolic link planted as the rendezvous directory: refused" "refusing $RDV_DIR: it is a symbolic link"
check "... and nothing was created through it" test -z "$(ls -A "$TMP/elsewhere")"

finish
