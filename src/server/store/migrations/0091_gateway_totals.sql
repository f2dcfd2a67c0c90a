-- Running totals of what the gateway's calls used, per conversation, agent-day, agent-month,
-- account-day and account-month: added to in the transaction that writes each call's usage, so a
-- budgeted call's admission reads five rows by key instead of summing the month's calls.
CREATE TABLE model_usage_totals (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  scope text NOT NULL CHECK (scope IN ('conversation', 'agent_day', 'agent_month', 'account_day', 'account_month')),
  subject uuid NOT NULL,
  period date NOT NULL,
  tokens bigint NOT NULL DEFAULT 0,
  micros bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, scope, subject, period)
);

-- The calls stored so far, counted as the gateway counts them (every token read or written, the cost
-- where known), in the UTC day and month each call began.
WITH used AS (
  SELECT account_id, agent_id, conversation_id,
         (created_at AT TIME ZONE 'UTC')::date AS day,
         date_trunc('month', created_at AT TIME ZONE 'UTC')::date AS month,
         input_tokens + output_tokens + cache_read_tokens + cache_write_tokens AS tokens,
         coalesce(cost_micros, 0) AS micros
    FROM model_calls
)
INSERT INTO model_usage_totals (account_id, scope, subject, period, tokens, micros)
SELECT account_id, scope, subject, period, sum(tokens), sum(micros) FROM (
  SELECT account_id, 'account_day' AS scope, account_id AS subject, day AS period, tokens, micros FROM used
  UNION ALL SELECT account_id, 'account_month', account_id, month, tokens, micros FROM used
  UNION ALL SELECT account_id, 'agent_day', agent_id, day, tokens, micros FROM used WHERE agent_id IS NOT NULL
  UNION ALL SELECT account_id, 'agent_month', agent_id, month, tokens, micros FROM used WHERE agent_id IS NOT NULL
  UNION ALL SELECT account_id, 'conversation', conversation_id, DATE '1970-01-01', tokens, micros FROM used WHERE conversation_id IS NOT NULL
) AS k
GROUP BY account_id, scope, subject, period
HAVING sum(tokens) > 0 OR sum(micros) > 0;
