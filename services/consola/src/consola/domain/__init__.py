"""What the console shows, free of HTTP and HTML: a saga's timeline in lanes."""
