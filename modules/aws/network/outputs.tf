output "kind" {
  value       = "network"
  description = "Always \"network\"; used to wire this module into downstream modules."
}

output "name" {
  value       = var.name
  description = "Name of the resource."
}

output "vpc_id" {
  value       = aws_vpc.this.id
  description = "Id of the VPC."
}

output "cidr" {
  value       = aws_vpc.this.cidr_block
  description = "Address range of the VPC."
}

output "subnet_ids" {
  value       = aws_subnet.private[*].id
  description = "Ids of the private subnets, one per zone (where workloads go)."
}

output "private_subnet_ids" {
  value       = aws_subnet.private[*].id
  description = "Ids of the private subnets, one per zone."
}

output "public_subnet_ids" {
  value       = aws_subnet.public[*].id
  description = "Ids of the public subnets, one per zone (for load balancers)."
}

output "availability_zones" {
  value       = aws_subnet.private[*].availability_zone
  description = "The zones the subnets are in."
}

output "nat_gateway_ids" {
  value       = aws_nat_gateway.this[*].id
  description = "Ids of the NAT gateways (empty when nat is none)."
}
