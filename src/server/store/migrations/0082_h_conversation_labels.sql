-- Conversation labels: key -> value ('' for a bare key), at most 32, set by the user or the agent.
-- The GIN index serves the list's label filter (`labels @> '{"k":"v"}'` and `labels ? 'k'`).
ALTER TABLE conversations ADD COLUMN labels jsonb NOT NULL DEFAULT '{}'::jsonb;
CREATE INDEX conversations_labels_idx ON conversations USING gin (labels);
