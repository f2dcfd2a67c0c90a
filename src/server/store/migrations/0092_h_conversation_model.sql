-- The model a conversation was started on (`provider/id`), checked against its runtime at creation; it is
-- used at every launch of the conversation. Null: its agent's model, as it is at each launch.
ALTER TABLE conversations ADD COLUMN model text;
