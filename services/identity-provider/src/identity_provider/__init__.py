"""A development stand-in for an OIDC issuer, like the fake gateway is for a payment gateway."""
