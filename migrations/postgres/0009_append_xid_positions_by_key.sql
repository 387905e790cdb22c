-- booking_append, second version. Migration 0004 has shipped and is not
-- edited (sqlx refuses a database whose applied migration changed); this one
-- replaces the function with three changes.
--
-- 1. Positions derived from the writing transaction's id (xid * 65536 + the
--    event's place in the batch) instead of the identity default under an
--    advisory lock: position order is xid order without any lock or
--    subtransaction. A reader that takes only rows with txid below its
--    snapshot's xmin can never pass a position still to be committed: every
--    transaction still running has an xid at or above xmin, hence every one of
--    its positions is above what the reader has taken. Positions written
--    before this migration (identity values) are all far below xid * 65536,
--    so the order across the upgrade holds. The identity default of
--    events.position now only serves writers that do not set it
--    (postgres-es's own persist).
-- 2. Each part runs only if the batch has it: a statement over an empty array
--    still costs its execution.
-- 3. Command-sized batches update their rows one by one through the primary
--    key. The set-based `UPDATE ... FROM jsonb_to_recordset(...)` let the
--    planner guess 100 rows for the document (the function's default
--    estimate), and against a table of a few tens of thousands of rows it
--    chose a hash join over a sequential scan: every hold on a fresh
--    20,000-seat show read all 20,000 seat rows (measured: 5x fewer holds per
--    second), and every release or purchase read every open hold. A statement
--    with the key as a parameter has one plan whatever the statistics say.
--    Batches above 64 rows (the projector, replay, a large sweep) stay
--    set-based, where a join is the right plan. 64 covers any command: at most
--    50 seats per hold (MAX_SEATS_PER_HOLD) and 32 shards per pool
--    (MAX_POOL_SHARDS).
CREATE OR REPLACE FUNCTION booking_append(batch jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    expected bigint := coalesce(jsonb_array_length(batch -> 'events'), 0);
    inserted bigint := 0;
    r        record;
BEGIN
    IF expected > 0 THEN
        INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version,
                            payload, metadata, recorded_at_us, show_id, position)
        SELECT e.t, e.i, e.s, e.et, e.ev, e.p, e.m, e.r, e.sh,
               (pg_current_xact_id()::text::bigint << 16) + e.n
        FROM jsonb_to_recordset(batch -> 'events')
             AS e(t text, i text, s bigint, et text, ev text, p jsonb, m jsonb, r bigint, sh text, n bigint)
        ON CONFLICT DO NOTHING;
        GET DIAGNOSTICS inserted = ROW_COUNT;
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

    -- Each part only if the batch has it: a statement over an empty array
    -- still costs its execution.
    IF jsonb_array_length(batch -> 'seats') BETWEEN 1 AND 64 THEN
        FOR r IN SELECT * FROM jsonb_to_recordset(batch -> 'seats')
                 AS u(show_id text, seat_id text, status text, hold_id text, buyer text,
                      expires_at_us bigint, booking_id text, seq bigint)
        LOOP
            UPDATE seat_availability
            SET status = r.status, hold_id = r.hold_id, buyer = r.buyer, expires_at_us = r.expires_at_us,
                booking_id = r.booking_id, last_seq = r.seq
            WHERE show_id = r.show_id AND seat_id = r.seat_id AND last_seq < r.seq;
        END LOOP;
    ELSIF jsonb_array_length(batch -> 'seats') > 64 THEN
        UPDATE seat_availability a
        SET status = u.status, hold_id = u.hold_id, buyer = u.buyer, expires_at_us = u.expires_at_us,
            booking_id = u.booking_id, last_seq = u.seq
        FROM jsonb_to_recordset(batch -> 'seats')
             AS u(show_id text, seat_id text, status text, hold_id text, buyer text,
                  expires_at_us bigint, booking_id text, seq bigint)
        WHERE a.show_id = u.show_id AND a.seat_id = u.seat_id AND a.last_seq < u.seq;
    END IF;

    IF jsonb_array_length(batch -> 'shards') BETWEEN 1 AND 64 THEN
        FOR r IN SELECT * FROM jsonb_to_recordset(batch -> 'shards')
                 AS u(show_id text, pool_id text, shard integer, sold integer, seq bigint)
        LOOP
            UPDATE pool_shards SET sold = r.sold, last_seq = r.seq
            WHERE show_id = r.show_id AND pool_id = r.pool_id AND shard = r.shard AND last_seq < r.seq;
        END LOOP;
    ELSIF jsonb_array_length(batch -> 'shards') > 64 THEN
        UPDATE pool_shards s SET sold = u.sold, last_seq = u.seq
        FROM jsonb_to_recordset(batch -> 'shards')
             AS u(show_id text, pool_id text, shard integer, sold integer, seq bigint)
        WHERE s.show_id = u.show_id AND s.pool_id = u.pool_id AND s.shard = u.shard AND s.last_seq < u.seq;
    END IF;

    IF jsonb_array_length(batch -> 'holds') > 0 THEN
        INSERT INTO holds (hold_id, show_id, buyer, expires_at_us, state, pool_id)
        SELECT h.hold_id, h.show_id, h.buyer, h.expires_at_us, 'held', h.pool_id
        FROM jsonb_to_recordset(batch -> 'holds')
             AS h(hold_id text, show_id text, buyer text, expires_at_us bigint, pool_id text)
        ON CONFLICT DO NOTHING;
    END IF;

    IF jsonb_array_length(batch -> 'hold_seats') > 0 THEN
        INSERT INTO hold_seats (hold_id, seat_id)
        SELECT h.hold_id, h.seat_id
        FROM jsonb_to_recordset(batch -> 'hold_seats') AS h(hold_id text, seat_id text)
        ON CONFLICT DO NOTHING;
    END IF;

    IF jsonb_array_length(batch -> 'pool_holds') > 0 THEN
        INSERT INTO pool_holds (hold_id, show_id, pool_id, shard, quantity, expires_at_us, state)
        SELECT h.hold_id, h.show_id, h.pool_id, h.shard, h.quantity, h.expires_at_us, 'held'
        FROM jsonb_to_recordset(batch -> 'pool_holds')
             AS h(hold_id text, show_id text, pool_id text, shard integer, quantity integer, expires_at_us bigint)
        ON CONFLICT DO NOTHING;
    END IF;

    IF jsonb_array_length(batch -> 'ends') BETWEEN 1 AND 64 THEN
        FOR r IN SELECT * FROM jsonb_to_recordset(batch -> 'ends') AS u(hold_id text, state text)
        LOOP
            UPDATE holds SET state = r.state WHERE hold_id = r.hold_id AND state = 'held';
            UPDATE pool_holds SET state = r.state WHERE hold_id = r.hold_id AND state = 'held';
        END LOOP;
    ELSIF jsonb_array_length(batch -> 'ends') > 64 THEN
        UPDATE holds h SET state = u.state
        FROM jsonb_to_recordset(batch -> 'ends') AS u(hold_id text, state text)
        WHERE h.hold_id = u.hold_id AND h.state = 'held';

        UPDATE pool_holds p SET state = u.state
        FROM jsonb_to_recordset(batch -> 'ends') AS u(hold_id text, state text)
        WHERE p.hold_id = u.hold_id AND p.state = 'held';
    END IF;

    IF jsonb_array_length(batch -> 'converts') BETWEEN 1 AND 64 THEN
        FOR r IN SELECT * FROM jsonb_to_recordset(batch -> 'converts') AS u(hold_id text, booking_id text)
        LOOP
            UPDATE holds SET state = 'converted', booking_id = r.booking_id
            WHERE hold_id = r.hold_id AND state = 'held';
            UPDATE pool_holds SET state = 'converted' WHERE hold_id = r.hold_id AND state = 'held';
        END LOOP;
    ELSIF jsonb_array_length(batch -> 'converts') > 64 THEN
        UPDATE holds h SET state = 'converted', booking_id = u.booking_id
        FROM jsonb_to_recordset(batch -> 'converts') AS u(hold_id text, booking_id text)
        WHERE h.hold_id = u.hold_id AND h.state = 'held';

        UPDATE pool_holds p SET state = 'converted'
        FROM jsonb_to_recordset(batch -> 'converts') AS u(hold_id text, booking_id text)
        WHERE p.hold_id = u.hold_id AND p.state = 'held';
    END IF;

    IF jsonb_array_length(batch -> 'checkouts') > 0 THEN
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
    END IF;
END
$$;
