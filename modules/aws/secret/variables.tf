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

variable "description" {
  type        = string
  default     = "Managed by Cairn"
  description = "Description of the secret."

  validation {
    condition     = length(var.description) <= 2048
    error_message = "description must be at most 2048 characters."
  }
}

variable "kms_key_id" {
  type        = string
  default     = null
  description = "KMS key that encrypts the secret (null: the account's aws/secretsmanager key)."
}

variable "recovery_window_in_days" {
  type        = number
  default     = 30
  description = "Days a deleted secret can be restored (0: deleted at once)."

  validation {
    condition     = var.recovery_window_in_days == 0 || (var.recovery_window_in_days >= 7 && var.recovery_window_in_days <= 30)
    error_message = "recovery_window_in_days must be 0 or 7-30."
  }
}

variable "generate" {
  type        = bool
  default     = false
  description = "Write a random value (write-only, never in state)."
}

variable "length" {
  type        = number
  default     = 32
  description = "Length of a generated value."

  validation {
    condition     = var.length >= 16 && var.length <= 4096
    error_message = "length must be 16-4096."
  }
}

variable "value_version" {
  type        = number
  default     = 1
  description = "Version of the generated value; changing it writes a new random value."

  validation {
    condition     = var.value_version >= 1 && floor(var.value_version) == var.value_version
    error_message = "value_version must be a whole number of at least 1."
  }
}
