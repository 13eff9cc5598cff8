locals {
  tags = merge(var.tags, {
    "cairn:instance" = var.instance
    "cairn:resource" = var.name
  })
}

locals {
  allowed_cidr_blocks = var.allowed_cidr_blocks == null ? [var.network.cidr] : var.allowed_cidr_blocks
  replicated          = var.num_cache_clusters > 1
}

resource "aws_elasticache_subnet_group" "this" {
  name       = var.name
  subnet_ids = var.network.private_subnet_ids
  tags       = local.tags
}

resource "aws_security_group" "this" {
  name_prefix = "${var.name}-cache-"
  description = "Valkey ${var.name}"
  vpc_id      = var.network.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-cache" })

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_security_group_rule" "from_cidrs" {
  type              = "ingress"
  security_group_id = aws_security_group.this.id
  description       = "Valkey from the allowed address ranges"
  protocol          = "tcp"
  from_port         = 6379
  to_port           = 6379
  cidr_blocks       = local.allowed_cidr_blocks
}

resource "aws_security_group_rule" "from_groups" {
  count                    = length(var.allowed_security_group_ids)
  type                     = "ingress"
  security_group_id        = aws_security_group.this.id
  description              = "Valkey from an allowed security group"
  protocol                 = "tcp"
  from_port                = 6379
  to_port                  = 6379
  source_security_group_id = var.allowed_security_group_ids[count.index]
}

resource "aws_elasticache_replication_group" "this" {
  replication_group_id       = var.name
  description                = "Valkey ${var.name}"
  engine                     = "valkey"
  engine_version             = var.engine_version
  node_type                  = var.node_type
  num_cache_clusters         = var.num_cache_clusters
  port                       = 6379
  subnet_group_name          = aws_elasticache_subnet_group.this.name
  security_group_ids         = [aws_security_group.this.id]
  at_rest_encryption_enabled = true
  transit_encryption_enabled = true
  automatic_failover_enabled = local.replicated
  multi_az_enabled           = local.replicated
  snapshot_retention_limit   = var.snapshot_retention_limit
  auto_minor_version_upgrade = true
  apply_immediately          = false
  tags                       = local.tags
}
