-- booking_take_positions(show, n): the show's next n positions, as the last
-- of them (the first is that minus n plus 1). Applied with CREATE OR REPLACE
-- after the migrations at every start (src/store/postgres/append.rs).
--
-- Positions per show (migration 0025): each show's head is its row of
-- log_heads, moved here and locked until the calling transaction ends. A
-- second writer of the show waits at this update until the first commits
-- (or rolls back, and the same numbers are taken again), then reads the
-- head it left: so a show's positions commit in their order, and a reader
-- of the show (by position, in any snapshot) sees a prefix of them and
-- never passes one that commits later. Writers of other shows do not wait.
--
-- A writer takes it as late as it can (booking_append_group: last, just
-- before its events), so that the lock is held for the insert and the
-- commit only. A transaction that writes several shows (the projector's,
-- replay's) takes their heads in show order, so that two never wait for
-- each other. A head moved without events (rows rewritten: booking_apply)
-- leaves a gap, which positions allow.
--
-- A show's first writer inserts its head; two at once both find it
-- missing, and the second's insert waits for the first and then moves the
-- row it made (ON CONFLICT DO UPDATE), only on that first time: on every
-- later append the plain update avoids a speculative insertion's second
-- WAL record.
CREATE OR REPLACE FUNCTION booking_take_positions(show text, n bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    last bigint;
BEGIN
    UPDATE log_heads SET position = position + n WHERE show_id = show RETURNING position INTO last;
    IF NOT FOUND THEN
        INSERT INTO log_heads (show_id, position) VALUES (show, n)
        ON CONFLICT (show_id) DO UPDATE SET position = log_heads.position + excluded.position
        RETURNING position INTO last;
    END IF;
    RETURN last;
END
$$;
