#!/bin/bash
# Formats a KRaft node's storage (the distribution's kafka-storage.sh).
exec "$(dirname "$0")/kafka-run-class.sh" kafka.tools.StorageTool "$@"
