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

variable "network" {
  type        = object({vpc_id = string})
  description = "Wiring (kind network): the VPC the group is in."
}

variable "description" {
  type        = string
  default     = "Managed by Cairn"
  description = "Description of the group (changing it replaces the group)."

  validation {
    condition     = length(var.description) > 0 && length(var.description) <= 255
    error_message = "description must be 1-255 characters."
  }
}

variable "ingress" {
  type        = list(object({description = string, protocol = string, from_port = number, to_port = number, cidr_blocks = optional(list(string), []), source_security_group_id = optional(string)}))
  default     = []
  description = "Ingress rules; each names either cidr_blocks or source_security_group_id."

  validation {
    condition     = alltrue([for r in var.ingress : (length(r.cidr_blocks) > 0) != (r.source_security_group_id != null)])
    error_message = "each ingress rule needs exactly one of cidr_blocks and source_security_group_id."
  }
}

variable "allow_all_egress" {
  type        = bool
  default     = true
  description = "Allow all outbound traffic."
}
