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
  type        = object({vpc_id = string, public_subnet_ids = list(string), private_subnet_ids = list(string)})
  description = "Wiring (kind network): the VPC and its subnets."
}

variable "certificate" {
  type        = object({certificate_arn = string})
  default     = null
  description = "Wiring (kind certificate, optional): the certificate of the HTTPS listener."
}

variable "internal" {
  type        = bool
  default     = false
  description = "An internal load balancer in the private subnets."
}

variable "allowed_cidr_blocks" {
  type        = list(string)
  default     = ["0.0.0.0/0"]
  description = "Address ranges allowed to reach the listeners."
}

variable "idle_timeout" {
  type        = number
  default     = 60
  description = "Seconds an idle connection is kept open."

  validation {
    condition     = var.idle_timeout >= 1 && var.idle_timeout <= 4000
    error_message = "idle_timeout must be 1-4000."
  }
}

variable "routes" {
  type        = map(object({port = number, priority = number, host_headers = optional(list(string), []), path_patterns = optional(list(string), ["/*"]), health_check_path = optional(string, "/healthz")}))
  default     = {}
  description = "Target groups by route name: the port targets listen on, the rule priority and its host and path conditions."

  validation {
    condition     = alltrue([for k, r in var.routes : can(regex("^[a-z][a-z0-9-]{0,19}$", k)) && r.priority >= 1 && r.priority <= 50000])
    error_message = "route names must be 1-20 lowercase letters, digits or -; priorities 1-50000."
  }
}

variable "deletion_protection" {
  type        = bool
  default     = true
  description = "Refuse to delete the load balancer until this is turned off."
}
