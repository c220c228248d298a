"""With `aws.vpc`: whether the subnets reach the AWS services the jobs and the planner call.

They reach them through a NAT route or VPC endpoints. When the stack creates the endpoints
(`aws.vpc.create_endpoints`), none of them may be there already. A second private-DNS interface
endpoint for a service, or a second gateway route to S3 or DynamoDB, fails the deploy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from icecdc.config.deploy import SubnetConfig, VpcConfig
from icecdc.doctor.context import Context
from icecdc.doctor.model import Check, failed, passed, skipped

NAME = "vpc endpoints"
# What the stack's parts call from the subnets (docs/deploy.md, "In a VPC"; infra.network creates
# these with create_endpoints): S3 and DynamoDB through gateways, the rest through interfaces.
GATEWAY_SERVICES = ("s3", "dynamodb")
INTERFACE_SERVICES = ("glue", "monitoring", "logs", "kms", "sts")
SECRETS = "secretsmanager"  # with basic auth: the password's secret


@dataclass(frozen=True)
class Endpoints:
    """The VPC's endpoints by service (the last part of com.amazonaws.<region>.<service>)."""

    interfaces: frozenset[str]  # with private DNS, so the SDKs' default endpoints resolve to them
    gateways: frozenset[tuple[str, str]]  # (service, route table)

    @classmethod
    def of(cls, ec2: Any, vpc_id: str, region: str) -> Endpoints:
        prefix = f"com.amazonaws.{region}."
        interfaces, gateways = set(), set()
        pages = ec2.get_paginator("describe_vpc_endpoints").paginate(
            Filters=[{"Name": "vpc-id", "Values": [vpc_id]}]
        )
        for endpoint in (e for page in pages for e in page["VpcEndpoints"]):
            if endpoint.get("State", "").lower() not in {
                "available",
                "pending",
                "pendingacceptance",
            }:
                continue
            service = str(endpoint["ServiceName"]).removeprefix(prefix)
            if endpoint.get("VpcEndpointType") == "Gateway":
                gateways |= {(service, table) for table in endpoint.get("RouteTableIds", [])}
            elif endpoint.get("PrivateDnsEnabled"):
                interfaces.add(service)
        return cls(frozenset(interfaces), frozenset(gateways))


def check_vpc(ctx: Context) -> Iterator[Check]:
    vpc = ctx.aws.vpc
    if vpc is None:
        yield skipped(NAME, "no aws.vpc: the jobs and the planner reach AWS's public endpoints")
        return
    ec2 = ctx.client("ec2")
    endpoints = Endpoints.of(ec2, vpc.vpc_id, ctx.region)
    interfaces = INTERFACE_SERVICES + (
        (SECRETS,) if ctx.config.opensearch.password_secret_arn else ()
    )
    # The jobs run in the first subnet; the planner (applying batches) and a created domain's
    # provisioning Lambda run in all of them.
    everywhere = ctx.aws.planner_applies or ctx.aws.create_domain
    subnets = vpc.subnets if everywhere else vpc.subnets[:1]
    if vpc.create_endpoints:
        yield endpoint_collisions(vpc, endpoints, interfaces)
        return
    for subnet in subnets:
        table = _route_table(ec2, vpc, subnet)
        if table is not None and _nat(table):
            yield passed(
                NAME, f"routes to a NAT gateway ({table['RouteTableId']})", subject=subnet.id
            )
            continue
        table_id = table["RouteTableId"] if table else None
        missing = [s for s in GATEWAY_SERVICES if (s, table_id) not in endpoints.gateways]
        missing += [s for s in interfaces if s not in endpoints.interfaces]
        if missing:
            yield failed(
                NAME,
                f"no NAT route, and no endpoint for {', '.join(missing)}: the jobs and the "
                "planner would time out calling them",
                "let the stack create the endpoints (aws.vpc.create_endpoints: true, with "
                "each subnet's route_table_id), "
                "or add them, or a NAT gateway route",
                subject=subnet.id,
            )
        else:
            yield passed(
                NAME,
                "gateway and interface endpoints for every service it calls",
                subject=subnet.id,
            )


def endpoint_collisions(vpc: VpcConfig, endpoints: Endpoints, interfaces: tuple[str, ...]) -> Check:
    """What the stack would create that the VPC has already.

    That is a private-DNS interface endpoint for a service, or a gateway on a configured route
    table, `subnets[].route_table_id`, where the stack adds its own.
    """
    taken = [f"{s} (private DNS)" for s in interfaces if s in endpoints.interfaces]
    tables = sorted({s.route_table_id for s in vpc.subnets if s.route_table_id})
    taken += [
        f"{s} on {t}" for s in GATEWAY_SERVICES for t in tables if (s, t) in endpoints.gateways
    ]
    if taken:
        return failed(
            NAME,
            f"{vpc.vpc_id} has endpoints already for {', '.join(taken)}: the stack's own "
            "would collide with them",
            "set aws.vpc.create_endpoints: false (the VPC's endpoints serve the stack; add "
            "the missing ones)",
        )
    return passed(NAME, f"the stack creates the endpoints; {vpc.vpc_id} has none that collide")


def _route_table(ec2: Any, vpc: VpcConfig, subnet: SubnetConfig) -> dict[str, Any] | None:
    """The subnet's route table: the one it is associated with, else the VPC's main table."""
    for filters in (
        [{"Name": "association.subnet-id", "Values": [subnet.id]}],
        [
            {"Name": "vpc-id", "Values": [vpc.vpc_id]},
            {"Name": "association.main", "Values": ["true"]},
        ],
    ):
        tables = ec2.describe_route_tables(Filters=filters)["RouteTables"]
        if tables:
            return dict(tables[0])
    return None


def _nat(table: dict[str, Any]) -> bool:
    """A default route through a NAT gateway, a NAT instance or a transit gateway.

    An internet gateway does not serve a private subnet's Lambda or Glue
    workers, which have no public address.
    """
    return any(
        route.get("DestinationCidrBlock") == "0.0.0.0/0"
        and any(route.get(key) for key in ("NatGatewayId", "InstanceId", "TransitGatewayId"))
        for route in table.get("Routes", [])
    )
