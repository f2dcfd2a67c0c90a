-- Agent environments: what a sandbox is provisioned with.
-- Secrets are write-only and sealed with the server key (AES-256-GCM, bound to environment and key).
CREATE TABLE environments (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name text NOT NULL,
  description text NOT NULL DEFAULT '',
  packages jsonb NOT NULL DEFAULT '{"apt": [], "npm": []}'::jsonb,
  env_vars jsonb NOT NULL DEFAULT '{}'::jsonb,
  setup_script text NOT NULL DEFAULT '',
  networking_type text NOT NULL DEFAULT 'unrestricted',
  allowed_hosts jsonb NOT NULL DEFAULT '[]'::jsonb,
  repositories jsonb NOT NULL DEFAULT '[]'::jsonb,
  checkpoint_id text,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX environments_account_name_idx ON environments (account_id, name);

CREATE TABLE environment_secrets (
  environment_id uuid NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
  key text NOT NULL,
  sealed text NOT NULL,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (environment_id, key)
);

-- An agent's environment, skills, MCP servers and the environments a conversation may pick instead.
ALTER TABLE agents ADD COLUMN environment_id uuid REFERENCES environments(id) ON DELETE SET NULL;
ALTER TABLE agents ADD COLUMN skills jsonb NOT NULL DEFAULT '[]'::jsonb;
ALTER TABLE agents ADD COLUMN mcp_servers jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE agents ADD COLUMN allowed_environment_ids jsonb;

-- A conversation's override of its agent's environment, and the secrets attached at its launch (sealed).
ALTER TABLE conversations ADD COLUMN environment_id uuid REFERENCES environments(id) ON DELETE SET NULL;
ALTER TABLE conversations ADD COLUMN launch_secrets text;

-- What each provisioning step of the sandbox last ran with (step -> hash), so a wake redoes only what changed.
ALTER TABLE sandboxes ADD COLUMN provisioned jsonb NOT NULL DEFAULT '{}'::jsonb;
