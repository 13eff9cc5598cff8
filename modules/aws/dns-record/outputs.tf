output "kind" {
  value       = "dns-record"
  description = "Always \"dns-record\"; used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the resource."
}

output "fqdn" {
  value       = aws_route53_record.this.fqdn
  description = "Fully qualified name of the record."
}

output "zone_id" {
  value       = var.zone_id
  description = "Hosted zone of the record."
}
