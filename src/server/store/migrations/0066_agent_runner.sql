-- An agent may be pinned to one of its account's runners: new conversations go to that runner only.
-- Null: not pinned (the account's most recently connected online runner). Deleting the runner unpins.
ALTER TABLE agents ADD COLUMN runner_id uuid REFERENCES runners(id) ON DELETE SET NULL;
