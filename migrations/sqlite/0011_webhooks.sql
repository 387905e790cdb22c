-- Webhooks: endpoints an admin registered, and one row per delivery of an
-- event to an endpoint (see the PostgreSQL migration of the same name).

CREATE TABLE webhook_endpoints
(
    endpoint_id    text    PRIMARY KEY,
    url            text    NOT NULL,
    events         text    NOT NULL,
    secret         text    NOT NULL,
    after_position integer NOT NULL,
    created_at_us  integer NOT NULL
) STRICT;

CREATE TABLE webhook_deliveries
(
    delivery_id        text    PRIMARY KEY,
    endpoint_id        text    NOT NULL,
    webhook_id         text    NOT NULL UNIQUE,
    event_type         text    NOT NULL,
    subject            text    NOT NULL,
    position           integer NOT NULL,
    body               text    NOT NULL,
    status             text    NOT NULL,
    attempts           integer NOT NULL DEFAULT 0,
    round_attempts     integer NOT NULL DEFAULT 0,
    retry_from_us      integer NOT NULL,
    next_attempt_at_us integer NOT NULL,
    claim_token        text,
    claimed_until_us   integer NOT NULL DEFAULT 0,
    last_status        integer,
    last_error         text,
    created_at_us      integer NOT NULL,
    updated_at_us      integer NOT NULL,
    UNIQUE (endpoint_id, subject)
) STRICT;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (endpoint_id, next_attempt_at_us)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_status ON webhook_deliveries (endpoint_id, status, position);
-- The age of the oldest pending delivery, read every sender pass.
CREATE INDEX webhook_deliveries_waiting ON webhook_deliveries (retry_from_us)
    WHERE status = 'pending';

INSERT INTO projector_checkpoints (name, position, updated_at_us)
SELECT 'webhooks', coalesce(max(position), 0), 0 FROM events;
