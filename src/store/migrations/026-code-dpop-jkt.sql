-- An authorization code bound to a DPoP key (RFC 9449 section 10): the JWK thumbprint the
-- authorization request named (`dpop_jkt`, or the key of a DPoP proof sent with a pushed
-- request); the code is redeemed only with a proof by that key.
ALTER TABLE oauth_codes ADD COLUMN dpop_jkt TEXT;
