-- booking_upsert_checkouts(rows): checkout rows (a JSON array of the table's
-- rows) written where newer: the latest of each hold's rows, inserted, or
-- over a row of an older sequence. Used by booking_apply (a document's
-- part) and booking_append_group (a group's); applied with CREATE OR
-- REPLACE at every start, before them. PL/pgSQL, not SQL: Citus refuses a
-- SQL function with parameters (it would inline it into its callers).
CREATE OR REPLACE FUNCTION booking_upsert_checkouts(rows jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO checkouts (hold_id, show_id, buyer, phase, booking_id, charge_id, refund_id,
                           refund_reason, amount_cents, last_seq, updated_at_us)
    SELECT DISTINCT ON (c.hold_id) c.hold_id, c.show_id, c.buyer, c.phase, c.booking_id, c.charge_id,
           c.refund_id, c.refund_reason, c.amount_cents, c.last_seq, c.updated_at_us
    FROM jsonb_populate_recordset(NULL::checkouts, rows) AS c
    ORDER BY c.hold_id, c.last_seq DESC
    ON CONFLICT (hold_id, show_id) DO UPDATE SET
        phase = excluded.phase, booking_id = excluded.booking_id, charge_id = excluded.charge_id,
        refund_id = excluded.refund_id, refund_reason = excluded.refund_reason,
        amount_cents = excluded.amount_cents, last_seq = excluded.last_seq,
        updated_at_us = excluded.updated_at_us
    WHERE checkouts.last_seq < excluded.last_seq;
END
$$;
