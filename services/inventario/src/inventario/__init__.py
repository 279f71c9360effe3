"""inventario: validates stock without locks, allocates it under a row lock, releases it on
cancellation."""
