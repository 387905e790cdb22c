-- The keys tickets' codes are signed with (src/tickets/keys.rs): Ed25519,
-- made at the first start (or given with BOOKING_TICKET_SIGNING_KEY) and
-- kept, so every instance signs with the same key and every code signed
-- since stays verifiable. The newest key signs; older ones still verify
-- (rotation by key_id). `secret` is the base64url of the 32-byte seed.
CREATE TABLE ticket_keys
(
    key_id        text   PRIMARY KEY,
    secret        text   NOT NULL,
    created_at_us bigint NOT NULL
);

-- A show's ticket events in log order: the door's book (attendance,
-- revocations, conflicts) tails them (src/query/door.rs).
CREATE INDEX events_tickets ON events (show_id, position)
    WHERE aggregate_type = 'Ticket';

-- The ticket streams that ever named a buyer as holder (issued to them or
-- transferred to them): `GET /v1/me/tickets` folds those, across shows.
CREATE INDEX events_ticket_holders ON events
    ((coalesce(payload -> 'TicketIssued' ->> 'holder', payload -> 'TicketTransferred' ->> 'to')))
    WHERE aggregate_type = 'Ticket' AND event_type IN ('TicketIssued', 'TicketTransferred');
