output "kind" {
  value       = "queue"
  description = "Module kind, used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the queue."
}

output "queue_id" {
  value       = terraform_data.queue.id
  description = "Identifier of the queue (known after apply)."
}

output "url" {
  value       = local.url
  description = "URL producers and consumers connect to."
}

output "topics" {
  value       = var.topics
  description = "Topics the queue carries."
}

output "config_path" {
  value       = local_file.queue.filename
  description = "Path of the file that records the queue settings."
}
