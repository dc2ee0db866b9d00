#!/bin/bash
# All-reduce across two "hosts" (network namespaces) joined by a link with added delay, against
# that link's measured capacity (issue 5: "the ring must keep the link busy").
#
#   sudo [MAX_BYTES=256M] [DTRAIN_SOCKET_BUFFER=16M] [DTYPE=bf16] bench/delay_link.sh [DELAY_MS] [RATE_MBIT]
#   (defaults: 20 ms each way, no rate cap, messages up to 64M, dtrain's 4 MiB socket buffers,
#   fp32 on the wire; DTYPE=bf16 times dist.grad_dtype's bf16 all-reduce, --dtype bf16)
#
# The link is tc netem on a veth pair where the kernel has sch_netem, else
# tests/tools/delayline.py (a user-space delay line over TUN devices, DELAY_MS each way). The
# capacity is what 4 TCP streams each way at the same time (a 2-rank ring sends both ways) carry
# over 10 s after a 2 s warm-up; then `dtrain bench allreduce` runs rank 0 and rank 1 in the
# two namespaces. Needs root, iproute2 and python3.
set -eu
DELAY=${1:-20} RATE=${2:-0}
cd "$(dirname "$0")/.."
NS=dtdl$$
export DTRAIN_TOKEN=delay-link-bench-$$-0123456789abcdef
cleanup() {
    [ -n "${DL:-}" ] && kill "$DL" 2>/dev/null && wait "$DL" 2>/dev/null
    ip netns del ${NS}a 2>/dev/null || true
    ip netns del ${NS}b 2>/dev/null || true
}
trap cleanup EXIT
ip netns add ${NS}a && ip netns add ${NS}b
ip -n ${NS}a link set lo up && ip -n ${NS}b link set lo up
A=172.30.0.1 B=172.30.0.2 DEV=dl0
if ip link add ${NS}x type veth peer name ${NS}y 2>/dev/null &&
    ip link set ${NS}x netns ${NS}a && ip link set ${NS}y netns ${NS}b &&
    ip netns exec ${NS}a tc qdisc add dev ${NS}x root netem delay ${DELAY}ms 2>/dev/null &&
    ip netns exec ${NS}b tc qdisc add dev ${NS}y root netem delay ${DELAY}ms; then
    DEV=${NS}x
    ip -n ${NS}a addr add $A/30 dev ${NS}x && ip -n ${NS}a link set ${NS}x up
    ip -n ${NS}b addr add $B/30 dev ${NS}y && ip -n ${NS}b link set ${NS}y up
    IFA=${NS}x IFB=${NS}y
    echo "# link: veth with tc netem delay ${DELAY}ms each way"
else
    ip -n ${NS}a link del ${NS}x 2>/dev/null || true
    extra=""
    [ "$RATE" != 0 ] && extra="--rate-mbit $RATE"
    /usr/bin/python3 tests/tools/delayline.py ${NS}a $A ${NS}b $B --delay-ms "$DELAY" $extra >/tmp/$NS.dl &
    DL=$!
    for _ in $(seq 100); do grep -q ready /tmp/$NS.dl 2>/dev/null && break; sleep 0.1; done
    IFA=dl0 IFB=dl0
    echo "# link: user-space delay line (no sch_netem in this kernel), ${DELAY} ms each way${extra:+, $RATE Mbit/s}"
fi
# capacity: 4 TCP streams each way at once (so no single window limits the link), with the
# socket buffers dtrain's ring asks for (4 MiB)
stream='
import socket, sys, threading, time
role, host, port, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
P, BUF, WARM = 4, 4 << 20, 2.0
def sock():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUF); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUF)
    return s
if role == "recv":
    l = sock(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); l.bind((host, port)); l.listen(P)
    got = [0] * P; span = [None] * P
    def rx(i, c):
        buf = bytearray(BUF); t0 = None
        while True:
            k = c.recv_into(buf)
            if not k: break
            now = time.monotonic()
            if t0 is None: t0 = now + WARM
            if now >= t0: got[i] += k
        span[i] = (t0, now)
    ts = [threading.Thread(target=rx, args=(i, l.accept()[0])) for i in range(P)]
    [t.start() for t in ts]; [t.join() for t in ts]
    t0 = max(a for a, _ in span); t1 = min(b for _, b in span)
    print(f"{sum(got) / (t1 - t0) / 1e6:.1f}")
else:
    def tx():
        s = sock(); s.connect((host, port)); view = memoryview(bytearray(BUF)); t0 = time.monotonic()
        while time.monotonic() - t0 < secs + WARM: s.sendall(view)
        s.close()
    ts = [threading.Thread(target=tx) for _ in range(P)]
    [t.start() for t in ts]; [t.join() for t in ts]
'
ip netns exec ${NS}b python3 -c "$stream" recv $B 45001 0 >/tmp/$NS.ab &
R1=$!
ip netns exec ${NS}a python3 -c "$stream" recv $A 45002 0 >/tmp/$NS.ba &
R2=$!
sleep 0.5
ip netns exec ${NS}a python3 -c "$stream" send $B 45001 10 &
ip netns exec ${NS}b python3 -c "$stream" send $A 45002 10 &
wait $R1 $R2
echo "# capacity: a->b $(cat /tmp/$NS.ab) MB/s, b->a $(cat /tmp/$NS.ba) MB/s at the same time (4 streams each way, 10 s after 2 s of warm-up)"
rm -f /tmp/$NS.ab /tmp/$NS.ba /tmp/$NS.dl
ip netns exec ${NS}b ./dtrain bench allreduce --backend tcp --nodes 2 --node-rank 1 \
    --master $A:29650 --iface $IFB --min-bytes 64K --max-bytes "${MAX_BYTES:-64M}" \
    --dtype "${DTYPE:-fp32}" --quiet >/dev/null &
R1=$!
ip netns exec ${NS}a ./dtrain bench allreduce --backend tcp --nodes 2 --node-rank 0 \
    --master $A:29650 --iface $IFA --min-bytes 64K --max-bytes "${MAX_BYTES:-64M}" \
    --dtype "${DTYPE:-fp32}" --quiet
wait $R1
echo "# busbw is what each direction of the link carried (2 ranks: bytes each way = message size)"
