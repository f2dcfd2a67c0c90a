-- Accounts, API keys (hashes only), self-hosted runners and the audit log.
CREATE TABLE accounts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  email text UNIQUE,
  name text NOT NULL,
  role text NOT NULL DEFAULT 'user' CHECK (role IN ('owner', 'user')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  name text NOT NULL,
  prefix text NOT NULL,
  key_hash text NOT NULL UNIQUE,
  scopes text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  expires_at timestamptz,
  revoked_at timestamptz
);
CREATE INDEX api_keys_account_idx ON api_keys (account_id);

CREATE TABLE runners (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
  hostname text CHECK (char_length(hostname) <= 255),
  os text CHECK (char_length(os) <= 40),
  arch text CHECK (char_length(arch) <= 40),
  version text CHECK (char_length(version) <= 80),
  root text CHECK (char_length(root) <= 1024),
  connected_at timestamptz,
  last_seen_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX runners_account_name_idx ON runners (account_id, name);

CREATE TABLE audit_log (
  id bigserial PRIMARY KEY,
  account_id uuid REFERENCES accounts (id) ON DELETE CASCADE,
  actor text NOT NULL,
  action text NOT NULL,
  subject_id text,
  data jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_account_idx ON audit_log (account_id, id);
