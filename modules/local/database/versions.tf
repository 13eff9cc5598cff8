terraform {
  required_providers {
    # terraform_data is built in; local_file comes from hashicorp/local, pinned to the
    # version the equivalence fixtures were recorded with.
    local = {
      source  = "hashicorp/local"
      version = "2.2.3"
    }
  }
}
