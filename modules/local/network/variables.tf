variable "name" {
  type        = string
  description = "Name of the network; its files are written under <base_dir>/<name>/."
}

variable "base_dir" {
  type        = string
  description = "Target setting: the directory the local family writes under (filled by the resolver)."
}

variable "cidr" {
  type        = string
  default     = "10.0.0.0/16"
  description = "Address range of the network."
}

variable "dns_domain" {
  type        = string
  default     = "internal"
  description = "DNS domain that endpoints on this network are named under."
}

variable "subnets" {
  type = list(object({
    name   = string
    cidr   = string
    public = optional(bool, false)
  }))
  default = [
    {
      name = "private-a"
      cidr = "10.0.1.0/24"
    },
  ]
  description = "Subnets carved out of the network; `public` defaults to false."
}
