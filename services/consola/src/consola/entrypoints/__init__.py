"""The console's HTTP face: server-rendered pages (Jinja2), the sign-in, the session."""
