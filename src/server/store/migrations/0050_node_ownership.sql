-- Turn ownership across server nodes: each node stamps a heartbeat row; an open turn and a pending
-- provisioning record the node that drives them. The open work of a node whose heartbeat expired is
-- adopted by another node, one compare-and-set on node_id per row, so exactly one node adopts it.
CREATE TABLE server_nodes (
  node_id text PRIMARY KEY,
  started_at timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE turns ADD COLUMN node_id text;
ALTER TABLE conversations ADD COLUMN node_id text;
-- Every node looks for lost work on every beat: these keep that to the few open rows.
CREATE INDEX turns_open_node_idx ON turns (node_id) WHERE status IN ('pending', 'running');
CREATE INDEX conversations_open_idx ON conversations (status) WHERE status IN ('pending', 'running');
