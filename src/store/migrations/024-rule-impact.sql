-- The console enables a rule only after showing the impact of its content on recorded decisions:
-- the content hash whose impact was last computed (the same hash as validated_hash compares).
ALTER TABLE rules ADD COLUMN impact_hash TEXT;
