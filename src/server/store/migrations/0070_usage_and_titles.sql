-- What agents report about their work: the conversation's running usage total
-- (each turn's own usage sits in turns.usage), and whether its title came from the agent
-- (`session_info_update`), which may then retitle it, or from the user, which it never overrides.
ALTER TABLE conversations ADD COLUMN usage_total jsonb NOT NULL DEFAULT '{"input": 0, "output": 0}'::jsonb;
ALTER TABLE conversations ADD COLUMN title_from_agent boolean NOT NULL DEFAULT false;
