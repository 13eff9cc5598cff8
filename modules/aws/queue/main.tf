locals {
  tags = merge(var.tags, {
    "cairn:instance" = var.instance
    "cairn:resource" = var.name
  })
}

locals {
  suffix = var.fifo ? ".fifo" : ""
}

resource "aws_sqs_queue" "dead_letter" {
  name                      = "${var.name}-dlq${local.suffix}"
  fifo_queue                = var.fifo
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = var.kms_master_key_id == null
  kms_master_key_id         = var.kms_master_key_id
  tags                      = local.tags
}

resource "aws_sqs_queue" "this" {
  name                       = "${var.name}${local.suffix}"
  fifo_queue                 = var.fifo
  visibility_timeout_seconds = var.visibility_timeout_seconds
  message_retention_seconds  = var.message_retention_seconds
  sqs_managed_sse_enabled    = var.kms_master_key_id == null
  kms_master_key_id          = var.kms_master_key_id
  tags                       = local.tags
}

resource "aws_sqs_queue_redrive_policy" "this" {
  queue_url = aws_sqs_queue.this.id
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dead_letter.arn
    maxReceiveCount     = var.max_receive_count
  })
}

resource "aws_sqs_queue_redrive_allow_policy" "dead_letter" {
  queue_url = aws_sqs_queue.dead_letter.id
  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.this.arn]
  })
}
