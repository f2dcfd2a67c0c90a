-- Signed webhooks: an account's endpoints, one delivery per (endpoint, event) with every attempt
-- recorded, and the scan position over the event log that turns stored events into deliveries.
CREATE TABLE webhook_endpoints (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  url text NOT NULL,
  secret_sealed text NOT NULL,
  kinds text[] NOT NULL,
  enabled boolean NOT NULL DEFAULT true,
  disabled_reason text,
  disabled_at timestamptz,
  failing_since timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_account_idx ON webhook_endpoints (account_id);

CREATE TABLE webhook_deliveries (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
  account_id uuid NOT NULL,
  event_id text NOT NULL,
  event_kind text NOT NULL,
  payload jsonb NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  lease_until timestamptz,
  redelivery_of uuid,
  created_at timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz
);
-- Once per event and endpoint, whichever node saw the event first; a redelivery asked for is a row of its own.
CREATE UNIQUE INDEX webhook_deliveries_once_idx ON webhook_deliveries (endpoint_id, event_id) WHERE redelivery_of IS NULL;
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC);

CREATE TABLE webhook_attempts (
  id bigserial PRIMARY KEY,
  delivery_id uuid NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
  attempted_at timestamptz NOT NULL DEFAULT now(),
  status_code integer,
  error text,
  latency_ms integer NOT NULL,
  response_excerpt text
);
CREATE INDEX webhook_attempts_delivery_idx ON webhook_attempts (delivery_id, id);

CREATE TABLE webhook_scan (
  id integer PRIMARY KEY CHECK (id = 1),
  event_cursor bigint NOT NULL,
  conversations_since timestamptz NOT NULL
);
INSERT INTO webhook_scan (id, event_cursor, conversations_since) SELECT 1, COALESCE(max(id), 0), now() FROM events;
