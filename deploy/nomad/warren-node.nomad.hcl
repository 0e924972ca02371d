# Warren's node daemons on Nomad (docs/deploy.md, "Nomad"): one warrend --role node on every
# client of the node pool "warren" whose meta warren_node is "true". Run it before the gateways
# (warren-gateway.nomad.hcl); one job per file, as Nomad wants.
#
# Not tested here: Nomad is not in Debian (HashiCorp's Business Source License since 2023), so
# no test of this repository runs or even parses this file. Check it with `nomad job validate`
# and on a real cluster before relying on it.
#
# On each client: warrend installed at var.warrend (the Debian packages of scripts/deps.sh run),
# the raw_exec driver enabled (plugin "raw_exec" { config { enabled = true } }: the daemon runs
# as root, outside any isolation of Nomad's, as on bare metal), and a client max_kill_timeout of
# at least the task's kill_timeout. The node token and the object store's keys are Nomad
# Variables at nomad/jobs/warren-node (nomad var put nomad/jobs/warren-node node_token=...
# aws_access_key_id=... aws_secret_access_key=...); with Vault, replace the nomadVar lookups by
# secret lookups.

variable "warrend" {
  type    = string
  default = "/usr/local/sbin/warrend"
}

variable "object_store" {
  type    = string
  default = "s3://warren-snapshots/prod?endpoint=https://s3.eu-west-1.amazonaws.com&region=eu-west-1"
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

job "warren-node" {
  type        = "system"
  datacenters = var.datacenters
  node_pool   = "warren"

  constraint {
    attribute = "${meta.warren_node}"
    value     = "true"
  }

  group "node" {
    network {
      port "api" {
        static = 7070
      }
    }

    # Nomad's own service catalogue: the gateway job renders its static node list from it. The
    # tag carries the daemon's --node-id, which the gateway's list must use as the id.
    service {
      provider = "nomad"
      name     = "warren-node"
      port     = "api"
      tags     = ["node-id=${node.unique.name}"]

      check {
        type     = "http"
        path     = "/healthz"
        interval = "10s"
        timeout  = "3s"
      }
    }

    task "warrend" {
      driver = "raw_exec"

      config {
        command = var.warrend
        args = [
          "--role", "node",
          "--node-id", "${node.unique.name}",
          "--listen", "0.0.0.0:7070",
          "--node-token-file", "${NOMAD_SECRETS_DIR}/node-token",
          "--object-store", var.object_store,
          "--state-dir", "/var/lib/warren",
        ]
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/node-token"
        perms       = "0400"
        change_mode = "noop"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/warren-node" }}{{ .node_token }}{{ end -}}
        EOT
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/s3.env"
        env         = true
        change_mode = "noop"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/warren-node" }}
          AWS_ACCESS_KEY_ID={{ .aws_access_key_id }}
          AWS_SECRET_ACCESS_KEY={{ .aws_secret_access_key }}
          {{- end }}
        EOT
      }

      # Stopping the task ends its sandboxes: the daemon gets this long after SIGTERM. Upgrade
      # node by node (nomad node drain, then a new job version) as on Kubernetes.
      kill_timeout = "1h"

      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }
}
