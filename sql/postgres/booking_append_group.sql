-- booking_append_group(show, documents, after): the commands that arrived
-- together, all of one show, in one transaction: one call, one commit and one WAL flush for the group
-- (src/store/log/postgres.rs, PgAppender), written set-based: the group's
-- lookups first, in one statement, then one statement per table for the
-- whole group (SQLite's group writer does the same, src/store/log/sqlite.rs).
-- Returns each document's outcome, in order: NULL (appended) or the
-- refusal's SQLSTATE (BK409, BK422: booking_apply.sql lists them). A
-- refused document writes nothing; the rest are written. An error (not a
-- refusal) aborts the whole group; the caller then appends its documents
-- one by one, so that the error is its own document's alone.
--
-- Each document is refused as if the group's documents were appended one
-- after another, in order: at an event (stream and sequence) or a key the
-- log holds (the lookups, before anything is written), or that an earlier
-- document of the group takes and is written. The caller says which
-- documents take what earlier ones take: `after` holds (n, m, code)
-- triples, flat, in increasing n (1-based): document n is refused with
-- code (409 or 422) if document m is written. Settled in order, each m is
-- decided before any n after it. What else the caller guarantees:
--   * no two documents write the same hold's row (the queue holds the
--     second back for a later group);
--   * every document has events and no checkpoint (those go alone, through
--     booking_append: a checkpoint's move and an event-less document's
--     show stamp are booking_apply's);
-- A document breaking the second rule, or of another show than `show`, is
-- an error (the group is retried one by one).
--
-- The show comes first and every statement on a table of shows names it
-- as a constant: a database sharded by show (Citus) delegates the call to
-- the worker that owns `show`'s shards (create_distributed_function, by
-- its first argument), and routes each statement to that one shard, where
-- a join over the group's rows without it would be refused as a join
-- across shards.
--
-- Positions: the show's next ones (booking_take_positions), in document
-- order, taken at the first write, just before the events: the show's head
-- is locked from there to the commit, and every other writer of the show
-- waits for it. First, because every writer (booking_apply too, and
-- replay's write phase, which locks log_heads before the other tables:
-- src/store/postgres/tables.rs) then takes the head before any other
-- table's row or lock, and none waits at the head holding what the head's
-- holder waits for. (Taken last, after the rows, it would be held for less
-- time, but a group holding seat rows would wait at the head of a replay
-- that waits for those rows.)
--
-- Every part is command-sized (PgJob, src/store/log/postgres.rs): each
-- statement joins a few rows of the group with a table through the table's
-- key. A set from JSON is planned from a guess of 100 rows, which against a
-- table of some thousands of rows plans a hash join over the whole table;
-- the function turns hash and merge joins off for its own statements (the
-- SET clauses: restored when it returns), so every join is a nested loop
-- over the group's rows through the key's index.
CREATE OR REPLACE FUNCTION booking_append_group(show text, batches jsonb, after int[]) RETURNS text[]
LANGUAGE plpgsql
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    base        bigint;
    written     bigint;
    outcomes    text[];
    misfits     boolean;
    has_keys    boolean;
    has_seats   boolean;
    has_shards  boolean;
    has_holds   boolean;
    has_pool    boolean;
    has_ends    boolean;
    has_convs   boolean;
    has_exts    boolean;
    has_outs    boolean;
    n           int;
    m           int;
