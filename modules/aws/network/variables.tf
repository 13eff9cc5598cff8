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

variable "cidr" {
  type        = string
  default     = "10.0.0.0/16"
  description = "Address range of the VPC; each subnet gets a /20 (or smaller) slice of it."

  validation {
    condition     = can(cidrnetmask(var.cidr)) && tonumber(split("/", var.cidr)[1]) <= 20
    error_message = "cidr must be an IPv4 CIDR block of /20 or larger."
  }
}

variable "az_count" {
  type        = number
  default     = 2
  description = "Availability zones to spread the subnets across."

  validation {
    condition     = var.az_count >= 2 && var.az_count <= 6 && floor(var.az_count) == var.az_count
    error_message = "az_count must be a whole number from 2 to 6."
  }
}

variable "nat" {
  type        = string
  default     = "single"
  description = "NAT for the private subnets: none, single (one gateway) or per_az (one per zone)."

  validation {
    condition     = contains(["none", "single", "per_az"], var.nat)
    error_message = "nat must be none, single or per_az."
  }
}
