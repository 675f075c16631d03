-- 0005: records found next to their message.
--
-- A record used to be found by its id, the primary key of records, and a
-- message's records by (msg_id, owner). Both keys are hashes, so every new
-- record put entries on random pages of two indexes that grow with the
-- store, and each such page was written to the WAL and again by the
-- checkpoint: on a store of 2 million records enqueue ran at 56% of its
-- empty-store rate (docs/benchmarks.md, thirteenth round).
--
-- Now messages are numbered as they arrive (msg_ref) and records are
-- indexed by (msg_ref, record_id), so a new message's records land at the
-- end of that index, next to each other. A record id carries its message
-- id's first digits (model.RecordID), which find the message and so the
-- record. The one hash-keyed index a send still touches is the messages'
-- own msg_id.
--
-- Records stored before this migration keep their ids, which carry no
-- locator: those ids are kept in record_ids. A new record enters it only
-- if its id does not locate its own message, which the core's ids
-- (model.RecordID of a message.IDOf id) always do.
--
-- Both tables are rebuilt, so this migration takes time in proportion to
-- the store (about 35 s per million records on 2 vCPUs) and, until the old
-- pages are reused, the file keeps their space.

CREATE TABLE messages_v5 (
    -- INTEGER PRIMARY KEY: a stable number (VACUUM renumbers plain rowids).
    msg_ref       INTEGER PRIMARY KEY,
    msg_id        TEXT    NOT NULL,
    -- Empty for a message some record refers to whose body was never
    -- given: GetMessage answers "not found" for it.
    body          BLOB    NOT NULL,
    created_at_ms INTEGER NOT NULL
) STRICT;
INSERT INTO messages_v5 (msg_ref, msg_id, body, created_at_ms)
    SELECT rowid, msg_id, body, created_at_ms FROM messages ORDER BY rowid;
DROP TABLE messages;
ALTER TABLE messages_v5 RENAME TO messages;
CREATE UNIQUE INDEX messages_id ON messages (msg_id);
INSERT INTO messages (msg_id, body, created_at_ms)
    SELECT r.msg_id, X'', MIN(r.created_at_ms) FROM records r
    WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.msg_id = r.msg_id)
    GROUP BY r.msg_id;

CREATE TABLE records_v5 (
    rid              INTEGER PRIMARY KEY,
    record_id        TEXT    NOT NULL,
    owner            TEXT    NOT NULL,
    box              TEXT    NOT NULL,
    msg_id           TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    seq              INTEGER NOT NULL,
    created_at_ms    INTEGER NOT NULL,
    updated_at_ms    INTEGER NOT NULL,
    sort_key         INTEGER NOT NULL,
    thread_key       TEXT    NOT NULL DEFAULT '',
    tags             TEXT,
    route            TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_retry_at_ms INTEGER NOT NULL DEFAULT 0,
    external_msg_id  TEXT    NOT NULL DEFAULT '',
    delivered_at_ms  INTEGER NOT NULL DEFAULT 0,
    error_code       TEXT    NOT NULL DEFAULT '',
    error_message    TEXT    NOT NULL DEFAULT '',
    retry_after_ms   INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT '',
    visible_at_ms    INTEGER NOT NULL DEFAULT 0,
    lease_id         TEXT,
    lease_holder     TEXT,
    lease_until_ms   INTEGER,
    msg_ref          INTEGER NOT NULL
) STRICT;
INSERT INTO records_v5 (rid, record_id, owner, box, msg_id, state, seq, created_at_ms,
        updated_at_ms, sort_key, thread_key, tags, route, attempts, next_retry_at_ms,
        external_msg_id, delivered_at_ms, error_code, error_message, retry_after_ms,
        last_error, visible_at_ms, lease_id, lease_holder, lease_until_ms, msg_ref)
    SELECT r.rowid, r.record_id, r.owner, r.box, r.msg_id, r.state, r.seq, r.created_at_ms,
        r.updated_at_ms, r.sort_key, r.thread_key, r.tags, r.route, r.attempts, r.next_retry_at_ms,
        r.external_msg_id, r.delivered_at_ms, r.error_code, r.error_message, r.retry_after_ms,
        r.last_error, r.visible_at_ms, r.lease_id, r.lease_holder, r.lease_until_ms, m.msg_ref
    FROM records r JOIN messages m ON m.msg_id = r.msg_id
    ORDER BY r.rowid;

-- Ids that do not locate their record's message (all of them, for the
-- records stored before this migration). Filled in id order: one pass
-- down the b-tree instead of a random page per row.
CREATE TABLE record_ids (
    record_id TEXT    PRIMARY KEY,
    rid       INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO record_ids (record_id, rid) SELECT record_id, rowid FROM records ORDER BY record_id;

DROP TABLE records;
ALTER TABLE records_v5 RENAME TO records;

-- As in 0001 and 0002; records_msg is now keyed by the message's number.
CREATE UNIQUE INDEX records_box_seq ON records (owner, box, seq);
CREATE INDEX records_box_state ON records (owner, box, state, seq, visible_at_ms);
CREATE INDEX records_box_sort ON records (owner, box, sort_key, record_id);
CREATE INDEX records_lease ON records (lease_until_ms) WHERE lease_until_ms IS NOT NULL;
CREATE INDEX records_retention ON records (updated_at_ms)
    WHERE state IN ('READED', 'SENT', 'DEAD', 'ARCHIVED', 'DELETED');
-- A record by id (with its message's number from the id's locator), a
-- message's records ("does any record refer to it?", retention's body
-- check, who may read it).
CREATE UNIQUE INDEX records_msg ON records (msg_ref, record_id);

-- Every way a record goes (retention, a consumer's deletion) takes its id
-- along. A seek in a table that is empty on stores created since.
CREATE TRIGGER records_forget_id AFTER DELETE ON records BEGIN
    DELETE FROM record_ids WHERE record_id = OLD.record_id;
END;
