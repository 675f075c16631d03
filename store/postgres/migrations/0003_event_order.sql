-- 0003: event ids a reader can page without skipping one.
--
-- Event ids come from a sequence and are handed out inside the writing
-- transactions, which commit in any order: a reader could see id 105
-- committed while 104 belongs to a transaction still running, move its
-- cursor past 104 and never see it. ListEvents (events.go) therefore only
-- returns ids it has proved final: it reads the sequence's last value L,
-- then lists the transactions holding a write lock on events, and waits
-- for those to end. That covers every transaction holding an id <= L only
-- if each had its transaction id before it took an event id, and an
-- identity column does not promise that (its nextval runs before the
-- INSERT assigns the transaction id). So the identity becomes a plain
-- sequence default that assigns the transaction id first: CASE evaluates
-- its condition before its result. No lock is added; writers still never
-- wait for each other.
--
-- The sequence must keep CACHE 1 (a session-cached value would be handed
-- out long after it left the sequence), only this default may take values
-- from it, and nothing may insert an explicit event_id.
DO $$
DECLARE
    last_id bigint;
    called  boolean;
BEGIN
    -- Carry the counter over: ids are never reused, even ones whose events
    -- retention has deleted.
    EXECUTE format('SELECT last_value, is_called FROM %s',
        pg_get_serial_sequence('events', 'event_id')) INTO last_id, called;
    ALTER TABLE events ALTER COLUMN event_id DROP IDENTITY;
    CREATE SEQUENCE events_event_id_seq AS bigint CACHE 1 OWNED BY events.event_id;
    PERFORM setval('events_event_id_seq', last_id, called);
END
$$;

-- nextval('...') in a default is stored as the sequence's OID, so it does
-- not depend on the search_path of whoever inserts.
ALTER TABLE events ALTER COLUMN event_id SET DEFAULT
    CASE WHEN pg_current_xact_id() IS NOT NULL THEN nextval('events_event_id_seq') END;
