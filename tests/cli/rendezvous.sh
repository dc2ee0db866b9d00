# The rendezvous under hostile connections, on loopback with --nodes 2: idle connections that
# fill every pending slot do not keep a genuine rank out, and a rank with the wrong token is
# told so (the master reports it too) instead of seeing "connection closed".
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

finish
