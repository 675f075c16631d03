-- 0008: bodies that were too young to go when their last record went.
--
-- Retention deletes a body when it deletes the last record that refers to
-- it, but not within an hour of the body's last store (a plan being
-- applied may be about to refer to it again). Such a body was never
-- looked at again: with a period shorter than that hour (TUNNEL_OUTBOX=10m,
-- say), or an acknowledged consumer record purged at the next pass, it
-- stayed for ever. Its id now waits here, and a later pass deletes it once
-- the hour is up, if nothing refers to it by then (purge.go).
CREATE TABLE orphan_bodies (
    msg_id TEXT PRIMARY KEY
) STRICT, WITHOUT ROWID;
