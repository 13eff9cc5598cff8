variable "test_var" {
  default = "bar"
}

resource "terraform_data" "test" {
  input = var.test_var
}

output "test" {
  value = var.test_var
}
