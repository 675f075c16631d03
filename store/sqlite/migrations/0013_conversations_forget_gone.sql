-- 0013: conversations forget a last record that is gone.
--
-- Retention now clears a conversation's last message in the transaction
-- that deletes its record (purge.go: forgetInConversations): a
-- conversation must not send its reader to a record that no longer
-- exists. Conversations whose record was deleted before that still name
-- it; this clears them the same way (the thread, its last seq, unread
-- count and time stay). One lookup per conversation, along messages_id
-- and records_msg.
UPDATE conversations SET last_record_id = '', last_msg_id = ''
WHERE last_record_id <> ''
    AND NOT EXISTS (SELECT 1 FROM messages m JOIN records r ON r.msg_ref = m.msg_ref
        WHERE m.msg_id = conversations.last_msg_id AND r.record_id = conversations.last_record_id);
