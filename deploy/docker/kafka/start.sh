#!/bin/bash
# docker-compose.yml's Kafka: formats the storage with the SCRAM users the first time, then
# starts the broker. The image's own entrypoint (/etc/kafka/docker/run) is not used: it formats
# with `kafka-storage format --cluster-id ... -c ...` and nothing else, and SCRAM users can only
# be written into a KRaft cluster's metadata at format time (--add-scram, KIP-900) or through a
# broker that already authenticates someone.
#
# The passwords come from the environment (docker-compose.yml takes them from .env). They are
# checked to be URL-safe characters only, which a JAAS line and --add-scram take unquoted.
set -eu

CONF=/etc/saga-kafka/server.properties
RUNTIME=/opt/kafka/config/saga
DATA=/var/lib/kafka/data
# Written when the storage is formatted with the users: a data volume formatted by an older
# docker-compose.yml (no authentication) has none, and its broker would refuse every client.
MARKER="$DATA/scram-users"
PRINCIPALS="admin pedidos inventario pagos"

password_of() {
  local variable value
  variable="KAFKA_$(echo "$1" | tr '[:lower:]' '[:upper:]')_PASSWORD"
  value="${!variable:-}"
  if [ -z "$value" ]; then
    echo "[kafka] $variable is not set (docker-compose.yml takes it from .env)" >&2
    exit 1
  fi
  case "$value" in
    *[!A-Za-z0-9_-]*)
      echo "[kafka] $variable has characters other than letters, digits, - and _" >&2
      exit 1 ;;
  esac
  printf '%s' "$value"
}

admin=$(password_of admin)
controller=$(password_of controller)
for principal in $PRINCIPALS; do password_of "$principal" >/dev/null; done

umask 077
mkdir -p "$RUNTIME"
scram="org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"$admin\";"
plain="org.apache.kafka.common.security.plain.PlainLoginModule required username=\"controller\" password=\"$controller\" user_controller=\"$controller\";"
# The host's port of the HOST listener (docker-compose.yml's KAFKA_HOST_PORT) is what a client
# on the host is told to come back to.
host_port="${KAFKA_HOST_PORT:-9092}"
case "$host_port" in
  ''|*[!0-9]*) echo "[kafka] KAFKA_HOST_PORT is not a port number: $host_port" >&2; exit 1 ;;
esac
{
  sed "s#^advertised.listeners=\(.*\)HOST://127.0.0.1:9092#advertised.listeners=\1HOST://127.0.0.1:$host_port#" "$CONF"
  echo
  # Every SASL listener needs a JAAS entry, even one that only checks SCRAM credentials; the
  # client listener's also names the broker's own principal.
  echo "listener.name.client.scram-sha-512.sasl.jaas.config=$scram"
  echo "listener.name.host.scram-sha-512.sasl.jaas.config=$scram"
  echo "listener.name.controller.plain.sasl.jaas.config=$plain"
} > "$RUNTIME/server.properties"

# What the healthcheck and an operator in this container authenticate with.
cat > "$RUNTIME/admin-client.properties" <<PROPERTIES
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=$scram
PROPERTIES

if [ -e "$DATA/meta.properties" ]; then
  if [ ! -e "$MARKER" ]; then
    echo "[kafka] $DATA was formatted without SASL users (by a docker-compose.yml older than" \
         "Kafka authentication) and the broker needs them: remove the volume (docker compose" \
         "down, then docker volume rm saga-choreography_kafkadata; the topics and their" \
         "records are lost) and start again" >&2
    exit 1
  fi
else
  users=()
  for principal in $PRINCIPALS; do
    users+=(--add-scram "SCRAM-SHA-512=[name=$principal,password=$(password_of "$principal")]")
  done
  /opt/kafka/bin/kafka-storage.sh format --cluster-id "$CLUSTER_ID" \
    --config "$RUNTIME/server.properties" "${users[@]}"
  echo "$PRINCIPALS" > "$MARKER"
fi

exec /opt/kafka/bin/kafka-server-start.sh "$RUNTIME/server.properties"
