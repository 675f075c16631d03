-- 0016: tokens found by their DID.
--
-- A tunnel's dispatch now asks whether its author holds a token (a tunnel
-- may not write as a local identity), on every inbound message; without an
-- index that read the whole tokens table each time, a cost that grew with
-- the number of agents.
CREATE INDEX tokens_did ON tokens (did, created_at_ms, hash);
