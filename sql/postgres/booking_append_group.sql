-- booking_append_group(documents): the commands that arrived together, in
-- one transaction: one call, one commit and one WAL flush for the group
-- (src/store/postgres.rs, PgAppender). Each document is still all or
-- nothing and refused alone: booking_apply writes nothing of a refused
-- document (see booking_apply.sql) and the rest go on. Returns each
-- document's outcome, in order: NULL (appended) or the refusal's SQLSTATE.
-- An error (not a refusal) aborts the whole group; the caller then appends
-- its documents one by one, so that the error is its own document's alone.
--
-- Every document's events take positions after those of the documents
-- before it (`first`), under the one transaction id: the group must hold at
-- most 65,535 events (the caller bounds it).
CREATE OR REPLACE FUNCTION booking_append_group(batches jsonb) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    base     bigint := (pg_current_xact_id()::text::bigint + (SELECT xid_offset FROM log_epoch)) << 16;
    first    bigint := 0;
    batch    jsonb;
    outcomes text[] := '{}';
BEGIN
    FOR batch IN SELECT value FROM jsonb_array_elements(batches)
    LOOP
        outcomes := outcomes || booking_apply(batch, base, first);
        first := first + coalesce(jsonb_array_length(batch -> 'events'), 0);
    END LOOP;
    RETURN outcomes;
END
$$;
