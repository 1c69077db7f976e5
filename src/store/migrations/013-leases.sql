-- Leases on background work: one process (of any instance) at a time runs a periodic job or
-- delivers one stream's events. A lease is held until `expires_at` (Unix milliseconds) unless
-- its holder renews or releases it; a holder that dies loses it when it expires.
CREATE TABLE leases (
  name       TEXT PRIMARY KEY,
  owner      TEXT NOT NULL,
  expires_at INTEGER NOT NULL
);
