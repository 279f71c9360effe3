from compose_stack.cli import main

main()
