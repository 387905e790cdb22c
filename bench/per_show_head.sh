#!/usr/bin/env bash
# What a per-show position would cost an append (#49 item 2), before it is
# built: pgbench against a scratch database, today's position (from the
# transaction id, no lock) beside a per-show head (the show's row updated
# and held to commit, so a show's events commit in their numbers' order),
# one event or ten a transaction, over 64 shows or one, run alternately.
# Usage: bench/per_show_head.sh [postgres-url-of-a-server] [seconds]
set -euo pipefail
SERVER="${1:-postgres://postgres@127.0.0.1:5432}"
SECONDS_EACH="${2:-10}"
DB=per_show_head_bench
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

psql "$SERVER/postgres" -qc "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
psql "$SERVER/$DB" -q <<'SQL'
CREATE TABLE ev (show_id text NOT NULL, stream text NOT NULL, seq bigint NOT NULL,
                 position bigint NOT NULL, payload jsonb NOT NULL,
                 PRIMARY KEY (stream, seq, show_id));
CREATE UNIQUE INDEX ev_show_position ON ev (show_id, position);
CREATE TABLE show_heads (show_id text PRIMARY KEY, head bigint NOT NULL);
INSERT INTO show_heads SELECT 'show-' || g, 0 FROM generate_series(1, 64) g;
-- Today: the position from the transaction id, no lock.
CREATE FUNCTION append_xid(s text, n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE base bigint := pg_current_xact_id()::text::bigint << 16;
BEGIN
  INSERT INTO ev SELECT s, s || '/' || gen_random_uuid(), 1, base + g, '{"HoldPlaced":{}}'
  FROM generate_series(1, n) g;
END $$;
-- Per show: the show's head, its row locked until commit.
CREATE FUNCTION append_head(s text, n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE top bigint;
BEGIN
  UPDATE show_heads SET head = head + n WHERE show_id = s RETURNING head INTO top;
  INSERT INTO ev SELECT s, s || '/' || gen_random_uuid(), 1, top - n + g, '{"HoldPlaced":{}}'
  FROM generate_series(1, n) g;
END $$;
SQL

echo "| shows | events a transaction | run | xid tps | head tps | head/xid |"
echo "|---:|---:|---:|---:|---:|---:|"
for run in 1 2; do
  for shows in 64 1; do
    for n in 1 10; do
      declare -A tps=()
      for way in xid head; do
        printf '\\set s random(1, %d)\nSELECT append_%s('"'"'show-'"'"' || :s, %d);\n' \
          "$shows" "$way" "$n" > "$WORK/$way.sql"
        psql "$SERVER/$DB" -qc "TRUNCATE ev"
        tps[$way]=$(pgbench -n -c 16 -j 2 -T "$SECONDS_EACH" -f "$WORK/$way.sql" "$SERVER/$DB" \
          | awk '/^tps/ {printf "%.0f", $3}')
      done
      echo "| $shows | $n | $run | ${tps[xid]} | ${tps[head]} | $(echo "scale=2; ${tps[head]} / ${tps[xid]}" | bc) |"
    done
  done
done
psql "$SERVER/postgres" -qc "DROP DATABASE $DB"
