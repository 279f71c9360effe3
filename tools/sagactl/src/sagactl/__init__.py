"""sagactl: what an operator needs when a saga is stuck or a message was dead-lettered."""
