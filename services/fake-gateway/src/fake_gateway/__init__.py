"""A Stripe-like stand-in for an external payment gateway, for local runs and tests."""
