"""An existing VPC (`aws.vpc`) as the stack uses it: its subnets, the security groups the stack
creates in it, and the Glue network connection that puts the jobs into the first subnet.

The subnets must reach S3 and DynamoDB (gateway endpoints), and Glue, CloudWatch (logs,
monitoring), KMS, STS and, with basic auth, Secrets Manager (interface endpoints, or a NAT gateway);
docs/deploy.md lists them. With `aws.vpc.create_endpoints` the stack creates those endpoints;
otherwise it does not change the VPC."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from constructs import Construct

from icecdc.config.deploy import AwsConfig
from infra.common import allow, lint_ignore

# What Glue does with the job's role to attach its workers to the connection's subnet (the
# statements of AWS's managed AWSGlueServiceRole that concern networking, tagging narrowed to Glue's tag).
GLUE_DESCRIBE_ACTIONS = [
    "ec2:DescribeVpcEndpoints",
    "ec2:DescribeRouteTables",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcAttribute",
]


# The interface endpoints `aws.vpc.create_endpoints` creates, and who needs them: Glue (the planner
# reads the catalog and starts jobs; the jobs read the catalog), CloudWatch metrics (both publish),
# CloudWatch Logs (the jobs' continuous logs), KMS (the jobs' security configuration and SSE-KMS
# dead letters), STS (the jobs' workers and the SDKs' regional credentials). Secrets Manager is added
# with basic auth.
INTERFACE_ENDPOINTS = {
    "Glue": ec2.InterfaceVpcEndpointAwsService.GLUE,
    "Monitoring": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "Kms": ec2.InterfaceVpcEndpointAwsService.KMS,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
}


class Network(Construct):
    """`subnets` in the configured order; `jobs`: the jobs' security group (HTTPS out, and all TCP
    among Glue's workers, which Glue requires); `connection`: the Glue NETWORK connection."""

    def __init__(self, scope: Construct, construct_id: str, *, aws: AwsConfig, password_secret: bool = False) -> None:
        """`password_secret`: the stack's parts read a secret (basic auth), so Secrets Manager is needed."""
        super().__init__(scope, construct_id)
        assert aws.vpc is not None
        zones = [s.availability_zone for s in aws.vpc.subnets]
        self.vpc = ec2.Vpc.from_vpc_attributes(
            self, "Vpc", vpc_id=aws.vpc.vpc_id, availability_zones=zones, private_subnet_ids=[s.id for s in aws.vpc.subnets]
        )
        self.subnets = [
            ec2.Subnet.from_subnet_attributes(
                self, f"Subnet{n}", subnet_id=s.id, availability_zone=s.availability_zone, route_table_id=s.route_table_id
            )
            for n, s in enumerate(aws.vpc.subnets)
        ]
        # the interface endpoints' group, which every group of the stack may reach (see security_group)
        self.endpoints: ec2.SecurityGroup | None = None
        if aws.vpc.create_endpoints:
            self.endpoints = self._endpoints(password_secret)
        self.jobs = self.security_group("Jobs", "icecdc Glue jobs")
        self.jobs.add_ingress_rule(self.jobs, ec2.Port.all_tcp(), "Glue: the job's workers talk to each other")
        self.jobs.add_egress_rule(self.jobs, ec2.Port.all_tcp(), "Glue: the job's workers talk to each other")
        first = aws.vpc.subnets[0]
        self.connection = glue.CfnConnection(
            self,
            "Connection",
            catalog_id=Stack.of(self).account,
            connection_input=glue.CfnConnection.ConnectionInputProperty(
                name=f"{aws.stack_name}-vpc",
                description="icecdc: the Glue jobs' workers in the configured VPC",
                connection_type="NETWORK",
                physical_connection_requirements=glue.CfnConnection.PhysicalConnectionRequirementsProperty(
                    subnet_id=first.id,
                    availability_zone=first.availability_zone,
                    security_group_id_list=[self.jobs.security_group_id],
                ),
            ),
        )
        self.connection_name = f"{aws.stack_name}-vpc"
        zone_reason = "a Glue network connection names its subnet's zone: from aws.vpc.subnets"
        Validations.of(self.connection).acknowledge(Acknowledgment(id="CloudFormation-Validate::W3010", reason=zone_reason))
        lint_ignore(self.connection, "W3010", zone_reason)

    def security_group(self, construct_id: str, description: str) -> ec2.SecurityGroup:
        """A group with HTTPS out only (AWS's endpoints, the domain); more is added where needed. With
        created endpoints, the endpoints admit it."""
        group = ec2.SecurityGroup(self, construct_id, vpc=self.vpc, description=description, allow_all_outbound=False)
        group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS: AWS endpoints and the domain")
        if self.endpoints is not None:
            self.endpoints.add_ingress_rule(group, ec2.Port.tcp(443), description)
        return group

    def _endpoints(self, password_secret: bool) -> ec2.SecurityGroup:
        """What the planner, the jobs and the custom resources call, reachable without a NAT gateway:
        S3 and DynamoDB through gateway endpoints (routes, free), the rest through interface
        endpoints with private DNS (so the SDKs' default endpoints resolve to them)."""
        subnets = ec2.SubnetSelection(subnets=self.subnets)
        for name, gateway in (
            ("S3", ec2.GatewayVpcEndpointAwsService.S3),
            ("DynamoDb", ec2.GatewayVpcEndpointAwsService.DYNAMODB),
        ):
            ec2.GatewayVpcEndpoint(self, f"{name}Endpoint", vpc=self.vpc, service=gateway, subnets=[subnets])
        group = ec2.SecurityGroup(
            self, "Endpoints", vpc=self.vpc, description="icecdc VPC interface endpoints", allow_all_outbound=False
        )
        services = dict(INTERFACE_ENDPOINTS)
        if password_secret:
            services["SecretsManager"] = ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER
        for name, service in services.items():
            ec2.InterfaceVpcEndpoint(
                self,
                f"{name}Endpoint",
                vpc=self.vpc,
                service=service,
                subnets=subnets,
                security_groups=[group],
                private_dns_enabled=True,
                open=False,  # the stack's groups only (security_group), not the whole VPC
            )
        return group

    def allow_glue(self, role: iam.IRole) -> None:
        """What Glue needs of the jobs' role to run them in the connection's subnet."""
        stack = Stack.of(self)
        allow(
            role,
            iam.PolicyStatement(
                actions=["glue:GetConnection"],
                resources=[
                    stack.format_arn(service="glue", resource="catalog"),
                    stack.format_arn(service="glue", resource="connection", resource_name=self.connection_name),
                ],
            ),
        )
        allow(
            role,
            iam.PolicyStatement(actions=GLUE_DESCRIBE_ACTIONS, resources=["*"]),
            wildcards="EC2's Describe actions have no resource-level permissions",
        )
        ec2_arn = f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}"
        allow(
            role,
            iam.PolicyStatement(
                actions=["ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface"],
                resources=[
                    f"{ec2_arn}:network-interface/*",
                    f"{ec2_arn}:subnet/{self.subnets[0].subnet_id}",
                    f"{ec2_arn}:security-group/{self.jobs.security_group_id}",
                ],
            ),
            wildcards="Glue creates and deletes its workers' network interfaces per run: their IDs are not known before",
        )
        allow(
            role,
            iam.PolicyStatement(
                actions=["ec2:CreateTags", "ec2:DeleteTags"],
                resources=[f"{ec2_arn}:network-interface/*"],
                conditions={"ForAllValues:StringEquals": {"aws:TagKeys": ["aws-glue-service-resource"]}},
            ),
            wildcards="Glue tags the network interfaces it creates per run, with its own tag key only (the condition)",
        )

    def allow_lambda(self, role: iam.IRole) -> None:
        """What Lambda needs of a function's role to attach it to the subnets (AWS's documented set)."""
        stack = Stack.of(self)
        allow(
            role,
            iam.PolicyStatement(actions=["ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets"], resources=["*"]),
            wildcards="EC2's Describe actions have no resource-level permissions",
        )
        allow(
            role,
            iam.PolicyStatement(
                actions=[
                    "ec2:CreateNetworkInterface",
                    "ec2:DeleteNetworkInterface",
                    "ec2:AssignPrivateIpAddresses",
                    "ec2:UnassignPrivateIpAddresses",
                ],
                resources=[f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:*/*"],
            ),
            wildcards="Lambda manages the function's network interfaces in this account and region; AWS's documented scope for them",
        )
