"""The SageMaker operations moto lacks or gets wrong, emulated in front of moto's backend.

moto's SageMaker backend lacks UpdateEndpoint, optimization jobs and inference components, drops
fields such as ``ShadowProductionVariants``, rejects current instance types and reports endpoints
InService / processing jobs Completed at once. :class:`SageMakerEmulator` sees every request first
(optigate.rehearse.patches routes moto's request handler through it, after botocore validation): it
answers the operations it emulates and advances the status of endpoints and jobs as the
:class:`~optigate.rehearse.scenario.Scenario` says, one step per Describe call; moto answers the rest.

- ``state``: errors, a resource's progress, the emulator's state per region
- ``endpoints``: models, endpoint configs, endpoints (create, update, shadow variants)
- ``jobs``: processing jobs and optimization jobs
- ``components``: inference components
- ``benchmarks``: SageMaker's managed benchmark: AI workload configs and AI benchmark jobs
- ``emulator``: :class:`SageMakerEmulator`, all of them behind one ``handle``
"""

from optigate.rehearse.sagemaker.emulator import SageMakerEmulator
from optigate.rehearse.sagemaker.state import SageMakerError

__all__ = ["SageMakerEmulator", "SageMakerError"]
