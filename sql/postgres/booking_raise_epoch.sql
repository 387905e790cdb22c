-- booking_raise_epoch(): applied with CREATE OR REPLACE after the migrations
-- at every start (src/store/postgres.rs), and called then: at start, before the service serves, raises the
-- log's xid_offset if the positions of new transactions would not sort above
-- the highest position in the log (a dump restored into a new cluster, a
-- promoted logical replica). (Marks that are log positions, such as
-- shows.rows_rewritten_at, need nothing: new positions sort above them.)
-- Returns the offset in force.
CREATE OR REPLACE FUNCTION booking_raise_epoch() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    head       bigint := coalesce((SELECT max(position) FROM events), 0);
    current    bigint := pg_current_xact_id()::text::bigint;
    raised     bigint := (SELECT xid_offset FROM log_epoch);
BEGIN
    IF ((current + raised) << 16) <= head THEN
        raised := (head >> 16) + 1 - current;
        UPDATE log_epoch SET xid_offset = raised;
    END IF;
    RETURN raised;
END
$$;
