variable "name" {
  type        = string
  description = "Name of the service; its files are written under <base_dir>/<name>/."
}

variable "base_dir" {
  type        = string
  description = "Target setting: the directory the local family writes under (filled by the resolver)."
}

variable "network" {
  type = object({
    kind       = string
    name       = string
    dns_domain = string
  })
  description = "Wiring: the outputs of the network module the service runs in."
}

variable "database" {
  type = object({
    kind       = string
    name       = string
    endpoint   = string
    port       = number
    secret_ref = string
  })
  description = "Wiring: the outputs of the database module the service uses."
}

variable "queue" {
  type = object({
    kind   = string
    name   = string
    url    = string
    topics = list(string)
  })
  default     = null
  description = "Wiring (optional): the outputs of a queue module the service uses; null when it has none."
}

variable "image" {
  type        = string
  default     = "ghcr.io/cairn-demo/web:1.0.0"
  description = "Container image of the service; changing it replaces the release."
}

variable "replicas" {
  type        = number
  default     = 2
  description = "Number of instances."
}

variable "port" {
  type        = number
  default     = 8080
  description = "Port the service listens on."
}

variable "environment" {
  type        = map(string)
  default     = {}
  description = "Extra environment variables of the service (no secrets: pass references)."
}

variable "health_check" {
  type = object({
    path             = optional(string, "/healthz")
    interval_seconds = optional(number, 10)
  })
  default     = {}
  description = "Health check; each attribute has a default."
}
