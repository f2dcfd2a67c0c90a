-- The capacity queue: per-account limits on concurrent sandboxes and running turns, and the prompts and
-- new conversations waiting for them, FIFO per account. Every node takes from this one queue.
ALTER TABLE turns DROP CONSTRAINT IF EXISTS turns_status_check;
ALTER TABLE turns ADD CONSTRAINT turns_status_check
  CHECK (status IN ('queued', 'pending', 'running', 'completed', 'failed', 'interrupted'));

-- An account's own limits (null: the server's default). The row is also the lock admission takes, so
-- two nodes never admit past an account's limit at once.
CREATE TABLE account_limits (
  account_id uuid PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
  max_running_turns integer CHECK (max_running_turns BETWEEN 1 AND 10000),
  max_sandboxes integer CHECK (max_sandboxes BETWEEN 1 AND 10000),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- What waits: a prompt (its turn row is `queued`) or a new conversation (its sandbox not created yet,
-- its first turn, if any, `queued`). Position is the order of (enqueued_at, id) within the account.
CREATE TABLE capacity_queue (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL,
  conversation_id uuid NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  turn_id uuid REFERENCES turns(id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('prompt', 'conversation')),
  enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX capacity_queue_account_idx ON capacity_queue (account_id, enqueued_at, id);
CREATE UNIQUE INDEX capacity_queue_conversation_idx ON capacity_queue (conversation_id);
