-- MCP gateway: the upstream MCP servers the gateway fronts, and how their tools map to
-- actions. `headers_sealed` holds the extra request headers (often credentials) as JSON
-- sealed with the secret box; `tools` is the JSON object of per-tool mappings.
CREATE TABLE mcp_upstreams (
  name           TEXT PRIMARY KEY,
  url            TEXT NOT NULL,
  headers_sealed TEXT,
  timeout_ms     INTEGER NOT NULL DEFAULT 10000,
  tools          TEXT NOT NULL DEFAULT '{}',
  created_at     INTEGER NOT NULL,
  updated_at     INTEGER NOT NULL
);
