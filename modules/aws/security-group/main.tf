locals {
  tags = merge(var.tags, {
    "cairn:instance" = var.instance
    "cairn:resource" = var.name
  })
}

resource "aws_security_group" "this" {
  name_prefix = "${var.name}-"
  description = var.description
  vpc_id      = var.network.vpc_id
  tags        = merge(local.tags, { Name = var.name })

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_security_group_rule" "ingress" {
  count                    = length(var.ingress)
  type                     = "ingress"
  security_group_id        = aws_security_group.this.id
  description              = var.ingress[count.index].description
  protocol                 = var.ingress[count.index].protocol
  from_port                = var.ingress[count.index].from_port
  to_port                  = var.ingress[count.index].to_port
  cidr_blocks              = length(var.ingress[count.index].cidr_blocks) > 0 ? var.ingress[count.index].cidr_blocks : null
  source_security_group_id = var.ingress[count.index].source_security_group_id
}

resource "aws_security_group_rule" "egress_all" {
  count             = var.allow_all_egress ? 1 : 0
  type              = "egress"
  security_group_id = aws_security_group.this.id
  description       = "All outbound traffic"
  protocol          = "-1"
  from_port         = 0
  to_port           = 0
  cidr_blocks       = ["0.0.0.0/0"]
}
