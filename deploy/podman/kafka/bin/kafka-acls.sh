#!/bin/bash
# ACLs (the distribution's kafka-acls.sh).
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.AclCommand "$@"
