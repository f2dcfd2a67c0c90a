-- The line ordinal (acp, stdout) or chunk ordinal (stderr) of an output event within its agent
-- process's output since byte zero: a reattach replays the journal and skips what is already stored.
ALTER TABLE events ADD COLUMN seq integer;
