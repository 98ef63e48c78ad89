"""ShadowVariant: mirror a share of live traffic to a candidate model on the same endpoint."""

from __future__ import annotations

from constructs import Construct

from optigate.constructs.lmi_model import LmiModel
from optigate.constructs.tuned_endpoint import TunedEndpoint
from optigate.deployment.variant import VariantSettings


class ShadowVariant(Construct):
    """A shadow production variant on a TunedEndpoint.

    SageMaker sends a copy of `sampling_percentage` % of the production variant's requests to the
    shadow and discards its responses (they reach data capture and CloudWatch only), so a candidate
    is measured on real traffic without affecting users. The API allows one production plus one
    shadow variant; anything else is refused at synth time.

    :param endpoint: the endpoint to shadow (exactly one production variant).
    :param model: the candidate LmiModel.
    :param variant: provisioning of the shadow; its `variant_name` defaults to Shadow.
    :param sampling_percentage: share of live requests mirrored, 1-100.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: TunedEndpoint,
        model: LmiModel,
        variant: VariantSettings,
        sampling_percentage: int,
    ) -> None:
        super().__init__(scope, construct_id)
        if variant.variant_name == "AllTraffic":
            variant = VariantSettings(**{**variant.__dict__, "variant_name": "Shadow"})
        self.variant = variant
        self.model = model
        endpoint.add_shadow_variant(model, variant, sampling_percentage)
