# Warren's gateways on Nomad (docs/deploy.md, "Nomad"): two stateless warrend --role gateway.
# Nodes come from warren-node.nomad.hcl's services: a template renders them as a static list
# (--discovery static:ID@HOST:PORT,...) and restarts the gateways when that list changes.
#
# Not tested here: Nomad is not in Debian, so no test of this repository runs or parses this
# file. Check it with `nomad job validate` and on a real cluster.
#
# Secrets are Nomad Variables at nomad/jobs/warren-gateway: node_token (the nodes' own),
# admin_key ("wr_" and 64 hex digits), database_url, aws_access_key_id, aws_secret_access_key.
# A load balancer in front of the gateways' port sends api.<domain> and *.<domain> to them.

variable "warrend" {
  type    = string
  default = "/usr/local/sbin/warrend"
}

variable "object_store" {
  type    = string
  default = "s3://warren-snapshots/prod?endpoint=https://s3.eu-west-1.amazonaws.com&region=eu-west-1"
}

variable "domain" {
  type    = string
  default = "sandbox.example.com"
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

job "warren-gateway" {
  type        = "service"
  datacenters = var.datacenters

  group "gateway" {
    count = 2

    spread {
      attribute = "${node.unique.id}"
    }

    network {
      port "http" {
        static = 8080
      }
    }

    service {
      provider = "nomad"
      name     = "warren-gateway"
      port     = "http"

      check {
        type     = "http"
        path     = "/healthz"
        interval = "10s"
        timeout  = "3s"
      }
    }

    update {
      max_parallel     = 1
      min_healthy_time = "10s"
      auto_revert      = true
    }

    task "warrend" {
      # The gateway needs no privilege: the exec driver's isolation, as nobody.
      driver = "exec"
      user   = "nobody"

      config {
        command = var.warrend
        args = [
          "--role", "gateway",
          "--listen", "0.0.0.0:8080",
          "--discovery", "${WARREN_DISCOVERY}",
          "--node-token-file", "${NOMAD_SECRETS_DIR}/node-token",
          "--admin-key-file", "${NOMAD_SECRETS_DIR}/admin-key",
          "--domain", var.domain,
          "--object-store", var.object_store,
        ]
      }

      # The database URL (read from WARREN_DATABASE_URL, out of the process list) and the object
      # store's keys.
      template {
        destination = "${NOMAD_SECRETS_DIR}/gateway.env"
        env         = true
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/warren-gateway" }}
          WARREN_DATABASE_URL={{ .database_url }}
          AWS_ACCESS_KEY_ID={{ .aws_access_key_id }}
          AWS_SECRET_ACCESS_KEY={{ .aws_secret_access_key }}
          {{- end }}
        EOT
      }

      # The nodes now, as a static list whose ids are the nodes' --node-id (their tag).
      template {
        destination = "${NOMAD_TASK_DIR}/discovery.env"
        env         = true
        change_mode = "restart"
        splay       = "30s"
        data        = <<-EOT
          WARREN_DISCOVERY=static:{{ range $i, $s := nomadService "warren-node" }}{{ if $i }},{{ end }}{{ range $s.Tags }}{{ if . | regexMatch "^node-id=" }}{{ . | trimPrefix "node-id=" }}{{ end }}{{ end }}@{{ $s.Address }}:{{ $s.Port }}{{ end }}
        EOT
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/node-token"
        perms       = "0400"
        uid         = 65534 # nobody, who runs the task
        gid         = 65534
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/warren-gateway" }}{{ .node_token }}{{ end -}}
        EOT
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/admin-key"
        perms       = "0400"
        uid         = 65534 # nobody, who runs the task
        gid         = 65534
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/warren-gateway" }}{{ .admin_key }}{{ end -}}
        EOT
      }

      resources {
        cpu    = 500
        memory = 512
      }
    }
  }
}
