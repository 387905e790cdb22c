-- Positions per show (#49): readers of every show follow each show's head.
-- SQLite has one writer, so its positions (the rowid's copy) grow in commit
-- order over the whole log, and so within each show; each show's head is
-- kept here by a trigger, so that a reader finds the shows that moved
-- without a scan of the log.
CREATE TABLE log_heads
(
    show_id  text    PRIMARY KEY,
    position integer NOT NULL
) STRICT;
INSERT INTO log_heads (show_id, position)
SELECT show_id, max(position) FROM events WHERE show_id IS NOT NULL GROUP BY show_id;
CREATE TRIGGER events_move_head AFTER INSERT ON events WHEN NEW.show_id IS NOT NULL
BEGIN
    INSERT INTO log_heads (show_id, position) VALUES (NEW.show_id, coalesce(NEW.position, NEW.rowid))
    ON CONFLICT (show_id) DO UPDATE SET position = max(position, excluded.position);
END;

-- Readers of every show keep a position per show (a JSON object of show to
-- the last position read); `position` stays their compare-and-set, counting
-- their moves. An endpoint is owed what follows each show's head when it
-- was made. Both from the one position they held until now.
ALTER TABLE projector_checkpoints ADD COLUMN shows text NOT NULL DEFAULT '{}';
UPDATE projector_checkpoints
SET shows = coalesce((SELECT json_group_object(show_id, last)
                      FROM (SELECT show_id, max(position) AS last FROM events
                            WHERE show_id IS NOT NULL AND position <= projector_checkpoints.position
                            GROUP BY show_id)), '{}');
ALTER TABLE webhook_endpoints ADD COLUMN after_shows text NOT NULL DEFAULT '{}';
UPDATE webhook_endpoints
SET after_shows = coalesce((SELECT json_group_object(show_id, last)
                            FROM (SELECT show_id, max(position) AS last FROM events
                                  WHERE show_id IS NOT NULL AND position <= webhook_endpoints.after_position
                                  GROUP BY show_id)), '{}');
