output "kind" {
  value       = "cache"
  description = "Always \"cache\"; used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the resource."
}

output "primary_endpoint" {
  value       = aws_elasticache_replication_group.this.primary_endpoint_address
  description = "Host name of the primary (writes)."
}

output "reader_endpoint" {
  value       = aws_elasticache_replication_group.this.reader_endpoint_address
  description = "Host name that spreads reads over the replicas."
}

output "port" {
  value       = aws_elasticache_replication_group.this.port
  description = "Port the cache listens on (TLS)."
}

output "security_group_id" {
  value       = aws_security_group.this.id
  description = "Id of the cache's security group."
}
