#!/usr/bin/env python3
"""The durable-write floor of this machine's disk: what one synced append cannot beat.

Appends N records of SIZE bytes to a preallocated file (as the log's active segment is), each
made durable before the next, three ways: pwrite + fdatasync (what the log does), pwritev2 with
RWF_DSYNC (one system call), and pwrite on an O_DSYNC file. Prints microseconds per record.

    python3 scripts/fsync_floor.py [DIRECTORY] [N] [SIZE]

DIRECTORY defaults to $TMPDIR (use the disk the store lives on), N to 2000, SIZE to 100.
"""
import os
import sys
import tempfile
import time


def run(directory, n, size):
    payload = os.urandom(size)
    results = {}
    for mode in ("pwrite+fdatasync", "pwritev2 RWF_DSYNC", "O_DSYNC pwrite"):
        path = os.path.join(directory, "fsync-floor-%d.dat" % os.getpid())
        flags = os.O_RDWR | os.O_CREAT | (os.O_DSYNC if mode == "O_DSYNC pwrite" else 0)
        fd = os.open(path, flags, 0o644)
        try:
            os.posix_fallocate(fd, 0, 64 << 20)
            os.fsync(fd)
            started = time.perf_counter()
            for i in range(n):
                offset = 4096 + i * size
                if mode == "pwrite+fdatasync":
                    os.pwrite(fd, payload, offset)
                    os.fdatasync(fd)
                elif mode == "pwritev2 RWF_DSYNC":
                    os.pwritev(fd, [payload], offset, os.RWF_DSYNC)
                else:
                    os.pwrite(fd, payload, offset)
            results[mode] = (time.perf_counter() - started) / n * 1e6
        finally:
            os.close(fd)
            os.unlink(path)
    return results


if __name__ == "__main__":
    directory = sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    for mode, micros in run(directory, n, size).items():
        print("%-20s %8.1f us per %d-byte record (%d records, %s)" % (mode, micros, size, n, directory))
