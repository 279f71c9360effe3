#!/bin/bash
# What a broker answers to (the distribution's kafka-broker-api-versions.sh); the healthcheck.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.BrokerApiVersionsCommand "$@"
