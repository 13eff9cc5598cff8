variable "test_var" {
  default = "bar-var"
}

resource "terraform_data" "test" {
  input = var.test_var
}
