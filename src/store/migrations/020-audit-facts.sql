-- A decision's record keeps the facts it was decided on (subject, person, object attributes,
-- the usage read, the clock in milliseconds), so that `policy replay` can decide it again.
ALTER TABLE audit_log ADD COLUMN facts TEXT;
