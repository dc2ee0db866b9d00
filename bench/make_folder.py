#!/usr/bin/python3
"""Writes an IDX dataset (MNIST family) as an image folder dtrain's data.format = "folder" reads:
OUT/train/<class>/<n>.png and OUT/test/<class>/<n>.png, one 8-bit grayscale PNG per image.

Class folders are the label zero-padded ("0" .. "9"), so their sorted order is the label order,
and files are the sample's index in its split zero-padded, so within a class they keep the IDX
order. A folder therefore lists class 0's samples first, then class 1's: with --idx-out the
script also writes the same samples as IDX files in that folder order, for comparing a run on
the folder with a run on IDX sample for sample. PNGs are written with zlib alone (no PIL).

  /usr/bin/python3 bench/make_folder.py /usr/share/datasets/fashion-mnist OUT [--limit N] [--idx-out DIR]
"""
import argparse
import gzip
import os
import struct
import sys
import zlib

import numpy as np


def png_bytes(pixels, color_type=0, bit_depth=8, palette=None):
    """PNG of an (h, w) or (h, w, c) uint8/uint16 array; color_type as in the PNG spec."""
    h, w = pixels.shape[:2]

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    if bit_depth == 16:
        raw = pixels.astype(">u2").reshape(h, -1).view(np.uint8)
    else:
        raw = pixels.astype(np.uint8).reshape(h, -1)
    rows = np.concatenate([np.zeros((h, 1), np.uint8), raw], axis=1)  # filter type 0 per row
    out = b"\x89PNG\r\n\x1a\n"
    out += chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 0))
    if palette is not None:
        out += chunk(b"PLTE", bytes(np.asarray(palette, np.uint8).reshape(-1)))
    out += chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
    return out + chunk(b"IEND", b"")


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(src, name):
    for candidate in (name + ".gz", name):
        path = os.path.join(src, candidate)
        if os.path.exists(path):
            return path
    sys.exit(f"make_folder: {src}: no {name}[.gz]")


def write_idx(path, array):
    header = struct.pack(">I", 0x800 + array.ndim) + struct.pack(">" + "I" * array.ndim,
                                                               *array.shape)
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(header + array.tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", help="directory with the four IDX files")
    ap.add_argument("out", help="folder to create")
    ap.add_argument("--limit", type=int, default=0, help="first N samples of each split")
    ap.add_argument("--idx-out", help="also write the samples as IDX files in folder order")
    args = ap.parse_args()
    splits = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
              "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
    for split, (images_name, labels_name) in splits.items():
        images = read_idx(find(args.src, images_name))
        labels = read_idx(find(args.src, labels_name))
        if args.limit:
            images, labels = images[:args.limit], labels[:args.limit]
        classes = int(labels.max()) + 1
        width = len(str(classes - 1))
        digits = len(str(len(labels) - 1))
        for c in range(classes):
            os.makedirs(os.path.join(args.out, split, str(c).zfill(width)), exist_ok=True)
        for i, (img, label) in enumerate(zip(images, labels)):
            path = os.path.join(args.out, split, str(int(label)).zfill(width),
                                str(i).zfill(digits) + ".png")
            with open(path, "wb") as f:
                f.write(png_bytes(img))
        if args.idx_out:
            os.makedirs(args.idx_out, exist_ok=True)
            order = np.argsort(labels, kind="stable")  # class-major, IDX order within a class
            write_idx(os.path.join(args.idx_out, images_name + ".gz"), images[order])
            write_idx(os.path.join(args.idx_out, labels_name + ".gz"), labels[order])
    return 0


if __name__ == "__main__":
    sys.exit(main())
