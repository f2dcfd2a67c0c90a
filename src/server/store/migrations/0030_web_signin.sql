-- One-time sign-in links for the web UI (printed by `fountain up`): only a hash is stored, and a
-- link is spent by the first request that presents it.
CREATE TABLE web_signin_tokens (
  token_hash text PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX web_signin_tokens_account_idx ON web_signin_tokens (account_id);
