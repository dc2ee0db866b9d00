#!/bin/bash
# All-reduce across two "hosts" (network namespaces) joined by a link with added delay, against
# that link's measured capacity (issue 5: "the ring must keep the link busy").
#
#   sudo bench/delay_link.sh [DELAY_MS] [RATE_MBIT]     (defaults: 20 ms each way, no rate cap)
#
# The link is tc netem on a veth pair where the kernel has sch_netem, else
# tests/tools/delayline.py (a user-space delay line over TUN devices, DELAY_MS each way). The
# capacity is what two TCP streams, one each way at the same time for 10 s (what a 2-rank ring
# sends), carry after a 2 s warm-up; then `dtrain bench allreduce` runs rank 0 and rank 1 in the
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
# capacity: one TCP stream each way at once
stream='
import socket, sys, time
role, host, port, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
buf = bytearray(4 << 20)  # big, preallocated chunks: the kernel does the work, not python
if role == "recv":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port)); s.listen(1); c, _ = s.accept(); n = 0; t0 = None
    while True:
        k = c.recv_into(buf)
        if not k: break
        now = time.monotonic()
        if t0 is None: t0 = now + 2.0
        if now >= t0: n += k
    print(f"{n / (now - t0) / 1e6:.1f}")
else:
    s = socket.create_connection((host, port)); view = memoryview(buf); t0 = time.monotonic()
    while time.monotonic() - t0 < secs + 2.0: s.sendall(view)
    s.close()
'
ip netns exec ${NS}b python3 -c "$stream" recv $B 45001 0 >/tmp/$NS.ab &
R1=$!
ip netns exec ${NS}a python3 -c "$stream" recv $A 45002 0 >/tmp/$NS.ba &
R2=$!
sleep 0.5
ip netns exec ${NS}a python3 -c "$stream" send $B 45001 10 &
ip netns exec ${NS}b python3 -c "$stream" send $A 45002 10 &
wait $R1 $R2
echo "# capacity: a->b $(cat /tmp/$NS.ab) MB/s, b->a $(cat /tmp/$NS.ba) MB/s at the same time (10 s after 2 s of warm-up)"
rm -f /tmp/$NS.ab /tmp/$NS.ba /tmp/$NS.dl
ip netns exec ${NS}b ./dtrain bench allreduce --backend tcp --nodes 2 --node-rank 1 \
    --master $A:29650 --iface $IFB --min-bytes 64K --quiet >/dev/null &
R1=$!
ip netns exec ${NS}a ./dtrain bench allreduce --backend tcp --nodes 2 --node-rank 0 \
    --master $A:29650 --iface $IFA --min-bytes 64K --quiet
wait $R1
echo "# busbw is what each direction of the link carried (2 ranks: bytes each way = message size)"
