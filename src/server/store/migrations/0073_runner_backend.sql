-- What each runner reported when it last connected: its backend (process, namespace, microvm; null when
-- the daemon did not say) and its capabilities (the contract's names; a daemon that sends none has the
-- upstream set, suspend and attach). Shown on the Runners page, in GET /api/runners and `fountain runners`.
ALTER TABLE runners ADD COLUMN backend text;
ALTER TABLE runners ADD COLUMN capabilities text[];
