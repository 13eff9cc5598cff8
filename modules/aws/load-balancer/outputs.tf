output "kind" {
  value       = "load-balancer"
  description = "Always \"load-balancer\"; used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the resource."
}

output "arn" {
  value       = aws_lb.this.arn
  description = "ARN of the load balancer."
}

output "dns_name" {
  value       = aws_lb.this.dns_name
  description = "DNS name of the load balancer (for alias records)."
}

output "zone_id" {
  value       = aws_lb.this.zone_id
  description = "Hosted zone of the load balancer's DNS name (for alias records)."
}

output "security_group_id" {
  value       = aws_security_group.this.id
  description = "Id of the load balancer's security group (targets allow traffic from it)."
}

output "listener_arn" {
  value       = local.listener_arn
  description = "ARN of the listener the routes are on (HTTPS with a certificate, else HTTP)."
}

output "target_group_arns" {
  value       = { for k, tg in aws_lb_target_group.this : k => tg.arn }
  description = "ARN of each route's target group, by route name."
}
