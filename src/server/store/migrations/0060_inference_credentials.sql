-- Model credentials per account: write-only, sealed with the server's
-- secret key (AES-256-GCM, bound to account and provider); base_url points a runtime at a gateway.
CREATE TABLE inference_credentials (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  provider text NOT NULL,
  sealed text NOT NULL,
  base_url text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, provider)
);

-- The model the agent process was told to use, recorded on each turn.
ALTER TABLE turns ADD COLUMN model text;
