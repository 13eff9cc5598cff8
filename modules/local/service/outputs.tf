output "kind" {
  value       = "service"
  description = "Module kind, used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the service."
}

output "release_id" {
  value       = terraform_data.release.id
  description = "Identifier of the current release (known after apply; changes with the image)."
}

output "url" {
  value       = local.url
  description = "URL the service answers on: http://<name>.service.<network dns_domain>:<port>."
}

output "port" {
  value       = var.port
  description = "Port the service listens on."
}

output "replicas" {
  value       = var.replicas
  description = "Number of instances."
}

output "image" {
  value       = var.image
  description = "Container image of the service."
}

output "config_path" {
  value       = local_file.service.filename
  description = "Path of the file that records the service settings."
}
