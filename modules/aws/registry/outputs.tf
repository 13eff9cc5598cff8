output "kind" {
  value       = "registry"
  description = "Always \"registry\"; used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the resource."
}

output "repository_url" {
  value       = aws_ecr_repository.this.repository_url
  description = "URL images are pushed to and pulled from."
}

output "repository_arn" {
  value       = aws_ecr_repository.this.arn
  description = "ARN of the repository."
}

output "registry_id" {
  value       = aws_ecr_repository.this.registry_id
  description = "Account id of the registry."
}
