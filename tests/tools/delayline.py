#!/usr/bin/python3
"""A user-space `tc netem delay`: a point-to-point link between two network namespaces whose
packets each spend DELAY ms in transit (optionally at a limited rate).

Why: the multi-host test must show the ring trains correctly over a slow link, and kernels built
without CONFIG_NET_SCH_NETEM (this project's VMs among them) cannot add delay to a veth. This
creates a TUN device in each namespace (the same name in both), gives them ADDR_A and ADDR_B
(a /30 of their own) and forwards every IP packet from one to the other after the delay, in
order. It prints "ready" on stdout once both ends are up, runs until SIGTERM/SIGINT, then prints
"forwarded N packets, B bytes".

    delayline.py NS_A ADDR_A NS_B ADDR_B --dev dl0 --delay-ms 20 [--rate-mbit R] [--mtu M]

Needs root (setns into /run/netns/NAME, /dev/net/tun) and iproute2; exits 77 when the machine
has no usable TUN device."""
import argparse, collections, ctypes, fcntl, os, select, signal, struct, subprocess, sys, time

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000
libc = ctypes.CDLL(None, use_errno=True)


def tun_in(ns, dev):
    """A TUN device named dev inside namespace ns; the fd keeps working from any namespace."""
    nsfd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    if libc.setns(nsfd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        sys.exit(f"delayline: setns {ns}: {os.strerror(e)}")
    os.close(nsfd)
    try:
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", dev.encode(), IFF_TUN | IFF_NO_PI))
    except OSError as e:  # no TUN in this kernel or container: the caller may skip (77)
        print(f"delayline: no TUN device in {ns}: {e}", file=sys.stderr)
        sys.exit(77)
    return fd


def ip(ns, *args):
    subprocess.run(["ip", "-n", ns, *args], check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ns_a"), ap.add_argument("addr_a"), ap.add_argument("ns_b"), ap.add_argument("addr_b")
    ap.add_argument("--dev", default="dl0")
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--rate-mbit", type=float, default=0.0, help="link rate (0: as fast as we forward)")
    ap.add_argument("--mtu", type=int, default=65000)
    a = ap.parse_args()
    ends = []
    for ns, addr, peer in ((a.ns_a, a.addr_a, a.addr_b), (a.ns_b, a.addr_b, a.addr_a)):
        fd = tun_in(ns, a.dev)
        ip(ns, "addr", "add", addr, "peer", peer, "dev", a.dev)
        ip(ns, "link", "set", a.dev, "mtu", str(a.mtu), "up")
        ends.append(fd)
    delay = a.delay_ms / 1000.0
    byte_time = 8.0 / (a.rate_mbit * 1e6) if a.rate_mbit > 0 else 0.0
    # per direction: packets in flight (due time, bytes) and when the "wire" is next free
    queue = {fd: collections.deque() for fd in ends}
    wire_free = {fd: 0.0 for fd in ends}
    other = {ends[0]: ends[1], ends[1]: ends[0]}
    stats = [0, 0]

    def stop(*_):
        print(f"forwarded {stats[0]} packets, {stats[1]} bytes", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    while True:
        now = time.monotonic()
        due = [q[0][0] for q in queue.values() if q]
        timeout = max(0.0, min(due) - now) if due else None
        readable, _, _ = select.select(ends, [], [], timeout)
        now = time.monotonic()
        for fd in readable:
            for _ in range(256):  # drain, but keep delivering on time under load
                try:
                    pkt = os.read(fd, 65536)
                except BlockingIOError:
                    break
                out = other[fd]
                sent = max(now, wire_free[out]) + len(pkt) * byte_time
                wire_free[out] = sent
                queue[out].append((sent + delay, pkt))
        for fd, q in queue.items():
            while q and q[0][0] <= now:
                try:
                    os.write(fd, q[0][1])
                except BlockingIOError:
                    break
                except OSError:
                    pass  # a packet the stack refuses is a lost packet, as on a real link
                stats[0] += 1
                stats[1] += len(q[0][1])
                q.popleft()


if __name__ == "__main__":
    main()
