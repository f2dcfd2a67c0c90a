-- "Add runner": a short-lived, single-use registration token shown in the web UI, which a new runner
-- exchanges for a runner-scoped API key (it can dial the runner socket and nothing else).
CREATE TABLE runner_enrollments (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  -- SHA-256 of the token, lowercase hex: the plaintext is never stored.
  token_hash text NOT NULL UNIQUE,
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  runner_name text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX runner_enrollments_account_idx ON runner_enrollments (account_id);
