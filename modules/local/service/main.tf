# A local stand-in for a deployed service: the release is a terraform_data resource that
# is replaced when the image changes, the settings are recorded in
# <base_dir>/<name>/service.json and the connection settings in <base_dir>/<name>/service.env.
# The database password is never here: only its reference (secret_ref).

locals {
  dir = "${var.base_dir}/${var.name}"
  url = "http://${var.name}.service.${var.network.dns_domain}:${var.port}"

  service = {
    name         = var.name
    image        = var.image
    replicas     = var.replicas
    port         = var.port
    url          = local.url
    network      = var.network.name
    environment  = var.environment
    health_check = var.health_check
    database = {
      name       = var.database.name
      endpoint   = var.database.endpoint
      port       = var.database.port
      secret_ref = var.database.secret_ref
    }
    queue = var.queue
  }
}

resource "terraform_data" "release" {
  input = {
    image    = var.image
    replicas = var.replicas
  }
  triggers_replace = var.image
}

resource "local_file" "service" {
  filename             = "${local.dir}/service.json"
  content              = jsonencode(local.service)
  file_permission      = "0644"
  directory_permission = "0755"
}

resource "local_file" "env" {
  filename             = "${local.dir}/service.env"
  content              = "DATABASE_HOST=${var.database.endpoint}\nDATABASE_PORT=${var.database.port}\nDATABASE_SECRET_REF=${var.database.secret_ref}\nSERVICE_URL=${local.url}\n"
  file_permission      = "0644"
  directory_permission = "0755"
}
