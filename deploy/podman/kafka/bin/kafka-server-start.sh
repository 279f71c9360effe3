#!/bin/bash
# The broker, given its server.properties (the distribution's kafka-server-start.sh).
export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx512m -Xms512m}"
exec "$(dirname "$0")/kafka-run-class.sh" kafka.Kafka "$@"
