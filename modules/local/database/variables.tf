variable "name" {
  type        = string
  description = "Name of the database; its files are written under <base_dir>/<name>/."
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
  description = "Wiring: the outputs of the network module the database is placed in."
}

variable "engine" {
  type        = string
  default     = "postgres"
  description = "Database engine; changing it replaces the instance."
}

variable "engine_version" {
  type        = string
  default     = "16"
  description = "Engine version; changing it replaces the instance."
}

variable "port" {
  type        = number
  default     = 5432
  description = "Port the database listens on."
}

variable "storage_gb" {
  type        = number
  default     = 10
  description = "Allocated storage in GiB."
}

variable "allowed_cidr" {
  type        = string
  default     = "0.0.0.0/0"
  description = "Address range allowed to connect (usually the network's cidr)."
}

variable "admin_username" {
  type        = string
  default     = "cairn_admin"
  description = "Name of the administrative user."
}

variable "password_ref" {
  type        = string
  description = "Reference to the secret holding the admin password (e.g. a secret manager ARN); never the secret itself."
}

variable "admin_password" {
  type        = string
  default     = null
  sensitive   = true
  description = "Admin password, resolved by the runner from a sensitive template parameter; kept out of outputs."
}
