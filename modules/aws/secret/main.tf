locals {
  tags = merge(var.tags, {
    "cairn:instance" = var.instance
    "cairn:resource" = var.name
  })
}

ephemeral "random_password" "value" {
  count   = var.generate ? 1 : 0
  length  = var.length
  special = true
}

resource "aws_secretsmanager_secret" "this" {
  name                    = var.name
  description             = var.description
  kms_key_id              = var.kms_key_id
  recovery_window_in_days = var.recovery_window_in_days
  tags                    = local.tags
}

# Write-only: the value goes to Secrets Manager and never into plan or state.
resource "aws_secretsmanager_secret_version" "generated" {
  count                    = var.generate ? 1 : 0
  secret_id                = aws_secretsmanager_secret.this.id
  secret_string_wo         = ephemeral.random_password.value[0].result
  secret_string_wo_version = var.value_version
}
