locals {
  tags = merge(var.tags, {
    "cairn:instance" = var.instance
    "cairn:resource" = var.name
  })
}

locals {
  alias = var.load_balancer != null
}

resource "aws_route53_record" "this" {
  zone_id = var.zone_id
  name    = var.record_name
  type    = local.alias ? "A" : var.type
  ttl     = local.alias ? null : var.ttl
  records = local.alias ? null : var.records

  dynamic "alias" {
    for_each = local.alias ? [var.load_balancer] : []
    content {
      name                   = alias.value.dns_name
      zone_id                = alias.value.zone_id
      evaluate_target_health = true
    }
  }
}
