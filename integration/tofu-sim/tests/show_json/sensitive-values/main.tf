variable "test_var" {
  default   = "boop"
  sensitive = true
}

resource "terraform_data" "test" {
  input = var.test_var
}

output "test" {
  value     = terraform_data.test.input
  sensitive = true
}
