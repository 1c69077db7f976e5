-- Shared Signals (SSF 1.0): receiver streams, the subjects a receiver added to a stream,
-- and the outbox of Security Event Tokens waiting for push delivery (RFC 8935).

CREATE TABLE ssf_streams (
  stream_id                TEXT PRIMARY KEY,
  -- JSON: a string or an array of strings (the SET `aud`)
  aud                      TEXT NOT NULL,
  delivery_method          TEXT NOT NULL,
  endpoint_url             TEXT NOT NULL,
  -- sealed with the secret box: the worker reads it back to send as `Authorization`
  authorization_header_enc TEXT,
  events_requested         TEXT NOT NULL DEFAULT '[]',
  description              TEXT,
  -- how the person is named in `sub_id`: 'iss_sub' or 'email'
  subject_format           TEXT NOT NULL DEFAULT 'iss_sub' CHECK (subject_format IN ('iss_sub', 'email')),
  status                   TEXT NOT NULL DEFAULT 'enabled' CHECK (status IN ('enabled', 'paused', 'disabled')),
  status_reason            TEXT,
  created_at               INTEGER NOT NULL,
  updated_at               INTEGER NOT NULL
);
-- One stream per receiver endpoint: a second one is a 409.
CREATE UNIQUE INDEX ssf_streams_endpoint ON ssf_streams (endpoint_url);

CREATE TABLE ssf_stream_subjects (
  stream_id   TEXT NOT NULL REFERENCES ssf_streams (stream_id) ON DELETE CASCADE,
  -- canonical JSON of the subject identifier (sorted keys): the identity of the row
  subject_key TEXT NOT NULL,
  subject     TEXT NOT NULL,
  verified    INTEGER NOT NULL DEFAULT 1,
  created_at  INTEGER NOT NULL,
  PRIMARY KEY (stream_id, subject_key)
);

-- One row per SET and stream, written in the transaction of the change that caused it.
-- `claims` is the whole claim set, fixed at emit time (jti, iat, txn), signed at delivery.
CREATE TABLE ssf_outbox (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  stream_id       TEXT NOT NULL REFERENCES ssf_streams (stream_id) ON DELETE CASCADE,
  jti             TEXT NOT NULL UNIQUE,
  event_type      TEXT NOT NULL,
  claims          TEXT NOT NULL,
  state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed', 'dropped')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  -- milliseconds since the epoch (backoff in tests is milliseconds)
  next_attempt_at INTEGER NOT NULL,
  last_error      TEXT,
  created_at      INTEGER NOT NULL,
  delivered_at    INTEGER
);
CREATE INDEX ssf_outbox_due ON ssf_outbox (state, next_attempt_at);
CREATE INDEX ssf_outbox_stream ON ssf_outbox (stream_id, state, id);
