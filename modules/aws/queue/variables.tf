variable "name" {
  type        = string
  description = "Name of the resource (the physical name the resolver gives it); prefixes every AWS name and is tagged as cairn:resource."

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,47}$", var.name))
    error_message = "name must be 2-48 lowercase letters, digits or -, starting with a letter."
  }
}

variable "instance" {
  type        = string
  description = "The Cairn instance this resource belongs to; tagged as cairn:instance."

  validation {
    condition     = length(var.instance) > 0 && length(var.instance) <= 128
    error_message = "instance must be 1-128 characters."
  }
}

variable "tags" {
  type        = map(string)
  default     = {}
  description = "Extra tags on every resource (cairn:instance and cairn:resource always win)."
}

variable "fifo" {
  type        = bool
  default     = false
  description = "FIFO queues (exactly-once, ordered); the names get the .fifo suffix."
}

variable "visibility_timeout_seconds" {
  type        = number
  default     = 30
  description = "How long a received message is hidden from other consumers."

  validation {
    condition     = var.visibility_timeout_seconds >= 0 && var.visibility_timeout_seconds <= 43200
    error_message = "visibility_timeout_seconds must be 0-43200."
  }
}

variable "message_retention_seconds" {
  type        = number
  default     = 345600
  description = "How long a message is kept (the dead-letter queue keeps them 14 days)."

  validation {
    condition     = var.message_retention_seconds >= 60 && var.message_retention_seconds <= 1209600
    error_message = "message_retention_seconds must be 60-1209600."
  }
}

variable "max_receive_count" {
  type        = number
  default     = 5
  description = "Receives before a message moves to the dead-letter queue."

  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000
    error_message = "max_receive_count must be 1-1000."
  }
}

variable "kms_master_key_id" {
  type        = string
  default     = null
  description = "KMS key of the queues (null: SQS-managed encryption)."
}
