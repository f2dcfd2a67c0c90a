-- The repository branch a conversation was started on ({url, branch}): the sandbox clones that branch of
-- that environment repository instead of its configured ref; null for the environment's own ref.
ALTER TABLE conversations ADD COLUMN repository_branch jsonb;
