output "kind" {
  value       = "database"
  description = "Module kind, used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the database."
}

output "instance_id" {
  value       = terraform_data.instance.id
  description = "Identifier of the database instance (known after apply; changes on replacement)."
}

output "endpoint" {
  value       = local.endpoint
  description = "Host name clients connect to: <name>.database.<network dns_domain>."
}

output "port" {
  value       = var.port
  description = "Port the database listens on."
}

output "engine" {
  value       = var.engine
  description = "Database engine."
}

output "engine_version" {
  value       = var.engine_version
  description = "Engine version."
}

output "admin_username" {
  value       = var.admin_username
  description = "Name of the administrative user."
}

output "secret_ref" {
  value       = var.password_ref
  description = "Reference to the secret holding the admin password (the reference, never the secret)."
}

output "config_path" {
  value       = local_file.database.filename
  description = "Path of the file that records the database settings."
}
