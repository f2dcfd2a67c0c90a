-- The per-conversation sandbox token: a `sprite`-scoped key bound to the
-- conversation it was minted for, so a relaunch revokes exactly that conversation's previous token and
-- the team MCP accepts only the token of the conversation it serves. Deleting the conversation deletes it.
ALTER TABLE api_keys ADD COLUMN conversation_id uuid REFERENCES conversations(id) ON DELETE CASCADE;
CREATE INDEX api_keys_conversation_idx ON api_keys (conversation_id) WHERE conversation_id IS NOT NULL;
