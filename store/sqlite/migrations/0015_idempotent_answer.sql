-- 0015: a key bound by a send made now keeps that send's answer.
--
-- A repeat planned the message again and wrote what the new plan held: a
-- recipient whose routes had changed since got it a second time, through
-- the new route, and the repeat's answer named records the first send had
-- not made. Now a repeat writes nothing and answers what the first send
-- answered. Keys bound before this migration keep NULL: their repeats
-- write nothing either, and are answered from the new plan.
ALTER TABLE idempotency ADD COLUMN answer BLOB;
