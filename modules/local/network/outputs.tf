output "kind" {
  value       = "network"
  description = "Module kind, used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the network."
}

output "network_id" {
  value       = terraform_data.network.id
  description = "Stable identifier of the network (known after apply)."
}

output "cidr" {
  value       = var.cidr
  description = "Address range of the network."
}

output "dns_domain" {
  value       = var.dns_domain
  description = "DNS domain that endpoints on this network are named under."
}

output "subnets" {
  value       = var.subnets
  description = "Subnets of the network, with `public` filled in."
}

output "config_path" {
  value       = local_file.network.filename
  description = "Path of the file that records the network."
}
