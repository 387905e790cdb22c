#!/usr/bin/env python3
"""WAL bytes by relation, for one database, between two LSNs.

    bench/walstat.py --database NAME --start 0/4798FCE0 --end 0/4FB066A8 [--per N]

Runs pg_waldump over the server's pg_wal (read access needed: run as root
or postgres) and adds up each record's total length (its full-page images
included) by the relation its first block belongs to, keeping only the
relations of the named database (the cluster's WAL also holds every other
database's writes). Records of no relation (commits) are counted apart, for
the whole cluster. `--per N` divides by N (holds placed in the range).
Relation names come from that database's pg_class, so run it before the
database is dropped.
"""

import argparse
import collections
import re
import subprocess
import sys

WALDUMP = "/usr/lib/postgresql/15/bin/pg_waldump"
PG_WAL = "/var/lib/postgresql/15/main/pg_wal"
RECORD = re.compile(
    r"rmgr: (\S+)\s+len \(rec/tot\):\s*(\d+)/\s*(\d+), tx:\s*(\d+), lsn: \S+, prev \S+, desc: (\S+)"
)
BLOCK = re.compile(r"rel (\d+)/(\d+)/(\d+)")


def psql(database, sql):
    out = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", database, "-Atc", sql],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [line.split("|") for line in out.splitlines() if line]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", required=True)
    parser.add_argument("--start", required=True)
    parser.add_argument("--end", required=True)
    parser.add_argument("--per", type=int, default=1)
    parser.add_argument("--wal", default=PG_WAL)
    args = parser.parse_args()

    (oid,), = psql(args.database, "SELECT oid FROM pg_database WHERE datname = current_database()")
    names = {
        filenode: name
        for filenode, name in psql(
            args.database,
            "SELECT pg_relation_filenode(oid), relname FROM pg_class WHERE pg_relation_filenode(oid) IS NOT NULL",
        )
    }
    dump = subprocess.run(
        [WALDUMP, "-p", args.wal, "-s", args.start, "-e", args.end],
        capture_output=True,
        text=True,
    )
    by_relation = collections.Counter()
    by_kind = collections.Counter()
    records = collections.Counter()
    other = 0
    for line in dump.stdout.splitlines():
        record = RECORD.search(line)
        if not record:
            continue
        rmgr, _, total, _, desc = record.groups()
        total = int(total)
        block = BLOCK.search(line)
        if block is None:
            by_kind[f"{rmgr}/{desc} (cluster-wide)"] += total
            continue
        if block.group(2) != oid:
            other += total
            continue
        name = names.get(block.group(3), f"filenode {block.group(3)}")
        by_relation[name] += total
        by_kind[f"{rmgr}/{desc}"] += total
        records[name] += 1
    per = max(args.per, 1)
    ours = sum(by_relation.values())
    print(f"WAL of database {args.database} ({ours} bytes; {ours / per:.0f} per unit over {per})")
    print(f"{'relation':40} {'bytes/unit':>10} {'records/unit':>12}")
    for name, total in by_relation.most_common():
        print(f"{name:40} {total / per:10.0f} {records[name] / per:12.2f}")
    print()
    print(f"{'record kind':40} {'bytes/unit':>10}")
    for kind, total in by_kind.most_common(25):
        print(f"{kind:40} {total / per:10.0f}")
    print(f"\nother databases: {other} bytes")
    if dump.returncode != 0 and not by_relation:
        sys.stderr.write(dump.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
