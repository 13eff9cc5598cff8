output "kind" {
  value       = "certificate"
  description = "Always \"certificate\"; used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the resource."
}

output "certificate_arn" {
  value       = aws_acm_certificate_validation.this.certificate_arn
  description = "ARN of the issued certificate."
}

output "domain_name" {
  value       = aws_acm_certificate.this.domain_name
  description = "Domain name of the certificate."
}
