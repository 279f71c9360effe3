"""The stack's own PostgreSQL cluster: its programs and folder, starting and stopping it,
recovering from a crash of it, and the database, roles and migrations the services need."""
