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

variable "zone_id" {
  type        = string
  description = "Hosted zone the record is in."

  validation {
    condition     = can(regex("^Z[A-Z0-9]{1,31}$", var.zone_id))
    error_message = "zone_id must be a Route 53 hosted zone id (Z\u2026)."
  }
}

variable "record_name" {
  type        = string
  description = "Fully qualified name of the record."

  validation {
    condition     = length(var.record_name) > 0 && length(var.record_name) <= 253
    error_message = "record_name must be 1-253 characters."
  }
}

variable "load_balancer" {
  type        = object({dns_name = string, zone_id = string})
  default     = null
  description = "Wiring (kind load-balancer, optional): the target of an alias A record."
}

variable "type" {
  type        = string
  default     = "CNAME"
  description = "Record type when no load balancer is wired."

  validation {
    condition     = contains(["A", "AAAA", "CNAME", "TXT", "MX"], var.type)
    error_message = "type must be A, AAAA, CNAME, TXT or MX."
  }
}

variable "records" {
  type        = list(string)
  default     = []
  description = "Values of the record when no load balancer is wired."
}

variable "ttl" {
  type        = number
  default     = 300
  description = "TTL in seconds of a non-alias record."

  validation {
    condition     = var.ttl >= 0 && var.ttl <= 604800
    error_message = "ttl must be 0-604800."
  }
}
