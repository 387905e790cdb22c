-- The keys tickets' codes are signed with (src/tickets/keys.rs): Ed25519,
-- made at the first start (or given with BOOKING_TICKET_SIGNING_KEY) and
-- kept, so every instance signs with the same key and every code signed
-- since stays verifiable. The newest key signs; older ones still verify
-- (rotation by key_id). `secret` is the base64url of the 32-byte seed.
CREATE TABLE ticket_keys
(
    key_id        text    PRIMARY KEY,
    secret        text    NOT NULL,
    created_at_us integer NOT NULL
) STRICT;
