-- The conversations page lists an account's conversations by last activity, newest first, paged by
-- (last_active_at, id): this index serves every page of that list, filtered or not, without a sort.
CREATE INDEX conversations_account_activity_idx ON conversations (account_id, last_active_at DESC, id DESC);