BEGIN
    -- The lookups: each document's events, then its key, through their
    -- primary keys, and which parts the group has at all (a part no document has
    -- costs no statement). What the lookups cannot see is another
    -- transaction's insert of the same event or key, not yet committed: the
    -- insert below waits for it and, if it commits, fails with
    -- unique_violation, which undoes the group (booking_apply.sql).
    SELECT array_agg(CASE
               WHEN EXISTS (SELECT 1 FROM jsonb_populate_recordset(NULL::events, m.doc -> 'events') AS e
                            WHERE EXISTS (SELECT 1 FROM events v
                                          WHERE v.aggregate_type = e.aggregate_type
                                            AND v.aggregate_id = e.aggregate_id
                                            AND v.sequence = e.sequence
                                            AND v.show_id = show))
                   THEN 'BK409'
           END ORDER BY m.n),
           bool_or(jsonb_typeof(m.doc -> 'checkpoint') = 'object'
                   OR coalesce(jsonb_array_length(m.doc -> 'events'), 0) = 0
                   OR m.doc ->> 'show_id' IS DISTINCT FROM show
                   OR EXISTS (SELECT 1 FROM jsonb_array_elements(m.doc -> 'events') AS d(ev)
                              WHERE d.ev ->> 'show_id' IS DISTINCT FROM show)),
           bool_or(jsonb_typeof(m.doc -> 'idempotency_key') = 'object'),
           bool_or(jsonb_array_length(m.doc -> 'seat_availability') > 0),
           bool_or(jsonb_array_length(m.doc -> 'pool_shards') > 0),
           bool_or(jsonb_array_length(m.doc -> 'holds') > 0),
           bool_or(jsonb_array_length(m.doc -> 'pool_holds') > 0),
           bool_or(jsonb_array_length(m.doc -> 'hold_ends') > 0),
           bool_or(jsonb_array_length(m.doc -> 'hold_conversions') > 0),
           bool_or(jsonb_array_length(m.doc -> 'hold_extensions') > 0),
           bool_or(jsonb_array_length(m.doc -> 'checkouts') > 0)
    INTO outcomes, misfits, has_keys, has_seats, has_shards, has_holds, has_pool,
         has_ends, has_convs, has_exts, has_outs
    FROM jsonb_array_elements(batches) WITH ORDINALITY AS m(doc, n);
    IF misfits THEN
        RAISE EXCEPTION 'booking_append_group: a document with a checkpoint, without events, or of another show'
            USING HINT = 'append it alone with booking_append';
    END IF;
    -- The keys, one lookup each, apart from the events': the keys are not
    -- the show's (a database sharded by show keeps them by buyer), and one
    -- statement over both would join tables sharded apart.
    IF has_keys THEN
        FOR i IN 1 .. jsonb_array_length(batches) LOOP
            IF outcomes[i] IS NULL
               AND jsonb_typeof(batches -> (i - 1) -> 'idempotency_key') = 'object'
               AND EXISTS (SELECT 1 FROM idempotency_keys k
                           WHERE k.buyer = batches -> (i - 1) -> 'idempotency_key' ->> 'buyer'
                             AND k.key = batches -> (i - 1) -> 'idempotency_key' ->> 'key') THEN
                outcomes[i] := 'BK422';
            END IF;
        END LOOP;
    END IF;
    -- What documents take from earlier ones: a conflict at a sequence
    -- comes before a taken key, as booking_apply checks them.
    FOR i IN 1 .. coalesce(cardinality(after), 0) / 3 LOOP
        n := after[3 * i - 2];
        m := after[3 * i - 1];
        IF outcomes[m] IS NULL THEN
            IF after[3 * i] = 409 AND outcomes[n] IS DISTINCT FROM 'BK409' THEN
                outcomes[n] := 'BK409';
            ELSIF after[3 * i] = 422 AND outcomes[n] IS NULL THEN
                outcomes[n] := 'BK422';
            END IF;
        END IF;
    END LOOP;
    -- Nothing to write (every document refused, or none).
    IF array_position(outcomes, NULL) IS NULL THEN
        RETURN coalesce(outcomes, '{}');
    END IF;

    -- The show's positions, then the events (see "Positions" above).
    SELECT sum(jsonb_array_length(m.doc -> 'events')) INTO written
    FROM jsonb_array_elements(batches) WITH ORDINALITY AS m(doc, n)
    WHERE outcomes[m.n] IS NULL;
    base := booking_take_positions(show, written) - written;
    INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version,
                        payload, metadata, recorded_at_us, show_id, position, rows_written)
    SELECT e.aggregate_type, e.aggregate_id, e.sequence, e.event_type, e.event_version,
           e.payload, e.metadata, (m.doc ->> 'recorded_at_us')::bigint, e.show_id,
           base + row_number() OVER (ORDER BY m.n, d.k),
           coalesce((m.doc ->> 'rows_written')::boolean, false)
    FROM jsonb_array_elements(batches) WITH ORDINALITY AS m(doc, n),
         jsonb_array_elements(m.doc -> 'events') WITH ORDINALITY AS d(ev, k),
         jsonb_populate_record(NULL::events, d.ev) AS e
    WHERE outcomes[m.n] IS NULL;

    IF has_keys THEN
        -- A document without a key has a JSON null there, which
        -- jsonb_populate_record refuses as a scalar: nullif makes it SQL's.
        INSERT INTO idempotency_keys (buyer, key, request_hash, hold_id, created_at_us)
        SELECT k.buyer, k.key, k.request_hash, k.hold_id, k.created_at_us
        FROM jsonb_array_elements(batches) WITH ORDINALITY AS m(doc, n),
             jsonb_populate_record(NULL::idempotency_keys, nullif(m.doc -> 'idempotency_key', 'null')) AS k
        WHERE outcomes[m.n] IS NULL AND k.key IS NOT NULL;
    END IF;

    -- Seat and shard rows: the latest of each row the group names, guarded
    -- by the row's sequence (HOT updates: booking_apply.sql).
    IF has_seats THEN
        UPDATE seat_availability a
        SET status = u.status, hold_id = u.hold_id, buyer = u.buyer, expires_at_us = u.expires_at_us,
            booking_id = u.booking_id, channel = u.channel, ticket_type = u.ticket_type,
            price_cents = u.price_cents, last_seq = u.last_seq
        FROM (SELECT DISTINCT ON (s.show_id, s.seat_id) s.*
              FROM jsonb_array_elements(batches) WITH ORDINALITY AS m(doc, n),
                   jsonb_populate_recordset(NULL::seat_availability, m.doc -> 'seat_availability') AS s
              WHERE outcomes[m.n] IS NULL
              ORDER BY s.show_id, s.seat_id, s.last_seq DESC) AS u
        WHERE a.show_id = show AND a.show_id = u.show_id AND a.seat_id = u.seat_id
          AND a.last_seq < u.last_seq;
    END IF;
    IF has_shards THEN
        UPDATE pool_shards p
        SET sold = u.sold, allocated = u.allocated, sales = u.sales, returned = u.returned, last_seq = u.last_seq
        FROM (SELECT DISTINCT ON (s.show_id, s.pool_id, s.shard) s.*
              FROM jsonb_array_elements(batches) WITH ORDINALITY AS m(doc, n),
                   jsonb_populate_recordset(NULL::pool_shards, m.doc -> 'pool_shards') AS s
              WHERE outcomes[m.n] IS NULL
              ORDER BY s.show_id, s.pool_id, s.shard, s.last_seq DESC) AS u
        WHERE p.show_id = show AND p.show_id = u.show_id AND p.pool_id = u.pool_id AND p.shard = u.shard
          AND p.last_seq < u.last_seq;
    END IF;

    -- Hold records, inserted where missing (NOT EXISTS through the key, not
    -- ON CONFLICT: booking_apply.sql says why). A row already there takes
    -- the union of the seats and items, as in booking_apply; the update
    -- sees only rows that were there before the statement (a statement
    -- does not see its own CTE's inserts).
    IF has_holds THEN
        WITH r AS (SELECT h.*
                   FROM jsonb_array_elements(batches) WITH ORDINALITY AS m(doc, n),
                        jsonb_populate_recordset(NULL::holds, m.doc -> 'holds') AS h
                   WHERE outcomes[m.n] IS NULL),
        placed AS (
            INSERT INTO holds (hold_id, show_id, buyer, expires_at_us, state, booking_id, pool_id, seat_ids, items)
            SELECT r.hold_id, r.show_id, r.buyer, r.expires_at_us, r.state, r.booking_id, r.pool_id,
                   r.seat_ids, r.items
            FROM r WHERE NOT EXISTS (SELECT 1 FROM holds x WHERE x.hold_id = r.hold_id AND x.show_id = show))
        UPDATE holds h
        SET seat_ids = booking_json_union(h.seat_ids, r.seat_ids),
            items = booking_json_union(h.items, r.items)
        FROM r
        WHERE h.hold_id = r.hold_id AND h.show_id = show AND (r.seat_ids <> '[]' OR r.items <> '[]')
          AND NOT (h.seat_ids::jsonb @> r.seat_ids::jsonb AND h.items::jsonb @> r.items::jsonb);
    END IF;
    IF has_pool THEN
        INSERT INTO pool_holds (hold_id, show_id, pool_id, shard, quantity, expires_at_us, state,
                                channel, ticket_type, price_cents)
        SELECT h.hold_id, h.show_id, h.pool_id, h.shard, h.quantity, h.expires_at_us, h.state,
               h.channel, h.ticket_type, h.price_cents
        FROM jsonb_array_elements(batches) WITH ORDINALITY AS m(doc, n),
             jsonb_populate_recordset(NULL::pool_holds, m.doc -> 'pool_holds') AS h
        WHERE outcomes[m.n] IS NULL
          AND NOT EXISTS (SELECT 1 FROM pool_holds x
                          WHERE x.hold_id = h.hold_id AND x.shard = h.shard AND x.show_id = show);
    END IF;

    -- A hold ends or converts once, from held: the first document of the
    -- group to say so is the one that did; its record and its pool parts
    -- in one statement.
    IF has_ends THEN
        WITH u AS (SELECT DISTINCT ON (x.hold_id, x.show_id) x.hold_id, x.show_id, x.state
                   FROM jsonb_array_elements(batches) WITH ORDINALITY AS m(doc, n),
                        jsonb_to_recordset(m.doc -> 'hold_ends') AS x(hold_id text, show_id text, state text)
                   WHERE outcomes[m.n] IS NULL
                   ORDER BY x.hold_id, x.show_id, m.n),
        parts AS (UPDATE pool_holds p SET state = u.state FROM u
                  WHERE p.hold_id = u.hold_id AND p.show_id = show AND p.state = 'held')
        UPDATE holds h SET state = u.state FROM u
        WHERE h.hold_id = u.hold_id AND h.show_id = show AND h.state = 'held';
    END IF;
    IF has_convs THEN
        WITH u AS (SELECT DISTINCT ON (x.hold_id, x.show_id) x.hold_id, x.show_id, x.booking_id
                   FROM jsonb_array_elements(batches) WITH ORDINALITY AS m(doc, n),
                        jsonb_to_recordset(m.doc -> 'hold_conversions')
                        AS x(hold_id text, show_id text, booking_id text)
                   WHERE outcomes[m.n] IS NULL
                   ORDER BY x.hold_id, x.show_id, m.n),
        parts AS (UPDATE pool_holds p SET state = 'converted' FROM u
                  WHERE p.hold_id = u.hold_id AND p.show_id = show AND p.state = 'held')
        UPDATE holds h SET state = 'converted', booking_id = u.booking_id FROM u
        WHERE h.hold_id = u.hold_id AND h.show_id = show AND h.state = 'held';
    END IF;
    -- Extensions: only a held record moves, only to a later expiry, the
    -- latest the group names.
    IF has_exts THEN
        WITH u AS (SELECT x.hold_id, x.show_id, max(x.expires_at_us) AS expires_at_us
                   FROM jsonb_array_elements(batches) WITH ORDINALITY AS m(doc, n),
                        jsonb_to_recordset(m.doc -> 'hold_extensions')
                        AS x(hold_id text, show_id text, expires_at_us bigint)
                   WHERE outcomes[m.n] IS NULL
                   GROUP BY x.hold_id, x.show_id),
        parts AS (UPDATE pool_holds p SET expires_at_us = u.expires_at_us FROM u
                  WHERE p.hold_id = u.hold_id AND p.show_id = show AND p.state = 'held'
                    AND p.expires_at_us < u.expires_at_us)
        UPDATE holds h SET expires_at_us = u.expires_at_us FROM u
        WHERE h.hold_id = u.hold_id AND h.show_id = show AND h.state = 'held'
          AND h.expires_at_us < u.expires_at_us;
    END IF;

    IF has_outs THEN
        PERFORM booking_upsert_checkouts(
            (SELECT jsonb_agg(c)
             FROM jsonb_array_elements(batches) WITH ORDINALITY AS m(doc, n),
                  jsonb_array_elements(m.doc -> 'checkouts') AS c
             WHERE outcomes[m.n] IS NULL));
    END IF;

    RETURN outcomes;
END
$$;
