-- What an AuthZEN caller may do beyond asking (a grant on the AuthZEN API only): the agents
-- whose enforcement point it is (its evaluations about them consume and create approvals),
-- and the subject and resource types its searches may name. JSON; null: none given.
ALTER TABLE application_grants ADD COLUMN authzen TEXT;
