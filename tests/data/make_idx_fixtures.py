#!/usr/bin/env python3
"""Writes the tiny IDX fixtures tests/test_data.c reads, independently of hetsim's own code.

tiny-images-idx3-ubyte: 5 images of 3 rows x 4 columns, pixel (i, r, c) = 20*i + 4*r + c + 1
(big-endian header: magic 0x00000803, count, rows, cols). tiny-labels-idx1-ubyte: labels
7, 0, 3, 9, 3 (magic 0x00000801, count). Each also gzipped (mtime 0, so reruns give the same
bytes). Run from anywhere: python3 tests/data/make_idx_fixtures.py
"""
import gzip
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
N, ROWS, COLS = 5, 3, 4
LABELS = [7, 0, 3, 9, 3]

images = struct.pack(">IIII", 0x00000803, N, ROWS, COLS) + bytes(
    20 * i + 4 * r + c + 1 for i in range(N) for r in range(ROWS) for c in range(COLS))
labels = struct.pack(">II", 0x00000801, N) + bytes(LABELS)

for name, payload in (("tiny-images-idx3-ubyte", images), ("tiny-labels-idx1-ubyte", labels)):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(payload)
    with open(os.path.join(HERE, name + ".gz"), "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
            f.write(payload)
