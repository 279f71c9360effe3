#!/bin/bash
# Topics (the distribution's kafka-topics.sh).
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.TopicCommand "$@"
