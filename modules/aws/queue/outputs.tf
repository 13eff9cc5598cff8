output "kind" {
  value       = "queue"
  description = "Always \"queue\"; used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the resource."
}

output "url" {
  value       = aws_sqs_queue.this.url
  description = "URL producers and consumers use."
}

output "arn" {
  value       = aws_sqs_queue.this.arn
  description = "ARN of the queue (for IAM policies)."
}

output "dead_letter_url" {
  value       = aws_sqs_queue.dead_letter.url
  description = "URL of the dead-letter queue."
}

output "dead_letter_arn" {
  value       = aws_sqs_queue.dead_letter.arn
  description = "ARN of the dead-letter queue."
}
