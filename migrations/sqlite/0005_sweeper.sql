-- The sweeper looks for holds past their expiry that no event has closed yet.
CREATE INDEX holds_open_by_expiry ON holds (expires_at_us) WHERE state = 'held';
