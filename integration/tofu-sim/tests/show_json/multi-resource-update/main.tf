variable "test_var" {
  default = "bar"
}

resource "terraform_data" "test" {
  input = var.test_var
}

// The state holds one resource; the plan adds another.
resource "terraform_data" "test2" {
  input = var.test_var
}

output "test" {
  value = var.test_var
}
