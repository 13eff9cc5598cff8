locals {
  ami = "bar"
}

resource "terraform_data" "test" {
  # Fails while planning, as the fixture's failing precondition does.
  input = tonumber(local.ami)
}
