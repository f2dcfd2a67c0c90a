-- The team: a conversation bound to the reserved channel `fountain:team` is a teammate; schedules
-- prompt teammates on a cron, and schedule_runs holds each firing until it is delivered or given up.
ALTER TABLE conversations ADD COLUMN channel_id text CHECK (char_length(channel_id) <= 255);
CREATE INDEX conversations_channel_idx ON conversations (account_id, channel_id, agent_id) WHERE channel_id IS NOT NULL;

CREATE TABLE schedules (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  agent_id uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  name text CHECK (char_length(name) <= 120),
  cron text NOT NULL,
  prompt text NOT NULL CHECK (char_length(prompt) BETWEEN 1 AND 20000),
  one_off boolean NOT NULL DEFAULT false,
  enabled boolean NOT NULL DEFAULT true,
  next_run_at timestamptz,
  last_run_at timestamptz,
  last_conversation_id uuid,
  last_error text CHECK (char_length(last_error) <= 250),
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX schedules_agent_idx ON schedules (account_id, agent_id, inserted_at);
CREATE INDEX schedules_due_idx ON schedules (next_run_at) WHERE enabled;

-- One row per (schedule, due time): the unique index is what makes a firing happen once even when
-- several nodes race; run_after is both the snooze and the lease of the node working on it.
CREATE TABLE schedule_runs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  schedule_id uuid NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
  fired_at timestamptz NOT NULL,
  run_after timestamptz NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'given_up')),
  conversation_id uuid,
  error text,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX schedule_runs_firing_idx ON schedule_runs (schedule_id, fired_at);
CREATE INDEX schedule_runs_due_idx ON schedule_runs (run_after) WHERE status = 'pending';
