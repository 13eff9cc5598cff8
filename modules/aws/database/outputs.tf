output "kind" {
  value       = "database"
  description = "Always \"database\"; used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the resource."
}

output "endpoint" {
  value       = aws_db_instance.this.address
  description = "Host name clients connect to."
}

output "port" {
  value       = aws_db_instance.this.port
  description = "Port the database listens on."
}

output "database_name" {
  value       = aws_db_instance.this.db_name
  description = "Name of the database on the instance."
}

output "master_username" {
  value       = aws_db_instance.this.username
  description = "Name of the master user."
}

output "secret_arn" {
  value       = aws_secretsmanager_secret.master.arn
  description = "ARN of the secret holding the master credentials (the ARN, never the value)."
}

output "security_group_id" {
  value       = aws_security_group.this.id
  description = "Id of the database's security group."
}

output "instance_id" {
  value       = aws_db_instance.this.identifier
  description = "Identifier of the instance."
}

output "engine_version" {
  value       = aws_db_instance.this.engine_version_actual
  description = "The running engine version."
}
