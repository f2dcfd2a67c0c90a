-- Model calls held to a budget are written when they start, as a reservation (status 0, in flight)
-- sized from the request, and completed with their usage when they end: admission under one
-- advisory lock per account then sees every call in flight on every node.
ALTER TABLE model_calls ADD COLUMN reserved_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE model_calls ADD COLUMN reserved_micros bigint NOT NULL DEFAULT 0;
CREATE INDEX model_calls_in_flight_idx ON model_calls (account_id, created_at) WHERE status = 0;
