variable "name" {
  type        = string
  description = "Name of the queue; its files are written under <base_dir>/<name>/."
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
  description = "Wiring: the outputs of the network module the queue is reachable on."
}

variable "topics" {
  type        = list(string)
  default     = ["events"]
  description = "Topics the queue carries."
}

variable "retention_hours" {
  type        = number
  default     = 96
  description = "How long messages are kept."
}

variable "max_message_bytes" {
  type        = number
  default     = 262144
  description = "Largest message accepted."
}

variable "dead_letter" {
  type        = bool
  default     = true
  description = "Whether undeliverable messages go to a dead-letter topic."
}
