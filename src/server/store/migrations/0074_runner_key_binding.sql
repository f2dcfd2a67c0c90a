-- A runner key from registration is tied to the runner it was issued for: the enrollment that minted it
-- records the key, and the runner socket lets that key connect under the enrollment's runner name only.
ALTER TABLE runner_enrollments ADD COLUMN api_key_id uuid REFERENCES api_keys(id) ON DELETE SET NULL;
CREATE INDEX runner_enrollments_api_key_idx ON runner_enrollments (api_key_id);
-- Keys minted before this migration: registration named each one "runner <name>" in the same account.
UPDATE runner_enrollments e SET api_key_id = k.id
  FROM api_keys k
  WHERE e.api_key_id IS NULL AND e.runner_name IS NOT NULL AND k.account_id = e.account_id
    AND k.name = 'runner ' || e.runner_name AND k.scopes = ARRAY['runner']::text[];
