-- booking_append(document): one command's writes in one transaction of its
-- own (the call's): booking_apply (booking_apply.sql), with a refusal raised
-- as its SQLSTATE, which undoes the whole call. Applied with CREATE OR
-- REPLACE at every start, after booking_apply.
CREATE OR REPLACE FUNCTION booking_append(batch jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    refused text;
BEGIN
    refused := booking_apply(
        batch,
        (pg_current_xact_id()::text::bigint + (SELECT xid_offset FROM log_epoch)) << 16,
        0);
    IF refused IS NOT NULL THEN
        RAISE EXCEPTION 'append refused' USING ERRCODE = refused;
    END IF;
END
$$;
