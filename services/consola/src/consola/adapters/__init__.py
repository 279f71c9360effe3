"""The console's ways out: the services' HTTP APIs."""
