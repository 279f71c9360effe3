"""``python -m local_stack``: the command behind make run/up/down/status/logs/restart/credentials
(``local_stack.cli``)."""

from local_stack.cli import main

if __name__ == "__main__":
    main()
