output "kind" {
  value       = "secret"
  description = "Always \"secret\"; used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the resource."
}

output "arn" {
  value       = aws_secretsmanager_secret.this.arn
  description = "ARN of the secret (what dependents are given; never the value)."
}

output "secret_arn" {
  value       = aws_secretsmanager_secret.this.arn
  description = "ARN of the secret (same as arn, named for wiring)."
}

output "secret_name" {
  value       = aws_secretsmanager_secret.this.name
  description = "Name of the secret in Secrets Manager."
}
