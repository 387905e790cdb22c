-- booking_apply(document): everything one document writes, as a
-- part of the calling transaction; booking_append(document) calls it alone in
-- a transaction of its own (a command alone, a group's documents one by one
-- after the group's error, the projector, replay). A group of commands is
-- written set-based by booking_append_group (booking_append_group.sql), with
-- the same rows and refusals. Each file is named after the function it
-- defines. Applied with CREATE OR REPLACE after the migrations at every
-- start (src/store/log/postgres.rs); this file is the functions' one
-- definition.
--
-- The document (src/store/document.rs) names each part after its table, and
-- its rows carry the column names, so each part is read with
-- jsonb_populate_record(set) of the table's own row type.
--
-- A refusal is the document's outcome, one of our own SQLSTATEs (the list
-- src/store/postgres.rs reads them with, REFUSALS; a test holds the two
-- equal):
--   BK409  a stream already has an event at a decided sequence
--   BK422  the buyer's idempotency key was taken meanwhile
--   BK412  the projector checkpoint moved meanwhile
--   BK408  the document reached the server after its commit_by_us (a
--          price change must be known to every instance before it takes
--          effect: src/command/prices.rs); checked first, on the server's
--          clock, so a late document writes nothing
-- booking_apply checks all of them before it writes anything, so that a
-- refused document leaves nothing, without a subtransaction (more than 64
-- open in one transaction overflow PostgreSQL's per-backend subxid cache and
-- slow every snapshot on the server). booking_append raises the refusal,
-- which undoes the whole call.
--
-- Positions are per show (migration 0025): each show's events take the
-- show's next positions from its head (booking_take_positions), in the
-- document's order, and hold the head until commit; a document of several
-- shows (the projector's, replay's) takes each show's in show order.
--
-- Command-sized parts (up to row_by_row_max rows: 50 seats per hold, 32
-- shards per pool; a test holds it at or above both limits) update their rows one by one through the primary key: a set-based join over
-- the document is planned from a guess of 100 rows and, against a large
-- table, as a scan of the whole table. Larger parts (the projector, replay,
-- a large sweep) stay set-based, where a join is the right plan.
CREATE OR REPLACE FUNCTION booking_apply(batch jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    row_by_row_max CONSTANT int := 64;
    at_us    bigint := (batch ->> 'recorded_at_us')::bigint;
    expected bigint := coalesce(jsonb_array_length(batch -> 'events'), 0);
    done     bigint := 0;
    heads    jsonb := '{}';
    stamps   jsonb := '{}';
    r        record;
BEGIN
    IF (batch ->> 'commit_by_us') IS NOT NULL
       AND (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
           > (batch ->> 'commit_by_us')::bigint THEN
        RETURN 'BK408';
    END IF;
    -- The decided sequences and the idempotency key, checked through their
    -- primary keys before anything is inserted, then plain inserts: ON
    -- CONFLICT DO NOTHING is a speculative insertion, which writes a second
    -- WAL record (its confirmation) for every row. The sequences are checked
    -- one by one, through the key, whatever the document's size: a set-based
    -- join is planned from a guess of 100 rows, against the whole log. What
    -- the checks cannot see is another transaction's insert of the same key,
    -- not yet committed (or the same key twice in one document): the insert
    -- below waits for it and, if it commits, fails with unique_violation,
    -- which undoes the whole call (a group too: its documents are then
    -- appended one by one, and alone the check sees the committed row;
    -- src/store/postgres.rs reads a unique_violation on the log's or the
    -- keys' primary key as the refusal it is).
    IF expected > 0 THEN
        -- Each stream's version is checked with its show, by equality: a
        -- log sharded by show routes the check to the one shard that owns
        -- the stream (IS NOT DISTINCT FROM is not pruned: Citus asked every
        -- shard). Every stream names its show (command::streams::Stream);
        -- an event without one, or a stream whose older events name another
        -- show than the document (none does: the show is part of the
        -- stream's id), passes this check and is caught by the insert's
        -- primary key, which src/store/postgres/append.rs reads as the same
        -- conflict.
        FOR r IN SELECT e.aggregate_type, e.aggregate_id, e.sequence, e.show_id
                 FROM jsonb_populate_recordset(NULL::events, batch -> 'events') AS e
        LOOP
            IF EXISTS (SELECT 1 FROM events
                       WHERE aggregate_type = r.aggregate_type AND aggregate_id = r.aggregate_id
                         AND sequence = r.sequence
                         AND show_id = r.show_id) THEN
                RETURN 'BK409';
            END IF;
        END LOOP;
    END IF;
    IF jsonb_typeof(batch -> 'idempotency_key') = 'object' THEN
        IF EXISTS (SELECT 1 FROM idempotency_keys i
                   WHERE i.buyer = batch -> 'idempotency_key' ->> 'buyer'
                     AND i.key = batch -> 'idempotency_key' ->> 'key') THEN
            RETURN 'BK422';
        END IF;
    END IF;
    IF jsonb_typeof(batch -> 'checkpoint') = 'object' THEN
        -- Read from the document by field, not joined with jsonb_to_record:
        -- Citus refuses an UPDATE of a reference table FROM a function.
        -- Before anything is written: a moved checkpoint writes nothing.
        UPDATE projector_checkpoints c
        SET position = (batch -> 'checkpoint' ->> 'to_moves')::bigint,
            shows = batch -> 'checkpoint' ->> 'shows', updated_at_us = at_us
        WHERE c.name = batch -> 'checkpoint' ->> 'name'
          AND c.position = (batch -> 'checkpoint' ->> 'from_moves')::bigint;
        IF NOT FOUND THEN
            RETURN 'BK412';
        END IF;
    END IF;

    -- Rows that change without an event (a document with none: the
    -- projector's repairs, a replay's rewrite) stamp their shows with a
    -- position taken for it (a gap in the show's events' positions), so
    -- that the availability caches read those shows whole (migration
    -- 0013). Taken here, before any row, as every writer takes its heads
    -- first (booking_append_group.sql, "Positions").
    IF expected = 0 THEN
        FOR r IN SELECT DISTINCT u.show_id
                 FROM jsonb_populate_recordset(NULL::seat_availability, batch -> 'seat_availability') AS u
                 ORDER BY u.show_id
        LOOP
            stamps := stamps || jsonb_build_object(r.show_id, booking_take_positions(r.show_id, 1));
        END LOOP;
    END IF;
    IF expected > 0 THEN
        FOR r IN SELECT e.show_id, count(*) AS n
                 FROM jsonb_populate_recordset(NULL::events, batch -> 'events') AS e
                 GROUP BY e.show_id ORDER BY e.show_id
        LOOP
            heads := heads || jsonb_build_object(r.show_id, booking_take_positions(r.show_id, r.n) - r.n);
        END LOOP;
        INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version,
                            payload, metadata, recorded_at_us, show_id, position, rows_written)
        SELECT e.aggregate_type, e.aggregate_id, e.sequence, e.event_type, e.event_version,
               e.payload, e.metadata, at_us, e.show_id,
               (heads ->> e.show_id)::bigint + row_number() OVER (PARTITION BY e.show_id ORDER BY d.n),
               coalesce((batch ->> 'rows_written')::boolean, false)
        FROM jsonb_array_elements(batch -> 'events') WITH ORDINALITY AS d(doc, n),
             jsonb_populate_record(NULL::events, d.doc) AS e;
    END IF;

    IF jsonb_typeof(batch -> 'idempotency_key') = 'object' THEN
        INSERT INTO idempotency_keys (buyer, key, request_hash, hold_id, created_at_us)
        SELECT k.buyer, k.key, k.request_hash, k.hold_id, k.created_at_us
        FROM jsonb_populate_record(NULL::idempotency_keys, batch -> 'idempotency_key') AS k;
    END IF;

    -- Seat rows: HOT updates (no indexed column changes). Readers find the
    -- seats a command changed through its events, or the stamp (above).
    done := 0;
    IF jsonb_array_length(batch -> 'seat_availability') BETWEEN 1 AND row_by_row_max THEN
        FOR r IN SELECT * FROM jsonb_populate_recordset(NULL::seat_availability, batch -> 'seat_availability')
        LOOP
            UPDATE seat_availability
            SET status = r.status, hold_id = r.hold_id, buyer = r.buyer, expires_at_us = r.expires_at_us,
                booking_id = r.booking_id, channel = r.channel, ticket_type = r.ticket_type,
                price_cents = r.price_cents, last_seq = r.last_seq
            WHERE show_id = r.show_id AND seat_id = r.seat_id AND last_seq < r.last_seq;
            IF FOUND THEN
                done := done + 1;
            END IF;
        END LOOP;
    ELSIF jsonb_array_length(batch -> 'seat_availability') > row_by_row_max THEN
        UPDATE seat_availability a
        SET status = u.status, hold_id = u.hold_id, buyer = u.buyer, expires_at_us = u.expires_at_us,
            booking_id = u.booking_id, channel = u.channel, ticket_type = u.ticket_type,
            price_cents = u.price_cents, last_seq = u.last_seq
        FROM jsonb_populate_recordset(NULL::seat_availability, batch -> 'seat_availability') AS u
        WHERE a.show_id = u.show_id AND a.seat_id = u.seat_id AND a.last_seq < u.last_seq;
        GET DIAGNOSTICS done = ROW_COUNT;
    END IF;
    IF expected = 0 AND done > 0 THEN
        UPDATE shows SET rows_rewritten_at = (stamps ->> show_id)::bigint
        WHERE stamps ? show_id;
    END IF;

    IF jsonb_array_length(batch -> 'pool_shards') BETWEEN 1 AND row_by_row_max THEN
        FOR r IN SELECT * FROM jsonb_populate_recordset(NULL::pool_shards, batch -> 'pool_shards')
        LOOP
            UPDATE pool_shards SET sold = r.sold, allocated = r.allocated, sales = r.sales, returned = r.returned,
                                   last_seq = r.last_seq
            WHERE show_id = r.show_id AND pool_id = r.pool_id AND shard = r.shard AND last_seq < r.last_seq;
        END LOOP;
    ELSIF jsonb_array_length(batch -> 'pool_shards') > row_by_row_max THEN
        UPDATE pool_shards s SET sold = u.sold, allocated = u.allocated, sales = u.sales, returned = u.returned,
                                  last_seq = u.last_seq
        FROM jsonb_populate_recordset(NULL::pool_shards, batch -> 'pool_shards') AS u
        WHERE s.show_id = u.show_id AND s.pool_id = u.pool_id AND s.shard = u.shard AND s.last_seq < u.last_seq;
    END IF;

    -- New rows, only where missing. Command-sized parts insert row by row
    -- with NOT EXISTS through the primary key rather than ON CONFLICT DO
    -- NOTHING: a speculative insertion writes a second WAL record (its
    -- confirmation) for every row; and a set-based NOT EXISTS is planned,
    -- like the joins above, as an anti-join over the whole table. Nothing
    -- inserts the same row concurrently: a command's events, inserted above,
    -- serialize every command of its hold (their streams' sequences), and
    -- the projector's batches are serialized by their checkpoint. A document
    -- names each hold once (src/store/document.rs). Larger parts (the
    -- projector, replay) stay set-based.
    --
    -- A hold's row carries a seat hold's seats (a JSON array in text); a
    -- row already there (a projector batch that ended inside the hold's
    -- placement) takes the union. A command's holds are new: the update
    -- runs only where the insert found the row.
    IF jsonb_array_length(batch -> 'holds') BETWEEN 1 AND row_by_row_max THEN
        FOR r IN SELECT * FROM jsonb_populate_recordset(NULL::holds, batch -> 'holds')
        LOOP
            INSERT INTO holds (hold_id, show_id, buyer, expires_at_us, state, booking_id, pool_id, seat_ids, items)
            SELECT r.hold_id, r.show_id, r.buyer, r.expires_at_us, r.state, r.booking_id, r.pool_id, r.seat_ids, r.items
            WHERE NOT EXISTS (SELECT 1 FROM holds WHERE hold_id = r.hold_id AND show_id = r.show_id);
            IF NOT FOUND AND (r.seat_ids <> '[]' OR r.items <> '[]') THEN
                UPDATE holds h
                SET seat_ids = booking_json_union(h.seat_ids, r.seat_ids),
                    items = booking_json_union(h.items, r.items)
                WHERE h.hold_id = r.hold_id AND h.show_id = r.show_id
                  AND NOT (h.seat_ids::jsonb @> r.seat_ids::jsonb AND h.items::jsonb @> r.items::jsonb);
            END IF;
        END LOOP;
    ELSIF jsonb_array_length(batch -> 'holds') > row_by_row_max THEN
        INSERT INTO holds (hold_id, show_id, buyer, expires_at_us, state, booking_id, pool_id, seat_ids, items)
        SELECT h.hold_id, h.show_id, h.buyer, h.expires_at_us, h.state, h.booking_id, h.pool_id, h.seat_ids, h.items
        FROM jsonb_populate_recordset(NULL::holds, batch -> 'holds') AS h
        ON CONFLICT (hold_id, show_id) DO UPDATE
        SET seat_ids = booking_json_union(holds.seat_ids, excluded.seat_ids),
            items = booking_json_union(holds.items, excluded.items)
        WHERE NOT (holds.seat_ids::jsonb @> excluded.seat_ids::jsonb
                   AND holds.items::jsonb @> excluded.items::jsonb);
    END IF;

    IF jsonb_array_length(batch -> 'pool_holds') BETWEEN 1 AND row_by_row_max THEN
        FOR r IN SELECT * FROM jsonb_populate_recordset(NULL::pool_holds, batch -> 'pool_holds')
        LOOP
            INSERT INTO pool_holds (hold_id, show_id, pool_id, shard, quantity, expires_at_us, state,
                                    channel, ticket_type, price_cents)
            SELECT r.hold_id, r.show_id, r.pool_id, r.shard, r.quantity, r.expires_at_us, r.state,
                   r.channel, r.ticket_type, r.price_cents
            WHERE NOT EXISTS (SELECT 1 FROM pool_holds
                             WHERE hold_id = r.hold_id AND shard = r.shard AND show_id = r.show_id);
        END LOOP;
    ELSIF jsonb_array_length(batch -> 'pool_holds') > row_by_row_max THEN
        INSERT INTO pool_holds (hold_id, show_id, pool_id, shard, quantity, expires_at_us, state,
                                channel, ticket_type, price_cents)
        SELECT h.hold_id, h.show_id, h.pool_id, h.shard, h.quantity, h.expires_at_us, h.state,
               h.channel, h.ticket_type, h.price_cents
        FROM jsonb_populate_recordset(NULL::pool_holds, batch -> 'pool_holds') AS h
        ON CONFLICT DO NOTHING;
    END IF;

    IF jsonb_array_length(batch -> 'hold_ends') BETWEEN 1 AND row_by_row_max THEN
        FOR r IN SELECT * FROM jsonb_to_recordset(batch -> 'hold_ends') AS u(hold_id text, show_id text, state text)
        LOOP
            UPDATE holds SET state = r.state
            WHERE hold_id = r.hold_id AND show_id = r.show_id AND state = 'held';
            UPDATE pool_holds SET state = r.state
            WHERE hold_id = r.hold_id AND show_id = r.show_id AND state = 'held';
        END LOOP;
    ELSIF jsonb_array_length(batch -> 'hold_ends') > row_by_row_max THEN
        UPDATE holds h SET state = u.state
        FROM jsonb_to_recordset(batch -> 'hold_ends') AS u(hold_id text, show_id text, state text)
        WHERE h.hold_id = u.hold_id AND h.show_id = u.show_id AND h.state = 'held';
        UPDATE pool_holds p SET state = u.state
        FROM jsonb_to_recordset(batch -> 'hold_ends') AS u(hold_id text, show_id text, state text)
        WHERE p.hold_id = u.hold_id AND p.show_id = u.show_id AND p.state = 'held';
    END IF;

    IF jsonb_array_length(batch -> 'hold_conversions') BETWEEN 1 AND row_by_row_max THEN
        FOR r IN SELECT * FROM jsonb_to_recordset(batch -> 'hold_conversions')
                 AS u(hold_id text, show_id text, booking_id text)
        LOOP
            UPDATE holds SET state = 'converted', booking_id = r.booking_id
            WHERE hold_id = r.hold_id AND show_id = r.show_id AND state = 'held';
            UPDATE pool_holds SET state = 'converted'
            WHERE hold_id = r.hold_id AND show_id = r.show_id AND state = 'held';
        END LOOP;
    ELSIF jsonb_array_length(batch -> 'hold_conversions') > row_by_row_max THEN
        UPDATE holds h SET state = 'converted', booking_id = u.booking_id
        FROM jsonb_to_recordset(batch -> 'hold_conversions') AS u(hold_id text, show_id text, booking_id text)
        WHERE h.hold_id = u.hold_id AND h.show_id = u.show_id AND h.state = 'held';
        UPDATE pool_holds p SET state = 'converted'
        FROM jsonb_to_recordset(batch -> 'hold_conversions') AS u(hold_id text, show_id text, booking_id text)
        WHERE p.hold_id = u.hold_id AND p.show_id = u.show_id AND p.state = 'held';
    END IF;

    -- Extensions: after the records are inserted, before they end (a batch
    -- of the projector may carry a hold's placement, extensions and end in
    -- that order). Only a held record moves, and only to a later expiry; a
    -- part may name a hold once per unit, so the latest expiry is taken.
    IF jsonb_array_length(batch -> 'hold_extensions') > 0 THEN
        FOR r IN SELECT u.hold_id, u.show_id, max(u.expires_at_us) AS expires_at_us
                 FROM jsonb_to_recordset(batch -> 'hold_extensions')
                      AS u(hold_id text, show_id text, expires_at_us bigint)
                 GROUP BY u.hold_id, u.show_id
        LOOP
            UPDATE holds SET expires_at_us = r.expires_at_us
            WHERE hold_id = r.hold_id AND show_id = r.show_id AND state = 'held'
              AND expires_at_us < r.expires_at_us;
            UPDATE pool_holds SET expires_at_us = r.expires_at_us
            WHERE hold_id = r.hold_id AND show_id = r.show_id AND state = 'held'
              AND expires_at_us < r.expires_at_us;
        END LOOP;
    END IF;

    IF jsonb_array_length(batch -> 'checkouts') > 0 THEN
        PERFORM booking_upsert_checkouts(batch -> 'checkouts');
    END IF;
    RETURN NULL;
END
$$;
