# A local stand-in for a managed database: the instance is a terraform_data resource
# that is replaced when the engine or its version changes, its settings are recorded in
# <base_dir>/<name>/database.json, and the admin credentials go to a separate file
# through local_file's sensitive_content: redacted in plans, never in an output or the
# settings file. (hashicorp/local 2.2.3 has no write-only attribute, so the value is still
# recorded in state, marked sensitive; the state coordinator encrypts state.)

locals {
  dir      = "${var.base_dir}/${var.name}"
  endpoint = "${var.name}.database.${var.network.dns_domain}"

  database = {
    name           = var.name
    engine         = var.engine
    engine_version = var.engine_version
    endpoint       = local.endpoint
    port           = var.port
    storage_gb     = var.storage_gb
    network        = var.network.name
    allowed_cidr   = var.allowed_cidr
    admin_username = var.admin_username
    secret_ref     = var.password_ref
  }
}

resource "terraform_data" "instance" {
  input            = local.database
  triggers_replace = "${var.engine}-${var.engine_version}"
}

resource "local_file" "database" {
  filename             = "${local.dir}/database.json"
  content              = jsonencode(local.database)
  file_permission      = "0644"
  directory_permission = "0755"
}

resource "local_file" "admin_credentials" {
  filename = "${local.dir}/admin-credentials.json"
  sensitive_content = jsonencode({
    username = var.admin_username
    password = var.admin_password
  })
  file_permission      = "0600"
  directory_permission = "0755"
}
