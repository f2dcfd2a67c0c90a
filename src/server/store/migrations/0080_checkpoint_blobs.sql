-- The blob store for checkpoints when the database keeps them (clusters without a shared disk): each
-- blob is sealed (AES-256-GCM with the server's key) and split into chunks, so no single row is large.
CREATE TABLE blobs (
  digest text PRIMARY KEY CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
  size bigint NOT NULL CHECK (size >= 0),
  chunks integer NOT NULL CHECK (chunks >= 0),
  stored_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE blob_chunks (
  digest text NOT NULL REFERENCES blobs(digest) ON DELETE CASCADE,
  seq integer NOT NULL CHECK (seq >= 0),
  data bytea NOT NULL,
  PRIMARY KEY (digest, seq)
);
-- A conversation's checkpoints: what a blob holds (the agent's session files, the workspace) and the turn
-- it was taken after. Removed with the conversation; the blobs no checkpoint names are collected.
CREATE TABLE checkpoints (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL,
  conversation_id uuid NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  turn_id uuid,
  digest text NOT NULL CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
  size bigint NOT NULL CHECK (size >= 0),
  holds jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX checkpoints_conversation_idx ON checkpoints (conversation_id, created_at DESC);
CREATE INDEX checkpoints_digest_idx ON checkpoints (digest);
