"""LmiModel: a SageMaker model running the LMI container, with a role limited to what it reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Aws, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from optigate.config.models import split_s3_uri
from optigate.constructs import nag
from optigate.constructs.common import allow_ecr_token_and_sagemaker_metrics, allow_source_decrypt
from optigate.serving.images import image_repository_arn


@dataclass(frozen=True)
class ModelNetwork:
    """Where the model container runs. Without it, the container gets no network at all."""

    vpc: ec2.IVpc
    security_groups: list[ec2.ISecurityGroup]
    subnets: ec2.SubnetSelection | None = None


class LmiModel(Construct):
    """A `AWS::SageMaker::Model` serving an uncompressed Hugging Face layout from S3 with an LMI image.

    The execution role may read only the model's S3 prefix (and any `extra_read_uris`, such as
    LoRA adapters), pull only its ECR repository, and write only its own log groups. The model runs
    with network isolation unless a `network` is given.

    :param image_uri: the LMI image (see `optigate.serving.images.image_uri`).
    :param environment: the container environment (see `optigate.serving.lmi.render_environment`).
    :param model_data_uri: S3 prefix of the weights; mounted at /opt/ml/model.
    :param name_prefix: names the model and scopes its log groups (`/aws/sagemaker/*/<prefix>*`).
    :param extra_read_uris: further S3 objects or prefixes the role may read. @default none
    :param network: VPC placement. @default network isolation, no VPC
    :param accept_eula: accept the model's EULA (gated JumpStart models). @default False

    A model prefix or adapter archives encrypted with a customer-managed key need `grant_decrypt` of its ARN.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        image_uri: str,
        environment: dict[str, str],
        model_data_uri: str,
        name_prefix: str,
        extra_read_uris: list[str] | None = None,
        network: ModelNetwork | None = None,
        accept_eula: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.image_uri = image_uri
        self.model_data_uri = model_data_uri.rstrip("/") + "/"
        self.name_prefix = name_prefix
        self.role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"Runs the {name_prefix} LMI model: reads its artifacts, pulls its image, writes its logs",
        )
        self.grant_read([self.model_data_uri, *(extra_read_uris or [])])
        self._grant_image_pull()
        self._grant_logs()

        vpc_config = None
        if network is not None:
            subnets = network.vpc.select_subnets(**_subnet_kwargs(network.subnets)).subnet_ids
            vpc_config = sagemaker.CfnModel.VpcConfigProperty(
                security_group_ids=[group.security_group_id for group in network.security_groups], subnets=subnets
            )
            self._grant_network()

        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            enable_network_isolation=network is None,
            vpc_config=vpc_config,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image_uri,
                environment=environment,
                model_data_source=sagemaker.CfnModel.ModelDataSourceProperty(
                    s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                        s3_uri=self.model_data_uri,
                        s3_data_type="S3Prefix",
                        compression_type="None",
                        model_access_config=(
                            sagemaker.CfnModel.ModelAccessConfigProperty(accept_eula=True) if accept_eula else None
                        ),
                    )
                ),
            ),
        )
        # The role's policy must exist before SageMaker validates access to the artifacts.
        self.model.node.add_dependency(self.role)

    @property
    def model_name(self) -> str:
        return self.model.attr_model_name

    def grant_read(self, uris: list[str]) -> None:
        """Let the execution role read these S3 objects or prefixes (and list only those prefixes)."""
        for uri in uris:
            bucket, key = split_s3_uri(uri)
            is_prefix = uri.endswith("/") or not key
            nag.allow(
                self.role,
                ["s3:GetObject"],
                [f"arn:{Aws.PARTITION}:s3:::{bucket}/{key}{'*' if is_prefix else ''}"],
                why_wildcard="Objects under this model's own S3 prefix: SageMaker downloads the whole prefix.",
            )
            if is_prefix:
                nag.allow(
                    self.role,
                    ["s3:ListBucket"],
                    [f"arn:{Aws.PARTITION}:s3:::{bucket}"],
                    conditions={"StringLike": {"s3:prefix": [f"{key}*"]}},
                )

    def grant_decrypt(self, key_arns: Sequence[str]) -> None:
        """Let the execution role decrypt, through S3, what these customer-managed keys encrypt of what it reads (the
        model's prefix, adapter archives): SageMaker downloads them as this role."""
        allow_source_decrypt(self.role, key_arns)

    def _grant_image_pull(self) -> None:
        nag.allow(
            self.role,
            ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
            [image_repository_arn(self.image_uri)],
        )
        allow_ecr_token_and_sagemaker_metrics(self.role)

    def _grant_logs(self) -> None:
        self._write_logs_of([f"{self.name_prefix}*"])

    def grant_logs(self, names: Sequence[str]) -> None:
        """Let the role write the logs of further endpoints or inference components running this
        model's role (`*` allowed), such as the gate's per-run candidates or adapter components.
        Names the model's own prefix already covers add nothing."""
        uncovered = [name for name in names if not name.split("*")[0].startswith(self.name_prefix)]
        if uncovered:
            self._write_logs_of(uncovered)

    def _write_logs_of(self, names: Sequence[str]) -> None:
        stack = Stack.of(self)
        groups = [
            f"arn:{Aws.PARTITION}:logs:{stack.region}:{stack.account}:log-group:/aws/sagemaker/{kind}/{name}"
            for name in names
            for kind in ("Endpoints", "InferenceComponents")
        ]
        nag.allow(
            self.role,
            ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            [*groups, *(f"{group}:*" for group in groups)],
            why_wildcard="Only the log groups SageMaker creates for this endpoint's name and their streams.",
        )

    def grant_job_logs(self, groups: Sequence[str], job_names: str) -> None:
        """Let the role write the log streams of SageMaker jobs it runs, named `job_names` (an IAM pattern), in
        the shared log `groups` SageMaker uses for that kind of job (a stream per job, named after it)."""
        stack = Stack.of(self)
        arns = [f"arn:{Aws.PARTITION}:logs:{stack.region}:{stack.account}:log-group:{group}" for group in groups]
        nag.allow(
            self.role,
            ["logs:CreateLogGroup", "logs:DescribeLogStreams"],
            [*arns, *(f"{arn}:*" for arn in arns)],
            why_wildcard="The shared log group of this kind of SageMaker job and its streams.",
        )
        nag.allow(
            self.role,
            ["logs:CreateLogStream", "logs:PutLogEvents"],
            [f"{arn}:log-stream:{job_names}" for arn in arns],
            why_wildcard="Only the log streams of this gate's jobs, named after the job.",
        )

    def _grant_network(self) -> None:
        nag.allow(
            self.role,
            [
                "ec2:CreateNetworkInterface",
                "ec2:CreateNetworkInterfacePermission",
                "ec2:DeleteNetworkInterface",
                "ec2:DeleteNetworkInterfacePermission",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeVpcs",
                "ec2:DescribeDhcpOptions",
                "ec2:DescribeSubnets",
                "ec2:DescribeSecurityGroups",
            ],
            ["*"],
            why_wildcard=(
                "SageMaker creates the model's network interfaces in the VPC; the ENI ids are unknown in advance."
            ),
        )


def _subnet_kwargs(selection: ec2.SubnetSelection | None) -> dict:
    if selection is None:
        return {"subnet_type": ec2.SubnetType.PRIVATE_WITH_EGRESS}
    return {
        key: value
        for key, value in {
            "subnet_type": selection.subnet_type,
            "subnet_group_name": selection.subnet_group_name,
            "subnets": selection.subnets,
            "availability_zones": selection.availability_zones,
        }.items()
        if value is not None
    }
