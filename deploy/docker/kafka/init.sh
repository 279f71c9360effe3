#!/bin/bash
# docker-compose.yml's kafka-init: makes the topics and the ACLs, as the admin principal (a
# super user), every time the stack comes up (both steps leave what exists as it is).
set -eu

BOOTSTRAP=kafka:9092
CLIENT=/tmp/admin-client.properties
TOPICS="order-events inventory-events payment-events pedidos-dlq inventario-dlq pagos-dlq"
PARTITIONS=6

for variable in KAFKA_ADMIN_PASSWORD KAFKA_OPERATOR_PASSWORD; do
  if [ -z "${!variable:-}" ]; then
    echo "[kafka-init] $variable is not set (docker-compose.yml takes it from .env)" >&2
    exit 1
  fi
done
case "$KAFKA_OPERATOR_PASSWORD" in
  *[!A-Za-z0-9_-]*)
    echo "[kafka-init] KAFKA_OPERATOR_PASSWORD has characters other than letters, digits, - and _" >&2
    exit 1 ;;
esac
umask 077
cat > "$CLIENT" <<PROPERTIES
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$KAFKA_ADMIN_PASSWORD";
PROPERTIES

# A command that fails is tried again a few times: the container network's name service can miss
# a lookup while containers join it (podman's aardvark-dns reloads), and the broker may still be
# settling its metadata right after its healthcheck passed. Both steps are idempotent.
retry() {
  local attempt
  for attempt in 1 2 3 4 5; do
    "$@" && return 0
    echo "[kafka-init] attempt $attempt of 5 failed: $*" >&2
    sleep 3
  done
  return 1
}

for topic in $TOPICS; do
  retry /opt/kafka/bin/kafka-topics.sh --bootstrap-server "$BOOTSTRAP" --command-config "$CLIENT" \
    --create --if-not-exists --topic "$topic" --partitions "$PARTITIONS" --replication-factor 1
done

# The operator principal (sagactl's replays): its SCRAM credentials set on every start, so that
# a data volume formatted before it existed gets it too (start.sh formats with the others').
retry /opt/kafka/bin/kafka-configs.sh --bootstrap-server "$BOOTSTRAP" --command-config "$CLIENT" \
  --alter --entity-type users --entity-name operator \
  --add-config "SCRAM-SHA-512=[iterations=8192,password=$KAFKA_OPERATOR_PASSWORD]" </dev/null

# What each principal may do: local_stack.kafka_auth.acls(), one a line as its Acl.line() writes
# it (deploy/tests/test_compose_trust.py holds the list to it). Adding is idempotent; an ACL
# dropped from this list stays on the broker until removed by hand (kafka-acls.sh --remove).
# The tool reads no input: it is given none, so that it cannot eat the list's next lines.
while read -r principal resource_type pattern_type name operation; do
  case "$resource_type" in
    TOPIC) resource=--topic ;;
    GROUP) resource=--group ;;
    *) echo "[kafka-init] unknown resource type $resource_type" >&2; exit 1 ;;
  esac
  retry /opt/kafka/bin/kafka-acls.sh --bootstrap-server "$BOOTSTRAP" --command-config "$CLIENT" \
    --add --allow-principal "$principal" --operation "$operation" \
    "$resource" "$name" --resource-pattern-type "$pattern_type" </dev/null
done <<'ACLS'
User:pedidos TOPIC LITERAL order-events WRITE
User:pedidos TOPIC LITERAL pedidos-dlq WRITE
User:pedidos TOPIC LITERAL inventory-events READ
User:pedidos TOPIC LITERAL payment-events READ
User:pedidos GROUP LITERAL pedidos READ
User:inventario TOPIC LITERAL inventory-events WRITE
User:inventario TOPIC LITERAL inventario-dlq WRITE
User:inventario TOPIC LITERAL order-events READ
User:inventario TOPIC LITERAL payment-events READ
User:inventario GROUP LITERAL inventario READ
User:pagos TOPIC LITERAL payment-events WRITE
User:pagos TOPIC LITERAL pagos-dlq WRITE
User:pagos TOPIC LITERAL inventory-events READ
User:pagos TOPIC LITERAL order-events READ
User:pagos GROUP LITERAL pagos READ
User:operator TOPIC LITERAL inventory-events READ
User:operator TOPIC LITERAL inventory-events WRITE
User:operator TOPIC LITERAL order-events READ
User:operator TOPIC LITERAL order-events WRITE
User:operator TOPIC LITERAL payment-events READ
User:operator TOPIC LITERAL payment-events WRITE
ACLS
