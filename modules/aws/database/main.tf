locals {
  tags = merge(var.tags, {
    "cairn:instance" = var.instance
    "cairn:resource" = var.name
  })
}

locals {
  allowed_cidr_blocks = var.allowed_cidr_blocks == null ? [var.network.cidr] : var.allowed_cidr_blocks
}

# Opened for each plan and apply, never stored: reaches only write-only arguments.
ephemeral "random_password" "master" {
  length           = 40
  special          = true
  override_special = "!#$%^&*()-_=+[]{}<>:?"
}

resource "aws_secretsmanager_secret" "master" {
  name_prefix = "${var.name}-master-"
  description = "Master credentials of the database ${var.name}"
  kms_key_id  = var.kms_key_id
  tags        = local.tags
}

resource "aws_secretsmanager_secret_version" "master" {
  secret_id = aws_secretsmanager_secret.master.id
  secret_string_wo = jsonencode({
    username = var.master_username
    password = ephemeral.random_password.master.result
  })
  secret_string_wo_version = var.password_version
}

resource "aws_db_subnet_group" "this" {
  name_prefix = "${var.name}-"
  subnet_ids  = var.network.private_subnet_ids
  tags        = local.tags
}

resource "aws_security_group" "this" {
  name_prefix = "${var.name}-db-"
  description = "PostgreSQL ${var.name}"
  vpc_id      = var.network.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-db" })

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_security_group_rule" "from_cidrs" {
  type              = "ingress"
  security_group_id = aws_security_group.this.id
  description       = "PostgreSQL from the allowed address ranges"
  protocol          = "tcp"
  from_port         = 5432
  to_port           = 5432
  cidr_blocks       = local.allowed_cidr_blocks
}

resource "aws_security_group_rule" "from_groups" {
  count                    = length(var.allowed_security_group_ids)
  type                     = "ingress"
  security_group_id        = aws_security_group.this.id
  description              = "PostgreSQL from an allowed security group"
  protocol                 = "tcp"
  from_port                = 5432
  to_port                  = 5432
  source_security_group_id = var.allowed_security_group_ids[count.index]
}

resource "aws_db_instance" "this" {
  identifier                          = var.name
  engine                              = "postgres"
  engine_version                      = var.engine_version
  instance_class                      = var.instance_class
  allocated_storage                   = var.allocated_storage
  max_allocated_storage               = var.max_allocated_storage == 0 ? null : var.max_allocated_storage
  storage_type                        = "gp3"
  storage_encrypted                   = true
  kms_key_id                          = var.kms_key_id
  db_name                             = var.database_name
  username                            = var.master_username
  password_wo                         = ephemeral.random_password.master.result
  password_wo_version                 = var.password_version
  db_subnet_group_name                = aws_db_subnet_group.this.name
  vpc_security_group_ids              = [aws_security_group.this.id]
  publicly_accessible                 = false
  multi_az                            = var.multi_az
  backup_retention_period             = var.backup_retention_days
  copy_tags_to_snapshot               = true
  deletion_protection                 = var.deletion_protection
  skip_final_snapshot                 = var.skip_final_snapshot
  final_snapshot_identifier           = var.skip_final_snapshot ? null : "${var.name}-final"
  iam_database_authentication_enabled = true
  performance_insights_enabled        = true
  auto_minor_version_upgrade          = true
  allow_major_version_upgrade         = true
  apply_immediately                   = false
  tags                                = local.tags
}
