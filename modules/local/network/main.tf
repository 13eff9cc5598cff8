# A local stand-in for a VPC: the network's description is recorded in
# <base_dir>/<name>/network.json and its identity is a terraform_data resource.

locals {
  dir = "${var.base_dir}/${var.name}"

  network = {
    name       = var.name
    cidr       = var.cidr
    dns_domain = var.dns_domain
    subnets    = var.subnets
  }
}

resource "terraform_data" "network" {
  input = local.network
}

resource "local_file" "network" {
  filename             = "${local.dir}/network.json"
  content              = jsonencode(local.network)
  file_permission      = "0644"
  directory_permission = "0755"
}
