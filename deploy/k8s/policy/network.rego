# Who reaches the workers, and whose tokens the services believe (see workloads.rego for how
# these are run).
package main

import rego.v1

policies := [o | some o in objects; o.kind == "NetworkPolicy"]

# A policy of a workload's own names it (the default deny selects every pod of the project).
selects(policy, pod_labels) if {
	sel := object.get(policy.spec.podSelector, "matchLabels", {})
	sel["app.kubernetes.io/name"]
	every k, v in sel {
		pod_labels[k] == v
	}
}

worker(o) if {
	o.kind == "Deployment"
	o.spec.template.metadata.labels["app.kubernetes.io/component"] == "worker"
}

deny contains msg if {
	some o in objects
	worker(o)
	not any_policy_selects(o.spec.template.metadata.labels)
	msg := sprintf("%s: no NetworkPolicy of its own", [name(o)])
}

any_policy_selects(pod_labels) if {
	some p in policies
	selects(p, pod_labels)
}

# A worker serves no traffic: Prometheus' scrape is the only connection it takes.
deny contains msg if {
	some p in policies
	p.metadata.labels["app.kubernetes.io/component"] == "worker"
	some rule in object.get(p.spec, "ingress", [])
	not from_prometheus_only(rule)
	msg := sprintf("%s: a worker accepts connections from others than Prometheus", [name(p)])
}

from_prometheus_only(rule) if {
	count(rule.from) > 0
	every peer in rule.from {
		peer.podSelector.matchLabels == {"app.kubernetes.io/name": "prometheus"}
	}
}

# --- the issuer

auth_settings := [o | some o in objects; o.kind == "ConfigMap"; o.metadata.name == "saga-auth-settings"]

deny contains msg if {
	some cm in auth_settings
	issuer := cm.data.AUTH_ISSUER
	regex.match(`^https?://[^/]*example\.(com|org|net)([:/]|$)`, issuer)
	msg := sprintf("ConfigMap saga-auth-settings: AUTH_ISSUER %s is a placeholder", [issuer])
}

deny contains msg if {
	some o in workloads
	some c in o.spec.template.spec.containers
	some source in object.get(c, "envFrom", [])
	source.configMapRef.name == "saga-auth-settings"
	not requires_issuer(c)
	msg := sprintf("%s: container %s does not require AUTH_ISSUER from saga-auth-settings",
		[name(o), c.name])
}

requires_issuer(c) if {
	some e in c.env
	e.name == "AUTH_ISSUER"
	ref := e.valueFrom.configMapKeyRef
	ref.name == "saga-auth-settings"
	ref.key == "AUTH_ISSUER"
	object.get(ref, "optional", false) == false
}
