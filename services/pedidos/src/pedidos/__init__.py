"""pedidos: takes orders and coordinates the saga's state (a light state coordinator).

It keeps the order's state, deadlines and history, decides cancellations, and never calls another
service to make a step happen: every step is an event through its outbox.
"""
