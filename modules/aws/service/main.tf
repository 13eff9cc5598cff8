locals {
  tags = merge(var.tags, {
    "cairn:instance" = var.instance
    "cairn:resource" = var.name
  })
}

data "aws_region" "current" {}

locals {
  cluster_arn = var.cluster_arn == null ? aws_ecs_cluster.this[0].arn : var.cluster_arn
  secrets = merge(var.secrets, var.database == null ? {} : {
    DATABASE_SECRET = var.database.secret_arn
  })
  environment = merge(
    var.environment,
    var.database == null ? {} : {
      DATABASE_HOST = var.database.endpoint
      DATABASE_PORT = tostring(var.database.port)
    },
    var.queue == null ? {} : { QUEUE_URL = var.queue.url },
    var.cache == null ? {} : {
      CACHE_HOST = var.cache.primary_endpoint
      CACHE_PORT = tostring(var.cache.port)
    },
  )
  target_group_arn = var.load_balancer != null && var.route != null ? var.load_balancer.target_group_arns[var.route] : null
}

resource "aws_ecs_cluster" "this" {
  count = var.cluster_arn == null ? 1 : 0
  name  = var.name
  tags  = local.tags

  setting {
    name  = "containerInsights"
    value = "enabled"
  }
}

resource "aws_cloudwatch_log_group" "this" {
  name              = "/cairn/${var.instance}/${var.name}"
  retention_in_days = var.log_retention_days
  tags              = local.tags
}

data "aws_iam_policy_document" "assume_ecs_tasks" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "execution" {
  name_prefix        = "${substr(var.name, 0, 20)}-exec-"
  assume_role_policy = data.aws_iam_policy_document.assume_ecs_tasks.json
  tags               = local.tags
}

resource "aws_iam_role_policy_attachment" "execution" {
  role       = aws_iam_role.execution.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
}

data "aws_iam_policy_document" "read_secrets" {
  count = length(local.secrets) > 0 ? 1 : 0
  statement {
    actions   = ["secretsmanager:GetSecretValue"]
    resources = values(local.secrets)
  }
}

resource "aws_iam_role_policy" "read_secrets" {
  count  = length(local.secrets) > 0 ? 1 : 0
  name   = "read-secrets"
  role   = aws_iam_role.execution.id
  policy = data.aws_iam_policy_document.read_secrets[0].json
}

resource "aws_iam_role" "task" {
  name_prefix        = "${substr(var.name, 0, 20)}-task-"
  assume_role_policy = data.aws_iam_policy_document.assume_ecs_tasks.json
  tags               = local.tags
}

data "aws_iam_policy_document" "use_queue" {
  count = var.queue == null ? 0 : 1
  statement {
    actions = [
      "sqs:SendMessage",
      "sqs:ReceiveMessage",
      "sqs:DeleteMessage",
      "sqs:ChangeMessageVisibility",
      "sqs:GetQueueAttributes",
    ]
    resources = [var.queue.arn]
  }
}

resource "aws_iam_role_policy" "use_queue" {
  count  = var.queue == null ? 0 : 1
  name   = "use-queue"
  role   = aws_iam_role.task.id
  policy = data.aws_iam_policy_document.use_queue[0].json
}

resource "aws_security_group" "this" {
  name_prefix = "${var.name}-svc-"
  description = "Service ${var.name}"
  vpc_id      = var.network.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-svc" })

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_security_group_rule" "from_load_balancer" {
  count                    = var.load_balancer == null ? 0 : 1
  type                     = "ingress"
  security_group_id        = aws_security_group.this.id
  description              = "From the load balancer"
  protocol                 = "tcp"
  from_port                = var.port
  to_port                  = var.port
  source_security_group_id = var.load_balancer.security_group_id
}

resource "aws_security_group_rule" "egress_all" {
  type              = "egress"
  security_group_id = aws_security_group.this.id
  description       = "All outbound traffic (image pulls, AWS APIs, the database)"
  protocol          = "-1"
  from_port         = 0
  to_port           = 0
  cidr_blocks       = ["0.0.0.0/0"]
}

resource "aws_ecs_task_definition" "this" {
  family                   = var.name
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.cpu
  memory                   = var.memory
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.task.arn
  tags                     = local.tags

  container_definitions = jsonencode([{
    name         = "app"
    image        = var.image
    essential    = true
    portMappings = [{ containerPort = var.port, protocol = "tcp" }]
    environment  = [for k in sort(keys(local.environment)) : { name = k, value = local.environment[k] }]
    secrets      = [for k in sort(keys(local.secrets)) : { name = k, valueFrom = local.secrets[k] }]
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        awslogs-group         = aws_cloudwatch_log_group.this.name
        awslogs-region        = data.aws_region.current.region
        awslogs-stream-prefix = "app"
      }
    }
  }])

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = "X86_64"
  }
}

resource "aws_ecs_service" "this" {
  name                   = var.name
  cluster                = local.cluster_arn
  task_definition        = aws_ecs_task_definition.this.arn
  desired_count          = var.desired_count
  launch_type            = "FARGATE"
  enable_execute_command = false
  propagate_tags         = "SERVICE"
  tags                   = local.tags

  network_configuration {
    subnets          = var.network.private_subnet_ids
    security_groups  = [aws_security_group.this.id]
    assign_public_ip = false
  }

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  dynamic "load_balancer" {
    for_each = local.target_group_arn == null ? [] : [local.target_group_arn]
    content {
      target_group_arn = load_balancer.value
      container_name   = "app"
      container_port   = var.port
    }
  }
}
