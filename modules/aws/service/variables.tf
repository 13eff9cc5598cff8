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
  type        = object({vpc_id = string, private_subnet_ids = list(string)})
  description = "Wiring (kind network): the VPC and the private subnets tasks run in."
}

variable "load_balancer" {
  type        = object({security_group_id = string, target_group_arns = map(string)})
  default     = null
  description = "Wiring (kind load-balancer, optional): where traffic comes from."
}

variable "database" {
  type        = object({endpoint = string, port = number, secret_arn = string})
  default     = null
  description = "Wiring (kind database, optional): host, port and the credentials secret's ARN."
}

variable "queue" {
  type        = object({url = string, arn = string})
  default     = null
  description = "Wiring (kind queue, optional): its URL becomes QUEUE_URL, and the task role may use it."
}

variable "cache" {
  type        = object({primary_endpoint = string, port = number})
  default     = null
  description = "Wiring (kind cache, optional): its endpoint becomes CACHE_HOST and CACHE_PORT."
}

variable "cluster_arn" {
  type        = string
  default     = null
  description = "ECS cluster to run in (null: a cluster of the service's own)."
}

variable "image" {
  type        = string
  description = "Container image (from a registry the execution role can pull from)."

  validation {
    condition     = length(var.image) > 0
    error_message = "image must not be empty."
  }
}

variable "port" {
  type        = number
  default     = 8080
  description = "Port the container listens on."

  validation {
    condition     = var.port >= 1 && var.port <= 65535
    error_message = "port must be 1-65535."
  }
}

variable "route" {
  type        = string
  default     = null
  description = "Route of the load balancer whose target group the tasks join (needs load_balancer)."
}

variable "cpu" {
  type        = number
  default     = 256
  description = "CPU units of a task (256 = 0.25 vCPU)."

  validation {
    condition     = contains([256, 512, 1024, 2048, 4096, 8192, 16384], var.cpu)
    error_message = "cpu must be a Fargate size: 256, 512, 1024, 2048, 4096, 8192 or 16384."
  }
}

variable "memory" {
  type        = number
  default     = 512
  description = "Memory of a task in MiB (must fit cpu)."

  validation {
    condition     = var.memory >= 512 && var.memory <= 122880
    error_message = "memory must be 512-122880 MiB."
  }
}

variable "desired_count" {
  type        = number
  default     = 2
  description = "Tasks to keep running."

  validation {
    condition     = var.desired_count >= 0 && var.desired_count <= 1000
    error_message = "desired_count must be 0-1000."
  }
}

variable "environment" {
  type        = map(string)
  default     = {}
  description = "Plain environment variables (no secrets: use secrets)."
}

variable "secrets" {
  type        = map(string)
  default     = {}
  description = "Secret environment variables: name \u2192 Secrets Manager ARN (never a value)."

  validation {
    condition     = alltrue([for v in values(var.secrets) : can(regex("^arn:aws[a-z-]*:secretsmanager:", v))])
    error_message = "every secrets value must be a Secrets Manager ARN."
  }
}

variable "log_retention_days" {
  type        = number
  default     = 30
  description = "Days the logs are kept."

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be a CloudWatch retention value."
  }
}
