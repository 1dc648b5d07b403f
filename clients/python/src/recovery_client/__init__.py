"""Connect an agent runtime to Recovery Console: report workflows, steps and checkpoints; receive decisions.

Standard library only (no Django). ``RecoveryClient`` has one method per
endpoint of Agent API v1 and retries what is safe to retry.
"""

from .client import ApiError, Json, RecoveryClient, Unavailable
from .signing import sign, verify_signature

__all__ = ["ApiError", "Json", "RecoveryClient", "Unavailable", "sign", "verify_signature"]
__version__ = "0.1.0"
