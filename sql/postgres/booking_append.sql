-- booking_append(show, document): one command's writes in one transaction
-- of its own (the call's): booking_apply (booking_apply.sql), with a refusal
-- raised as its SQLSTATE, which undoes the whole call. Applied with CREATE
-- OR REPLACE at every start, after booking_apply.
--
-- `show` is the document's show (its `show_id`), first so that a database
-- sharded by show (Citus) delegates the call to the worker that owns it
-- (create_distributed_function, by its first argument); NULL for a
-- document of many shows (the projector's, replay's), which runs where it
-- is called. A document of another show than `show` is an error: delegated
-- to the wrong worker, its writes would cross shards.
CREATE OR REPLACE FUNCTION booking_append(show text, batch jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    refused text;
BEGIN
    IF show IS DISTINCT FROM batch ->> 'show_id' THEN
        RAISE EXCEPTION 'booking_append: the document is of show %, not %', batch ->> 'show_id', show;
    END IF;
    refused := booking_apply(batch);
    IF refused IS NOT NULL THEN
        RAISE EXCEPTION 'append refused' USING ERRCODE = refused;
    END IF;
END
$$;
