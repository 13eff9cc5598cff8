# A local stand-in for a message queue: its settings are recorded in
# <base_dir>/<name>/queue.json and its identity is a terraform_data resource.

locals {
  dir = "${var.base_dir}/${var.name}"
  url = "amqp://${var.name}.queue.${var.network.dns_domain}:5672/${var.name}"

  queue = {
    name              = var.name
    url               = local.url
    network           = var.network.name
    topics            = var.topics
    retention_hours   = var.retention_hours
    max_message_bytes = var.max_message_bytes
    dead_letter       = var.dead_letter
  }
}

resource "terraform_data" "queue" {
  input = local.queue
}

resource "local_file" "queue" {
  filename             = "${local.dir}/queue.json"
  content              = jsonencode(local.queue)
  file_permission      = "0644"
  directory_permission = "0755"
}
