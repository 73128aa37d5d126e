"""Everything the simulator remembers between requests, in one place."""

from __future__ import annotations

import itertools
import time

from tiergate.sim.cache import PromptCache
from tiergate.sim.faults import FaultBook
from tiergate.sim.script import ScriptName
from tiergate.sim.settings import SimSettings
from tiergate.sim.stats import SimStats


class SimClock:
    """Wall time plus an offset that tests advance instead of sleeping."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def now(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


class SimState:
    def __init__(self, settings: SimSettings) -> None:
        self.settings = settings
        self.clock = SimClock(settings.clock_offset_seconds)
        self.cache = PromptCache(settings)
        self.faults = FaultBook()
        self.stats = SimStats()
        self.script: ScriptName | None = None
        """The armed agent script (sim/script.py); None answers as usual."""
        self._ids = itertools.count(1)
        self._run = f"{int(time.time()) & 0xFFFFFF:06x}"

    def next_id(self) -> str:
        """A response id unique within this server's life: run prefix + counter."""
        return f"{self._run}{next(self._ids):018x}"

    def reset(self) -> None:
        self.cache.clear()
        self.faults.clear()
        self.stats.clear()
        self.script = None
        self.clock.offset = self.settings.clock_offset_seconds
