-- What an AuthZEN caller may do beyond asking (a grant on the AuthZEN API only): the agents
-- whose enforcement point it is (its evaluations about them consume and create approvals),
-- and the subject and resource types its searches may name. JSON; null: none given.
ALTER TABLE application_grants ADD COLUMN authzen TEXT;

-- Who an external IdP (`idp` connection) may sign in: people whose email is in one of these
-- domains (JSON array; null: any), and administrators (holders of the console role) only when
-- admitted.
ALTER TABLE saml_connections ADD COLUMN allowed_email_domains TEXT;
ALTER TABLE saml_connections ADD COLUMN admit_administrators INTEGER NOT NULL DEFAULT 0;
