#!/bin/bash
# The Kafka distribution's kafka-run-class.sh cut down to what this image runs: a main class of
# the jars in /opt/kafka/libs (Maven Central's, deploy/podman/kafka/pom.xml) with log4j2's
# configuration. KAFKA_HEAP_OPTS and KAFKA_OPTS as in the distribution.
set -eu
exec java ${KAFKA_HEAP_OPTS:--Xmx256m} -XX:+UseG1GC -Djava.awt.headless=true \
  -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties ${KAFKA_OPTS:-} \
  -cp '/opt/kafka/libs/*' "$@"
