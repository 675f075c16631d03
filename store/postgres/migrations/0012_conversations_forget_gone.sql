-- 0012: conversations forget a last record that is gone.
--
-- Retention now clears a conversation's last message once it deleted its
-- record (purge.go: sqlForgetInConversations): a conversation must not
-- send its reader to a record that no longer exists. Conversations whose
-- record was deleted before that still name it; this clears them the same
-- way (the thread, its last seq, unread count and time stay).
UPDATE conversations c SET last_record_id = '', last_msg_id = ''
WHERE c.last_record_id <> ''
    AND NOT EXISTS (SELECT 1 FROM records r WHERE r.record_id = c.last_record_id);
