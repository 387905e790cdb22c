-- A seat hold's seats move into its own row (issue #23): a hold's seats are
-- placed together, in one append, and read together, and a row of their own
-- for each cost every hold a second insert and two more index entries (212
-- bytes of WAL a hold, BENCHMARKS.md). `seat_ids` is a JSON array of seat
-- ids in text (the same column on SQLite); a pool hold's is empty.
ALTER TABLE holds ADD COLUMN seat_ids text NOT NULL DEFAULT '[]';

UPDATE holds h
SET seat_ids = s.seat_ids
FROM (SELECT hold_id, jsonb_agg(seat_id ORDER BY seat_id)::text AS seat_ids
      FROM hold_seats GROUP BY hold_id) AS s
WHERE h.hold_id = s.hold_id;

DROP TABLE hold_seats;
