-- Scale-out: which node holds each live runner socket, and the mailbox for NOTIFY bodies too big
-- for a payload (8000 bytes). Both are unused by the embedded PGlite default.
CREATE TABLE runner_registrations (
  runner_id text PRIMARY KEY,
  node_id text NOT NULL,
  conn_token text NOT NULL,
  account_id text NOT NULL,
  name text NOT NULL,
  connected_at timestamptz NOT NULL,
  capabilities jsonb,
  heartbeat_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX runner_registrations_node_idx ON runner_registrations (node_id);

CREATE TABLE cluster_messages (
  id bigserial PRIMARY KEY,
  body text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
