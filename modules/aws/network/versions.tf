terraform {
  # Ephemeral resources and write-only attributes need OpenTofu 1.11.
  required_version = ">= 1.11.0"
  required_providers {
    # Pinned to the version whose schema the argument check uses (see modules/aws/README.md).
    aws = {
      source  = "hashicorp/aws"
      version = "6.25.0"
    }
  }
}
