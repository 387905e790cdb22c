-- Where each projector has read the log up to (position), moved by
-- compare-and-set so that two instances never corrupt it.
CREATE TABLE projector_checkpoints
(
    name          text   PRIMARY KEY,
    position      bigint NOT NULL,
    updated_at_us bigint NOT NULL
);
INSERT INTO projector_checkpoints (name, position, updated_at_us) VALUES ('projections', 0, 0);

-- One append = one statement = one round trip and one implicit transaction:
-- the events of every stream a command touched, at the sequences decided on,
-- with the read-model rows they produce (or only rows and a checkpoint move,
-- for the projector). A duplicate (aggregate_type, aggregate_id, sequence)
-- aborts the whole statement with SQLSTATE BK409; a taken idempotency key
-- with BK422; a moved checkpoint with BK412.
--
-- Events take their transaction id and their positions under one advisory
-- lock, held only for the insert (not until commit), so that xid order and
-- position order agree. A reader that takes only rows with txid below its
-- snapshot's xmin can then never pass a position still to be committed.
CREATE FUNCTION booking_append(batch jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    expected bigint := coalesce(jsonb_array_length(batch -> 'events'), 0);
    inserted bigint := 0;
BEGIN
    IF expected > 0 THEN
        PERFORM pg_advisory_lock(7261034001);
        BEGIN
            PERFORM pg_current_xact_id();
            INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version,
                                payload, metadata, recorded_at_us, show_id)
            SELECT e.t, e.i, e.s, e.et, e.ev, e.p, e.m, e.r, e.sh
            FROM jsonb_to_recordset(batch -> 'events')
                 AS e(t text, i text, s bigint, et text, ev text, p jsonb, m jsonb, r bigint, sh text)
            ON CONFLICT DO NOTHING;
            GET DIAGNOSTICS inserted = ROW_COUNT;
        EXCEPTION WHEN OTHERS THEN
            PERFORM pg_advisory_unlock(7261034001);
            RAISE;
        END;
        PERFORM pg_advisory_unlock(7261034001);
        IF inserted <> expected THEN
            RAISE EXCEPTION 'a stream moved past the decided version' USING ERRCODE = 'BK409';
        END IF;
    END IF;

    IF jsonb_typeof(batch -> 'idempotency') = 'object' THEN
        INSERT INTO idempotency_keys (buyer, key, request_hash, hold_id, created_at_us)
        SELECT k.buyer, k.key, k.request_hash, k.hold_id, k.created_at_us
        FROM jsonb_to_record(batch -> 'idempotency')
             AS k(buyer text, key text, request_hash text, hold_id text, created_at_us bigint)
        ON CONFLICT DO NOTHING;
        GET DIAGNOSTICS inserted = ROW_COUNT;
        IF inserted = 0 THEN
            RAISE EXCEPTION 'idempotency key taken' USING ERRCODE = 'BK422';
        END IF;
    END IF;

    IF jsonb_typeof(batch -> 'checkpoint') = 'object' THEN
        UPDATE projector_checkpoints c SET position = k.to_position, updated_at_us = k.at_us
        FROM jsonb_to_record(batch -> 'checkpoint')
             AS k(name text, from_position bigint, to_position bigint, at_us bigint)
        WHERE c.name = k.name AND c.position = k.from_position;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'checkpoint moved' USING ERRCODE = 'BK412';
        END IF;
    END IF;

    UPDATE seat_availability a
    SET status = u.status, hold_id = u.hold_id, buyer = u.buyer, expires_at_us = u.expires_at_us,
        booking_id = u.booking_id, last_seq = u.seq
    FROM jsonb_to_recordset(batch -> 'seats')
         AS u(show_id text, seat_id text, status text, hold_id text, buyer text,
              expires_at_us bigint, booking_id text, seq bigint)
    WHERE a.show_id = u.show_id AND a.seat_id = u.seat_id AND a.last_seq < u.seq;

    UPDATE pool_shards s SET sold = u.sold, last_seq = u.seq
    FROM jsonb_to_recordset(batch -> 'shards')
         AS u(show_id text, pool_id text, shard integer, sold integer, seq bigint)
    WHERE s.show_id = u.show_id AND s.pool_id = u.pool_id AND s.shard = u.shard AND s.last_seq < u.seq;

    INSERT INTO holds (hold_id, show_id, buyer, expires_at_us, state, pool_id)
    SELECT h.hold_id, h.show_id, h.buyer, h.expires_at_us, 'held', h.pool_id
    FROM jsonb_to_recordset(batch -> 'holds')
         AS h(hold_id text, show_id text, buyer text, expires_at_us bigint, pool_id text)
    ON CONFLICT DO NOTHING;

    INSERT INTO hold_seats (hold_id, seat_id)
    SELECT h.hold_id, h.seat_id
    FROM jsonb_to_recordset(batch -> 'hold_seats') AS h(hold_id text, seat_id text)
    ON CONFLICT DO NOTHING;

    INSERT INTO pool_holds (hold_id, show_id, pool_id, shard, quantity, expires_at_us, state)
    SELECT h.hold_id, h.show_id, h.pool_id, h.shard, h.quantity, h.expires_at_us, 'held'
    FROM jsonb_to_recordset(batch -> 'pool_holds')
         AS h(hold_id text, show_id text, pool_id text, shard integer, quantity integer, expires_at_us bigint)
    ON CONFLICT DO NOTHING;

    UPDATE holds h SET state = u.state
    FROM jsonb_to_recordset(batch -> 'ends') AS u(hold_id text, state text)
    WHERE h.hold_id = u.hold_id AND h.state = 'held';

    UPDATE pool_holds p SET state = u.state
    FROM jsonb_to_recordset(batch -> 'ends') AS u(hold_id text, state text)
    WHERE p.hold_id = u.hold_id AND p.state = 'held';

    UPDATE holds h SET state = 'converted', booking_id = u.booking_id
    FROM jsonb_to_recordset(batch -> 'converts') AS u(hold_id text, booking_id text)
    WHERE h.hold_id = u.hold_id AND h.state = 'held';

    UPDATE pool_holds p SET state = 'converted'
    FROM jsonb_to_recordset(batch -> 'converts') AS u(hold_id text, booking_id text)
    WHERE p.hold_id = u.hold_id AND p.state = 'held';

    INSERT INTO checkouts (hold_id, show_id, buyer, phase, booking_id, charge_id, refund_id,
                           refund_reason, amount_cents, last_seq, updated_at_us)
    SELECT c.hold_id, c.show_id, c.buyer, c.phase, c.booking_id, c.charge_id, c.refund_id,
           c.refund_reason, c.amount_cents, c.seq, c.updated_at_us
    FROM jsonb_to_recordset(batch -> 'checkouts')
         AS c(hold_id text, show_id text, buyer text, phase text, booking_id text, charge_id text,
              refund_id text, refund_reason text, amount_cents bigint, seq bigint, updated_at_us bigint)
    ON CONFLICT (hold_id) DO UPDATE SET
        phase = excluded.phase, booking_id = excluded.booking_id, charge_id = excluded.charge_id,
        refund_id = excluded.refund_id, refund_reason = excluded.refund_reason,
        amount_cents = excluded.amount_cents, last_seq = excluded.last_seq,
        updated_at_us = excluded.updated_at_us
    WHERE checkouts.last_seq < excluded.last_seq;
END
$$;
