"""The same Check-Then-Pay saga on DBOS Transact: the peer `make bench` measures this stack against."""
