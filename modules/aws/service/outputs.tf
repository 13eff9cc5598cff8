output "kind" {
  value       = "service"
  description = "Always \"service\"; used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the resource."
}

output "service_name" {
  value       = aws_ecs_service.this.name
  description = "Name of the ECS service."
}

output "cluster_arn" {
  value       = local.cluster_arn
  description = "ARN of the cluster the service runs in."
}

output "task_definition_arn" {
  value       = aws_ecs_task_definition.this.arn
  description = "ARN of the current task definition."
}

output "security_group_id" {
  value       = aws_security_group.this.id
  description = "Id of the tasks' security group (allow it on a database or cache)."
}

output "task_role_arn" {
  value       = aws_iam_role.task.arn
  description = "ARN of the role the application runs as (grant it access to queues, buckets\u2026)."
}

output "log_group_name" {
  value       = aws_cloudwatch_log_group.this.name
  description = "CloudWatch log group of the containers."
}
