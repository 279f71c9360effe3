# Rules every rendered overlay keeps (deploy/k8s/conftest.sh runs them with --combine: `input`
# is every object of the overlay, each as {"path": ..., "contents": object}). Each rule says
# what is wrong and where; deploy/tests/test_k8s_conftest.py plants a violation of each and
# sees conftest refuse it.
package main

import rego.v1

objects := [doc.contents | some doc in input]

workloads := [o | some o in objects; o.kind in {"Deployment", "Job", "StatefulSet", "DaemonSet"}]

name(o) := sprintf("%s %s", [o.kind, o.metadata.name])

all_containers(o) := array.concat(object.get(o.spec.template.spec, "initContainers", []),
	o.spec.template.spec.containers)

# The project's own images, which an overlay points at its registry.
own_image(image) if startswith(image, "registry.invalid/saga/")

own_image(image) if startswith(image, "localhost/saga/")

registry(image) := first if {
	parts := split(image, "/")
	count(parts) > 1
	first := parts[0]
	regex.match(`[.:]|^localhost$`, first)
}

tag(image) := t if {
	last := split(image, "/")[count(split(image, "/")) - 1]
	parts := split(last, ":")
	count(parts) == 2
	t := parts[1]
}

# --- images

deny contains msg if {
	some o in workloads
	some c in all_containers(o)
	not registry(c.image)
	msg := sprintf("%s: image %s names no registry (it would be Docker Hub's)", [name(o), c.image])
}

deny contains msg if {
	some o in workloads
	some c in all_containers(o)
	not contains(c.image, "@sha256:")
	not tag(c.image)
	msg := sprintf("%s: image %s has no tag", [name(o), c.image])
}

deny contains msg if {
	some o in workloads
	some c in all_containers(o)
	tag(c.image) == "latest"
	msg := sprintf("%s: image %s is :latest", [name(o), c.image])
}

# A third-party image's tag can be moved under it: pinned by digest.
third_party_images contains [name(o), c.image] if {
	some o in workloads
	some c in all_containers(o)
	not own_image(c.image)
}

third_party_images contains [name(o), o.spec.imageName] if {
	some o in objects
	o.kind == "Cluster"
	o.spec.imageName
}

third_party_images contains [name(o), i.image] if {
	some o in objects
	o.kind in {"ImageCatalog", "ClusterImageCatalog"}
	some i in o.spec.images
}

deny contains msg if {
	some [where, image] in third_party_images
	not contains(image, "@sha256:")
	msg := sprintf("%s: third-party image %s is not pinned by digest", [where, image])
}

# --- containers: probes, limits

serves_traffic(o) if {
	o.kind == "Deployment"
	object.get(o.metadata, ["labels", "app.kubernetes.io/component"], "") != "worker"
}

deny contains msg if {
	some o in workloads
	o.kind != "Job"
	some c in o.spec.template.spec.containers
	some probe in ["readinessProbe", "livenessProbe"]
	not c[probe]
	msg := sprintf("%s: container %s has no %s", [name(o), c.name, probe])
}

deny contains msg if {
	some o in workloads
	some c in all_containers(o)
	some part in ["requests", "limits"]
	some resource in ["cpu", "memory"]
	not c.resources[part][resource]
	msg := sprintf("%s: container %s has no %s %s", [name(o), c.name, resource, part])
}

# --- rollouts

deny contains msg if {
	some o in workloads
	serves_traffic(o)
	some c in o.spec.template.spec.containers
	not c.lifecycle.preStop
	msg := sprintf("%s: container %s has no preStop pause", [name(o), c.name])
}

deny contains msg if {
	some o in workloads
	serves_traffic(o)
	some c in o.spec.template.spec.containers
	pause := c.lifecycle.preStop.sleep.seconds
	grace := object.get(o.spec.template.spec, "terminationGracePeriodSeconds", 30)
	pause >= grace
	msg := sprintf("%s: preStop pause %v s is not shorter than its grace period %v s",
		[name(o), pause, grace])
}

migration_job(o) if {
	o.kind == "Job"
	o.metadata.labels["app.kubernetes.io/component"] == "migrations"
}

deny contains msg if {
	some o in workloads
	migration_job(o)
	t := lower(regex.replace(tag(o.spec.template.spec.containers[0].image), `[^a-zA-Z0-9]+`, "-"))
	not contains(o.metadata.name, sprintf("-%s-", [t]))
	msg := sprintf("%s: its name does not carry its image's tag %s (applied again with another image it is refused)",
		[name(o), t])
}

deny contains msg if {
	some o in workloads
	migration_job(o)
	o.spec.ttlSecondsAfterFinished
	msg := sprintf("%s: deleted when done, so every GitOps sync runs it again", [name(o)])
}

deny contains msg if {
	some o in workloads
	o.kind == "Deployment"
	o.metadata.labels["app.kubernetes.io/name"] in {"pedidos", "inventario", "pagos"}
	not waits_for_schema(o)
	msg := sprintf("%s: does not wait for its schema's migration head", [name(o)])
}

waits_for_schema(o) if {
	some c in o.spec.template.spec.initContainers
	"sagakit.store.schema_wait" in c.command
}
