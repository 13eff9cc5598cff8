output "kind" {
  value       = "bucket"
  description = "Always \"bucket\"; used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the resource."
}

output "bucket" {
  value       = aws_s3_bucket.this.id
  description = "Name of the bucket."
}

output "arn" {
  value       = aws_s3_bucket.this.arn
  description = "ARN of the bucket."
}

output "regional_domain_name" {
  value       = aws_s3_bucket.this.bucket_regional_domain_name
  description = "Regional domain name of the bucket."
}
