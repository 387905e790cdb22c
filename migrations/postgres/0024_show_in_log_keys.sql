-- Every event names its show, and the log's unique keys name it too (#49):
-- a database sharded by show (Citus, distribution column show_id) refuses a
-- unique key without the distribution column, and a NULL show could not be
-- placed on any shard.
--
-- Every stream the service writes has named its show in every event
-- (command::streams::Stream); a stream's show never changes (it is part of
-- the stream's id). An event written without one (by a tool, or a checkout
-- of an old version) takes its stream's show from the stream's other events,
-- or, for a checkout, from the checkout's row. Anything still without a show
-- after that stops the migration, with the streams named: no shard could
-- take them, and guessing a show would put them in another show's history.
--
-- Nothing that was unique stops being so: a stream's events are all of one
-- show, so (stream, sequence, show) is unique where (stream, sequence) was,
-- and a position is unique across the log by construction ((xid +
-- xid_offset) * 65,536 + its place in the transaction: booking_apply.sql).
-- The show goes last in each key, so a lookup without it (a stream's load,
-- a reader's scan by position) still walks the key's index.
--
-- On a large log this rebuilds two indexes under an exclusive lock, while
-- every instance is stopped for the upgrade (README, "Configuration").
UPDATE events e
SET show_id = s.show_id
FROM (SELECT DISTINCT ON (aggregate_type, aggregate_id) aggregate_type, aggregate_id, show_id
      FROM events
      WHERE show_id IS NOT NULL
      ORDER BY aggregate_type, aggregate_id, sequence) s
WHERE e.show_id IS NULL
  AND e.aggregate_type = s.aggregate_type
  AND e.aggregate_id = s.aggregate_id;

UPDATE events e
SET show_id = c.show_id
FROM checkouts c
WHERE e.show_id IS NULL
  AND e.aggregate_type = 'Checkout'
  AND e.aggregate_id = c.hold_id;

DO $$
DECLARE
    orphans text;
BEGIN
    SELECT string_agg(DISTINCT aggregate_type || ' ' || aggregate_id, ', ')
    INTO orphans
    FROM (SELECT aggregate_type, aggregate_id FROM events WHERE show_id IS NULL LIMIT 20) o;
    IF orphans IS NOT NULL THEN
        RAISE EXCEPTION 'events of no show: %', orphans
            USING HINT = 'set events.show_id of these streams to the show they belong to, then start again';
    END IF;
END
$$;

ALTER TABLE events ALTER COLUMN show_id SET NOT NULL;
ALTER TABLE events DROP CONSTRAINT events_pkey,
    ADD PRIMARY KEY (aggregate_type, aggregate_id, sequence, show_id);
DROP INDEX events_position;
CREATE UNIQUE INDEX events_position ON events (position, show_id);
