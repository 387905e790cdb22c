-- Webhooks: endpoints an admin registered, and one row per delivery of an
-- event to an endpoint. The dispatcher records deliveries in the same
-- transaction that moves its checkpoint ('webhooks' in projector_checkpoints),
-- before any is sent, so a crash re-sends rather than never sends.

CREATE TABLE webhook_endpoints
(
    endpoint_id    text   PRIMARY KEY,
    url            text   NOT NULL,
    -- The event types asked for, a JSON array of strings.
    events         text   NOT NULL,
    -- The signing secret as given to the admin ("whsec_..."): signing needs
    -- the key itself, so it cannot be stored as a hash.
    secret         text   NOT NULL,
    -- The log head at registration: only later events are delivered.
    after_position bigint NOT NULL,
    created_at_us  bigint NOT NULL
);

CREATE TABLE webhook_deliveries
(
    delivery_id        text    PRIMARY KEY,
    endpoint_id        text    NOT NULL,
    -- The Standard Webhooks message id: the same on every attempt.
    webhook_id         text    NOT NULL UNIQUE,
    event_type         text    NOT NULL,
    -- What the delivery is about ("booking.confirmed:<booking id>"): one
    -- delivery per subject and endpoint, whichever event of a batch came first.
    subject            text    NOT NULL,
    position           bigint  NOT NULL,
    -- The body, fixed at recording: every attempt sends the same bytes.
    body               text    NOT NULL,
    -- pending | delivered | failed
    status             text    NOT NULL,
    -- Attempts in all, and since the retry window began (a manual retry
    -- begins a new one at retry_from_us).
    attempts           integer NOT NULL DEFAULT 0,
    round_attempts     integer NOT NULL DEFAULT 0,
    retry_from_us      bigint  NOT NULL,
    next_attempt_at_us bigint  NOT NULL,
    -- A claim: the instance attempting it, and until when (a lease).
    claim_token        text,
    claimed_until_us   bigint  NOT NULL DEFAULT 0,
    last_status        integer,
    last_error         text,
    created_at_us      bigint  NOT NULL,
    updated_at_us      bigint  NOT NULL,
    UNIQUE (endpoint_id, subject)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (endpoint_id, next_attempt_at_us)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_status ON webhook_deliveries (endpoint_id, status, position);
-- The age of the oldest pending delivery, read every sender pass.
CREATE INDEX webhook_deliveries_waiting ON webhook_deliveries (retry_from_us)
    WHERE status = 'pending';

INSERT INTO projector_checkpoints (name, position, updated_at_us)
SELECT 'webhooks', coalesce(max(position), 0), 0 FROM events;
