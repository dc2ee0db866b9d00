#!/usr/bin/python3
"""A small HTTP server for `dtrain fetch` tests, misbehaving on request.

    fetch_server.py --root DIR --port-file FILE --log FILE [--port N]

Serves DIR/NAME at /MODE/[TAG/]NAME, where MODE says how:
  normal      honours "Range: bytes=N-" (206, Content-Range; 416 past the end)
  close-once  the first request for this path sends half the body, then closes the
              connection; later requests are served normally (TAG keeps paths apart)
  stall       sends the headers, then goes silent for 30 s (stall timeouts; a silent start,
              because curl averages the speed over several seconds)
  404, 500    answers that status
  corrupt     serves the file with one byte changed
  norange     ignores Range and always answers 200 with the whole file
  slow        sends 4 KiB every 10 ms (so a progress bar has time to draw)
  redirect    answers 302 to /normal/NAME
  endless     claims no length and sends the file, then zeros, forever (until the client hangs up)
  drip        sends one byte every 0.2 s (fast enough for a stall check, never done)
Every request is logged as one line "METHOD PATH range=RANGE" (RANGE "-" when absent), so a
test can assert what the client asked for. The chosen port is written to --port-file once the
server listens (port 0 picks a free one). Python standard library only.
"""
import argparse
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

closed_once = set()
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fetch-test/1"

    def log_message(self, fmt, *args):
        pass

    def log_request_line(self):
        with lock, open(self.server.log_path, "a") as f:
            f.write("%s %s range=%s\n" % (self.command, self.path,
                                          self.headers.get("Range", "-")))

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.log_request_line()
        parts = [p for p in self.path.split("/") if p]
        if len(parts) < 2:
            return self.fail(400)
        mode, name = parts[0], parts[-1]
        if mode in ("404", "500"):
            return self.fail(int(mode))
        if mode == "redirect":
            self.send_response(302)
            self.send_header("Location", "/normal/" + name)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = os.path.join(self.server.root, name)
        if "/" in name or not os.path.isfile(path):
            return self.fail(404)
        with open(path, "rb") as f:
            body = f.read()
        if mode == "corrupt":
            mid = len(body) // 2
            body = body[:mid] + bytes([body[mid] ^ 0xFF]) + body[mid + 1:]
        self.serve(mode, body)

    def fail(self, status):
        msg = b"nope\n"
        self.send_response(status)
        self.send_header("Content-Length", str(len(msg)))
        self.end_headers()
        self.wfile.write(msg)

    def requested_start(self, mode):
        rng = self.headers.get("Range")
        if mode == "norange" or not rng or not rng.startswith("bytes="):
            return None
        first = rng[len("bytes="):].split("-")[0]
        return int(first) if first.isdigit() else None

    def serve(self, mode, body):
        start = self.requested_start(mode)
        size = len(body)
        if start is not None and start >= size:
            self.send_response(416)
            self.send_header("Content-Range", "bytes */%d" % size)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if start is not None:
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
            body = body[start:]
        else:
            self.send_response(200)
        if mode != "endless":
            self.send_header("Content-Length", str(len(body)))
        else:
            self.close_connection = True  # the body ends when the connection does
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if self.command == "HEAD":
            return
        self.send_body(mode, body)

    def send_body(self, mode, body):
        with lock:
            cut = mode == "close-once" and self.path not in closed_once
            closed_once.add(self.path)
        if mode == "stall":
            self.wfile.flush()
            time.sleep(30)
            return
        if cut:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if mode == "endless":
            self.wfile.write(body)
            while True:
                self.wfile.write(b"\0" * 65536)
                self.wfile.flush()
        if mode == "drip":
            for i in range(len(body)):
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()
                time.sleep(0.2)
            return
        if mode == "slow":
            for i in range(0, len(body), 4096):
                self.wfile.write(body[i:i + 4096])
                self.wfile.flush()
                time.sleep(0.01)
            return
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients hanging up mid-transfer are what these tests are about


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    server = Server(("127.0.0.1", args.port), Handler)
    server.root = args.root
    server.log_path = args.log
    open(args.log, "a").close()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
