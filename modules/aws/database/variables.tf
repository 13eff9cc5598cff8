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
  default     = "17"
  description = "PostgreSQL version (major, or major.minor); a major change is an upgrade."

  validation {
    condition     = can(regex("^[0-9]{2}(\\.[0-9]+)?$", var.engine_version))
    error_message = "engine_version must look like 17 or 17.4."
  }
}

variable "instance_class" {
  type        = string
  default     = "db.t4g.micro"
  description = "Instance class."

  validation {
    condition     = can(regex("^db\\.", var.instance_class))
    error_message = "instance_class must be an RDS class such as db.t4g.micro."
  }
}

variable "allocated_storage" {
  type        = number
  default     = 20
  description = "Storage in GiB."

  validation {
    condition     = var.allocated_storage >= 20 && var.allocated_storage <= 65536
    error_message = "allocated_storage must be 20-65536 GiB."
  }
}

variable "max_allocated_storage" {
  type        = number
  default     = 100
  description = "Storage autoscaling limit in GiB (0: no autoscaling)."

  validation {
    condition     = var.max_allocated_storage == 0 || var.max_allocated_storage >= var.allocated_storage
    error_message = "max_allocated_storage must be 0 or at least allocated_storage."
  }
}

variable "multi_az" {
  type        = bool
  default     = false
  description = "A standby in another zone."
}

variable "database_name" {
  type        = string
  default     = "app"
  description = "Name of the database created on the instance."

  validation {
    condition     = can(regex("^[a-z][a-z0-9_]{0,62}$", var.database_name))
    error_message = "database_name must be lowercase letters, digits or _, starting with a letter."
  }
}

variable "master_username" {
  type        = string
  default     = "cairn_admin"
  description = "Name of the master user (its password is generated, see above)."

  validation {
    condition     = can(regex("^[a-z][a-z0-9_]{0,15}$", var.master_username)) && var.master_username != "admin"
    error_message = "master_username must be 1-16 lowercase letters, digits or _, and not a reserved word."
  }
}

variable "password_version" {
  type        = number
  default     = 1
  description = "Version of the generated master password; changing it rotates the password."

  validation {
    condition     = var.password_version >= 1 && floor(var.password_version) == var.password_version
    error_message = "password_version must be a whole number of at least 1."
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
  description = "Security groups allowed to connect (e.g. a service's)."
}

variable "backup_retention_days" {
  type        = number
  default     = 7
  description = "Days automated backups are kept."

  validation {
    condition     = var.backup_retention_days >= 1 && var.backup_retention_days <= 35
    error_message = "backup_retention_days must be 1-35."
  }
}

variable "deletion_protection" {
  type        = bool
  default     = true
  description = "Refuse to delete the instance until this is turned off."
}

variable "skip_final_snapshot" {
  type        = bool
  default     = false
  description = "Delete without a final snapshot."
}

variable "kms_key_id" {
  type        = string
  default     = null
  description = "KMS key of the storage and the secret (null: the account's AWS-managed keys)."
}
