"""Role-scoped sticky session tiers (seeds/session-tiers.md; DESIGN's routing/lanes.py).

A package rather than one module: settings, metadata parsing, pure decisions,
streaming observation and three storage adapters are separate concerns. See
docs/session-tiers.md for the pipeline integration.
"""

from tiergate.lanes.decide import (
    MAX_OUTSTANDING_TOOLS,
    MAX_TOOL_ID_CHARS,
    Approval,
    RouteCandidate,
    TurnOutcome,
    check_tool_limits,
    is_safe_boundary,
    order_candidates,
)
from tiergate.lanes.errors import CapacityExhausted, SessionTierError, StorageUnavailable
from tiergate.lanes.factory import open_lane_store
from tiergate.lanes.flow import (
    PreparedTurn,
    SessionTiers,
    acquire,
    finalize,
    release_on_failure,
)
from tiergate.lanes.hashing import policy_revision, revision_hash, scope_hash
from tiergate.lanes.lease import Lease
from tiergate.lanes.metadata import TierTurn, classify_model, extract_session_tier
from tiergate.lanes.migrations import migrate
from tiergate.lanes.observe import ToolCallObserver, observe_events, observe_response
from tiergate.lanes.record import LaneRecord
from tiergate.lanes.settings import SessionTierSettings
from tiergate.lanes.store_base import LaneStore, Versioned
from tiergate.lanes.store_memory import MemoryLaneStore
from tiergate.lanes.store_redis import RedisLaneStore
from tiergate.lanes.store_sqlite import SqliteLaneStore

__all__ = [
    "MAX_OUTSTANDING_TOOLS",
    "MAX_TOOL_ID_CHARS",
    "Approval",
    "CapacityExhausted",
    "LaneRecord",
    "LaneStore",
    "Lease",
    "MemoryLaneStore",
    "PreparedTurn",
    "RedisLaneStore",
    "RouteCandidate",
    "SessionTierError",
    "SessionTierSettings",
    "SessionTiers",
    "SqliteLaneStore",
    "StorageUnavailable",
    "TierTurn",
    "ToolCallObserver",
    "TurnOutcome",
    "Versioned",
    "acquire",
    "check_tool_limits",
    "classify_model",
    "extract_session_tier",
    "finalize",
    "is_safe_boundary",
    "migrate",
    "observe_events",
    "observe_response",
    "open_lane_store",
    "order_candidates",
    "policy_revision",
    "release_on_failure",
    "revision_hash",
    "scope_hash",
]
