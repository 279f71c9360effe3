"""What an operator does in the console, through ports to the services' APIs."""
