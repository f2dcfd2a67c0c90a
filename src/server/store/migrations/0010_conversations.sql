-- The conversation engine: agents, sandboxes, conversations, turns and their event log.
CREATE TABLE agents (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
  description text NOT NULL DEFAULT '',
  system text NOT NULL DEFAULT '',
  runtime text NOT NULL CHECK (runtime IN ('claude', 'codex', 'gemini', 'opencode', 'demo')),
  model text NOT NULL,
  sandbox_provider text,
  permission_policy jsonb NOT NULL DEFAULT '{}'::jsonb,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX agents_account_name_idx ON agents (account_id, name);

CREATE TABLE sandboxes (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  provider text NOT NULL,
  name text NOT NULL,
  status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'starting', 'ready', 'suspended', 'terminated', 'failed')),
  agent_session_id text,
  last_resumed_at timestamptz,
  terminated_at timestamptz,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX sandboxes_provider_name_idx ON sandboxes (provider, name);

CREATE TABLE conversations (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  agent_id uuid REFERENCES agents (id) ON DELETE SET NULL,
  sandbox_id uuid REFERENCES sandboxes (id) ON DELETE SET NULL,
  title text CHECK (char_length(title) <= 120),
  first_prompt text,
  status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'running', 'idle', 'failed', 'terminated')),
  runtime text NOT NULL,
  permission_policy jsonb NOT NULL DEFAULT '{}'::jsonb,
  runtime_session_id text,
  source text NOT NULL DEFAULT 'api' CHECK (source IN ('ui', 'api', 'agent')),
  failure_reason text,
  turn_count integer NOT NULL DEFAULT 0,
  acp_next_id integer,
  last_active_at timestamptz NOT NULL DEFAULT now(),
  last_read_at timestamptz,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversations_account_idx ON conversations (account_id, inserted_at);

CREATE TABLE turns (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
  turn_number integer NOT NULL,
  prompt text NOT NULL,
  status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'running', 'completed', 'failed', 'interrupted')),
  stop_reason text,
  reason text,
  exit_code integer,
  acp_prompt_id integer,
  pending_permission jsonb,
  usage jsonb,
  started_at timestamptz,
  ended_at timestamptz,
  inserted_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX turns_conversation_number_idx ON turns (conversation_id, turn_number);

CREATE TABLE events (
  id bigserial PRIMARY KEY,
  conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
  turn_id uuid,
  kind text NOT NULL CHECK (kind IN ('output', 'stage')),
  stream text NOT NULL DEFAULT '' CHECK (stream IN ('stdout', 'stderr', 'acp', '')),
  data text NOT NULL DEFAULT '',
  stage text,
  state text CHECK (state IN ('started', 'done', 'failed', 'interrupted')),
  duration_ms integer,
  ts timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_conversation_idx ON events (conversation_id, id);
