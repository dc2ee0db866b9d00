#!/usr/bin/python3
"""Compares the model tensors (every name but "optimizer.*") of two or more safetensors checkpoints.

    compare_weights.py [--rtol R] [--only TEXT] A.safetensors B.safetensors [C.safetensors ...]

Exit 0 when every tensor of every file matches the first file's within R (relative to the
largest absolute value of the tensor; R = 0 demands bit-identical bytes), else prints the worst
tensor and exits 1. --only compares the tensors whose names contain TEXT. Integer tensors (batchnorm's num_batches_tracked) must be equal. Standard library only (struct), so it runs wherever the tests do.
"""
import json
import struct
import sys


def load(path, only=""):
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8 : 8 + hlen])
    base = 8 + hlen
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or name.startswith("optimizer.") or only not in name:
            continue
        assert info["dtype"] in ("F32", "I64"), (path, name, info["dtype"])
        lo, hi = info["data_offsets"]
        out[name] = (info["dtype"], raw[base + lo : base + hi])

    return out


def main():
    args = sys.argv[1:]
    rtol = 0.0
    only = ""
    while args[:1] in (["--rtol"], ["--only"]):
        if args[0] == "--rtol":
            rtol = float(args[1])
        else:
            only = args[1]
        args = args[2:]
    ref = load(args[0], only)
    worst = (0.0, None, None)
    for path in args[1:]:
        other = load(path, only)
        if sorted(other) != sorted(ref):
            print(f"{path}: tensors {sorted(other)} differ from {sorted(ref)}")
            return 1
        for name, (kind, a) in ref.items():
            b = other[name][1]
            if rtol == 0.0 or kind != "F32":
                if a != b:
                    print(f"{path}: {name} is not bit-identical to {args[0]}")
                    return 1
                continue
            n = len(a) // 4
            x = struct.unpack(f"<{n}f", a)
            y = struct.unpack(f"<{n}f", b)
            scale = max(max(abs(v) for v in x), 1e-30)
            err = max(abs(p - q) for p, q in zip(x, y)) / scale
            if err > worst[0]:
                worst = (err, path, name)
    if worst[0] > rtol:
        print(f"{worst[1]}: {worst[2]} differs by {worst[0]:.3g} (relative), more than {rtol}")
        return 1
    print(f"max relative difference {worst[0]:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
