-- The account's credential-brokerage switch (issue 6): with it on, launches are refused on backends
-- that cannot enforce an egress policy, unless BROKER_ALLOW_UNENFORCED is set.
ALTER TABLE accounts ADD COLUMN credential_brokerage boolean NOT NULL DEFAULT false;
