-- Any ACP agent, session settings and credential sets.
-- The `custom` runtime: an agent whose launch command, install, env and credentials are its own row's.
ALTER TABLE agents DROP CONSTRAINT IF EXISTS agents_runtime_check;
ALTER TABLE agents ADD CONSTRAINT agents_runtime_check
  CHECK (runtime IN ('claude', 'codex', 'gemini', 'opencode', 'demo', 'custom'));
ALTER TABLE agents ADD COLUMN custom_runtime jsonb;
-- Session settings: ACP config option values and a mode, per agent (defaults) and per conversation.
ALTER TABLE agents ADD COLUMN session_settings jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE conversations ADD COLUMN session_settings jsonb NOT NULL DEFAULT '{}'::jsonb;
-- What the agent's runtime listed at its last session/new or session/load (options and modes).
ALTER TABLE conversations ADD COLUMN session_offered jsonb;
-- Credential sets: several named credentials per provider; every stored one becomes the `default` set.
ALTER TABLE inference_credentials ADD COLUMN name text NOT NULL DEFAULT 'default';
ALTER TABLE inference_credentials DROP CONSTRAINT inference_credentials_pkey;
ALTER TABLE inference_credentials ADD PRIMARY KEY (account_id, provider, name);
ALTER TABLE agents ADD COLUMN credential_set text NOT NULL DEFAULT 'default';
