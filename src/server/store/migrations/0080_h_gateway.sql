-- The model gateway: how each agent's runtime gets its model credential (through the gateway, the
-- default, or `direct` in its process env), the agent's and the account's model limits, and one row
-- per model call the gateway forwarded or refused (the metering and the audit; never a body).
ALTER TABLE agents ADD COLUMN credential_delivery text NOT NULL DEFAULT 'gateway';
ALTER TABLE agents ADD COLUMN model_limits jsonb NOT NULL DEFAULT '{}'::jsonb;

CREATE TABLE account_model_limits (
  account_id uuid PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
  limits jsonb NOT NULL DEFAULT '{}'::jsonb,
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE model_calls (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  agent_id uuid,
  conversation_id uuid,
  turn_id uuid,
  node_id text,
  api text NOT NULL,
  endpoint text NOT NULL,
  model text,
  status integer NOT NULL,
  refused text,
  input_tokens bigint NOT NULL DEFAULT 0,
  output_tokens bigint NOT NULL DEFAULT 0,
  cache_read_tokens bigint NOT NULL DEFAULT 0,
  cache_write_tokens bigint NOT NULL DEFAULT 0,
  cost_micros bigint,
  latency_ms integer NOT NULL,
  first_byte_ms integer,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX model_calls_account_time_idx ON model_calls (account_id, created_at);
CREATE INDEX model_calls_conversation_idx ON model_calls (conversation_id, created_at);
CREATE INDEX model_calls_agent_time_idx ON model_calls (agent_id, created_at);
