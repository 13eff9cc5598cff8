output "kind" {
  value       = "security-group"
  description = "Always \"security-group\"; used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the resource."
}

output "security_group_id" {
  value       = aws_security_group.this.id
  description = "Id of the security group."
}

output "security_group_arn" {
  value       = aws_security_group.this.arn
  description = "ARN of the security group."
}

output "vpc_id" {
  value       = var.network.vpc_id
  description = "Id of the VPC the group is in."
}
