"""qla-serve: Gated DeltaNet prefill for inference servers.

Public ops (see ``qla_serve.api``): :func:`gdn_prefill`, :func:`gdn_decode`, :func:`gdn_conv`,
:func:`gdn_gating`, :func:`plan_prefill`, :class:`GateInputs` (``gdn_prefill(gates=...)``), and the FLA-compatible :func:`chunk_gated_delta_rule`.
"""
from .api import GateInputs, gdn_conv, gdn_decode, gdn_gating, gdn_prefill
from .fla_compat import chunk_gated_delta_rule
from .plan import PrefillPlan, plan_prefill

__version__ = "0.1.0"
__all__ = ["gdn_prefill", "gdn_decode", "gdn_conv", "gdn_gating", "GateInputs", "plan_prefill", "PrefillPlan",
           "chunk_gated_delta_rule", "__version__"]
