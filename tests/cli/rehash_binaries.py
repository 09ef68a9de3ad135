#!/usr/bin/env python3
"""rehash_binaries.py FILE: recomputes the hash of every binaries row of a package or tuning store, as the
writer does (rt_pkg_binary_hash: FNV-1a 64 of the code, continued over target, config, grid, format,
entry and "block smem", each after a 0 byte). Tests use it after an edit, so that the deeper checks (grids,
launch limits) see the edited row instead of the hash check refusing it first."""
import sqlite3
import sys

MASK = (1 << 64) - 1


def fnv(h, data):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & MASK
    return h


def row_hash(data, target, config, grid, fmt, entry, block, smem):
    h = fnv(0xCBF29CE484222325, data)
    for f in (target, config, grid, fmt, entry, f"{block} {smem}"):
        h = fnv(h, b"\0" + f.encode())
    return f"{h:016x}"


def main():
    db = sqlite3.connect(sys.argv[1])
    rows = db.execute("SELECT rowid, data, target, config, grid, format, entry, block, smem FROM binaries").fetchall()
    for rowid, *fields in rows:
        db.execute("UPDATE binaries SET hash = ? WHERE rowid = ?", (row_hash(*fields), rowid))
    db.commit()


if __name__ == "__main__":
    main()
