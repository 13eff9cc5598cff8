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
  type        = object({vpc_id = string, cidr = string, private_subnet_ids = list(string)})
  description = "Wiring (kind network): the VPC and its private subnets."
}

variable "engine_version" {
  type        = string
  default     = "8.0"
  description = "Valkey version."

  validation {
    condition     = can(regex("^[0-9]+\\.[0-9]+$", var.engine_version))
    error_message = "engine_version must look like 8.0."
  }
}

variable "node_type" {
  type        = string
  default     = "cache.t4g.micro"
  description = "Node type."

  validation {
    condition     = can(regex("^cache\\.", var.node_type))
    error_message = "node_type must be an ElastiCache node type such as cache.t4g.micro."
  }
}

variable "num_cache_clusters" {
  type        = number
  default     = 2
  description = "Nodes (a primary and replicas)."

  validation {
    condition     = var.num_cache_clusters >= 1 && var.num_cache_clusters <= 6
    error_message = "num_cache_clusters must be 1-6."
  }
}

variable "allowed_cidr_blocks" {
  type        = list(string)
  default     = null
  description = "Address ranges allowed to connect (null: the VPC's range)."
}

variable "allowed_security_group_ids" {
  type        = list(string)
  default     = []
  description = "Security groups allowed to connect."
}

variable "snapshot_retention_limit" {
  type        = number
  default     = 1
  description = "Days snapshots are kept (0: none)."

  validation {
    condition     = var.snapshot_retention_limit >= 0 && var.snapshot_retention_limit <= 35
    error_message = "snapshot_retention_limit must be 0-35."
  }
}
