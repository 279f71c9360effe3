#!/bin/bash
# Dynamic configuration and SCRAM users (the distribution's kafka-configs.sh).
exec "$(dirname "$0")/kafka-run-class.sh" kafka.admin.ConfigCommand "$@"
