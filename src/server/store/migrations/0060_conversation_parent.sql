-- A conversation created with a sandbox token is the child of the token's conversation: the tree a
-- sandbox may act on (prompt, interrupt, terminate, delete) is its own conversation and its descendants.
ALTER TABLE conversations ADD COLUMN parent_conversation_id uuid REFERENCES conversations(id) ON DELETE SET NULL;
CREATE INDEX conversations_parent_idx ON conversations (parent_conversation_id) WHERE parent_conversation_id IS NOT NULL;
