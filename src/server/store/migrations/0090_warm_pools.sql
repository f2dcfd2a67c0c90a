-- Warm pools (issue 32): an agent keeps `warm_pool` sandboxes provisioned with its agent process
-- initialized; the next new conversation of the agent takes one. A pool member is a conversation row
-- of the agent's account (so it counts toward the account's limits and parks like any other), hidden
-- from listings while `pool_agent_id` is set; `pool_key` names the agent's launch configuration it was
-- made with, so a changed agent's stale members are told apart and drained.
ALTER TABLE agents ADD COLUMN warm_pool integer NOT NULL DEFAULT 0 CHECK (warm_pool BETWEEN 0 AND 10);
ALTER TABLE conversations ADD COLUMN pool_agent_id uuid;
ALTER TABLE conversations ADD COLUMN pool_key text;
CREATE INDEX conversations_pool_idx ON conversations (pool_agent_id) WHERE pool_agent_id IS NOT NULL;
