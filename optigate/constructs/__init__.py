"""L3 CDK constructs for tuned LMI endpoints.

They live inside the package because a top-level `constructs/` folder would shadow the
`constructs` library that aws-cdk-lib imports.
"""

from optigate.constructs.lmi_model import LmiModel, ModelNetwork
from optigate.constructs.lora_adapters import AdapterSpec, LoraAdapters
from optigate.constructs.shadow_variant import ShadowVariant
from optigate.constructs.tuned_endpoint import TunedEndpoint
from optigate.deployment.variant import VariantSettings

__all__ = [
    "AdapterSpec",
    "LmiModel",
    "LoraAdapters",
    "ModelNetwork",
    "ShadowVariant",
    "TunedEndpoint",
    "VariantSettings",
]
