-- booking_json_union(a, b): two JSON arrays (as text, how a hold's row keeps
-- its seats and items) as one, each element once, in order: what a hold's
-- row becomes when a document names the hold again with more of its seats
-- or items (booking_apply.sql, booking_append_group.sql). Applied with
-- CREATE OR REPLACE at every start, before the functions that use it.
CREATE OR REPLACE FUNCTION booking_json_union(a text, b text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce((SELECT jsonb_agg(e ORDER BY e)::text
                     FROM (SELECT jsonb_array_elements(a::jsonb)
                           UNION SELECT jsonb_array_elements(b::jsonb)) AS u(e)), '[]')
$$;
