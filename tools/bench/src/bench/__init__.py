"""`make bench`: how fast a saga completes and how many the stack sustains, with the machine's
own limits (a raw PostgreSQL step, a raw Kafka hop) measured in the same run."""
