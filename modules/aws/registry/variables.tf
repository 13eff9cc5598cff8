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

variable "image_tag_mutability" {
  type        = string
  default     = "IMMUTABLE"
  description = "IMMUTABLE (a tag always names the same image) or MUTABLE."

  validation {
    condition     = contains(["IMMUTABLE", "MUTABLE"], var.image_tag_mutability)
    error_message = "image_tag_mutability must be IMMUTABLE or MUTABLE."
  }
}

variable "scan_on_push" {
  type        = bool
  default     = true
  description = "Scan every pushed image for vulnerabilities."
}

variable "keep_images" {
  type        = number
  default     = 50
  description = "Images kept; older ones are expired."

  validation {
    condition     = var.keep_images >= 1 && var.keep_images <= 10000
    error_message = "keep_images must be from 1 to 10000."
  }
}

variable "kms_key_arn" {
  type        = string
  default     = null
  description = "KMS key that encrypts the images (null: AES-256 with an AWS-owned key)."

  validation {
    condition     = var.kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:", var.kms_key_arn))
    error_message = "kms_key_arn must be a KMS key ARN."
  }
}

variable "force_delete" {
  type        = bool
  default     = false
  description = "Delete the repository even when it still holds images."
}
