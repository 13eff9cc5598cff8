variable "test_var" {
  default = "bar-var"
}

output "test" {
  value = var.test_var
}

resource "terraform_data" "test" {
  input = var.test_var
}
