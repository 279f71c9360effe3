"""Saga messaging plumbing shared by the services.

Only infrastructure lives here (envelope, outbox, relay, inbox, consumer loop, retries, dead
letters, settings, logging, metrics). No order, stock or payment concept belongs in this package.
"""
