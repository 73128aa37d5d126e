"""Channel and key choice: priority, weight, health, cooldown, retry order.

The distributor owns the live health of every channel and key. It turns a
ranked list of models into an ordered, lazily produced list of attempts
(model, channel, key index): highest priority first, weighted random inside a
priority, never the same {channel, key} twice in one request. A soft channel
pin (from session affinity) goes first when it is still valid.

Health rules: a 429 cools the key down for its Retry-After (`cooldown_seconds`
without one), and the channel when every key of it is cooling. A 5xx, timeout
or connection failure is evidence for outlier detection (routing/outlier.py):
the key is ejected after a run or a rate of failures, never beyond
`max_ejection_percent` of a model's keys, and comes back through one trial
request; a channel is out when all its keys are. A 401/403 disables the key,
which is then probed in the background with doubling back-off
(gateway/key_probe.py) and re-enabled when it answers, or by an operator.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from tiergate.config import GatewayConfig, ModelConfig
from tiergate.core.upstream import ChannelState, KeyState, Target
from tiergate.routing import outlier
from tiergate.routing.affinity import ChannelPin, ChannelView
from tiergate.routing.outlier import OutlierPolicy


@dataclass
class Distributor:
    """Live channel/key health plus the attempt order for a request."""

    channels: list[ChannelState]
    cooldown_seconds: float = 30.0
    probe_seconds: float = 30.0  # first wait before probing an auth-disabled key; 0 = never
    probe_max_seconds: float = 1800.0
    outlier: OutlierPolicy = field(default_factory=OutlierPolicy)
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    _by_model: dict[str, list[ChannelState]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: GatewayConfig, **kw: object) -> Distributor:
        chans = []
        for i, c in enumerate(cfg.channels):
            keys = [KeyState(enabled=j not in c.disabled_keys) for j in range(len(c.keys))]
            chans.append(ChannelState(index=i, config=c, keys=keys))
        d = cls(
            channels=chans,
            cooldown_seconds=cfg.server.cooldown_seconds,
            probe_seconds=cfg.server.key_probe_seconds,
            probe_max_seconds=cfg.server.key_probe_max_seconds,
            outlier=OutlierPolicy(**cfg.server.outlier.model_dump()),
            **kw,  # type: ignore[arg-type]
        )
        d.reindex()
        return d

    def reindex(self) -> None:
        self._by_model = {}
        for ch in self.channels:
            for m in ch.config.models:
                self._by_model.setdefault(m, []).append(ch)

    # ---- queries -------------------------------------------------------------

    def channel(self, name: str) -> ChannelState | None:
        for ch in self.channels:
            if ch.name == name:
                return ch
        return None

    def serving(self, model: str) -> list[ChannelState]:
        return self._by_model.get(model, [])

    def is_live(self, model: str) -> bool:
        """A model is live when some enabled channel has an enabled, non-cooling key for
        it, or an ejected key whose trial request is due."""
        now = self.clock()
        chans = self._by_model.get(model, ())
        return any(ch.healthy(now) or self._trial_key(ch, now) is not None for ch in chans)

    def model_config(self, model: str) -> ModelConfig | None:
        chans = self._by_model.get(model)
        return chans[0].config.models[model] if chans else None

    def views(self, model: str) -> list[ChannelView]:
        """What pin validation (routing.affinity) needs about each channel serving `model`."""
        now = self.clock()
        return [
            ChannelView(
                ch.name,
                ch.config.type,
                ch.config.enabled,
                ch.config.weight,
                ch.config.priority,
                ch.healthy(now),
                frozenset(ch.usable_keys(now)),
            )
            for ch in self._by_model.get(model, ())
        ]

    # ---- attempt order -------------------------------------------------------

    def _ordered_channels(self, model: str, now: float) -> list[ChannelState]:
        """Priority groups high to low; weighted random order inside a group."""
        live = [c for c in self._by_model.get(model, ()) if c.healthy(now)]
        out: list[ChannelState] = []
        for prio in sorted({c.config.priority for c in live}, reverse=True):
            group = [c for c in live if c.config.priority == prio]
            weighted = [c for c in group if c.config.weight > 0]
            drained = [c for c in group if c.config.weight <= 0]
            while weighted:
                total = sum(c.config.weight for c in weighted)
                r = self.rng.random() * total
                for i, c in enumerate(weighted):
                    r -= c.config.weight
                    if r <= 0 or i == len(weighted) - 1:
                        out.append(weighted.pop(i))
                        break
            out.extend(drained)  # drained channels only when nothing else is left
        return out

    def attempts(self, models: list[str], pin: ChannelPin | None = None) -> Iterator[Target]:
        """Lazily yield attempts: the (already validated) pin first, then every model's
        channels and keys."""
        tried: set[tuple[int, int]] = set()
        ch = self.channel(pin.channel) if pin is not None and models else None
        if pin is not None and ch is not None and ch.key_usable(pin.key_index, self.clock()):
            tried.add((ch.index, pin.key_index))
            yield Target(models[0], ch, pin.key_index)
        trial_sent = False
        for model in models:
            trial = None if trial_sent else self._claim_trial(model, tried)
            if trial is not None:  # half-open: at most one trial per request, first
                trial_sent = True
                tried.add((trial.channel.index, trial.key_index))
                yield trial
            now = self.clock()
            for ch in self._ordered_channels(model, now):
                keys = ch.usable_keys(self.clock())
                self.rng.shuffle(keys)
                for k in keys:
                    if (ch.index, k) in tried or not ch.key_usable(k, self.clock()):
                        continue
                    tried.add((ch.index, k))
                    yield Target(model, ch, k)
                    break  # one key per channel per pass; other keys retried below
            for ch in self._ordered_channels(model, self.clock()):
                for k in ch.usable_keys(self.clock()):
                    if (ch.index, k) not in tried:
                        tried.add((ch.index, k))
                        yield Target(model, ch, k)

    # ---- health feedback -----------------------------------------------------

    def _trial_key(self, ch: ChannelState, now: float) -> int | None:
        """An ejected key of `ch` whose trial is due, if any."""
        if not ch.config.enabled or ch.cooldown_until > now:
            return None
        for i, k in enumerate(ch.keys):
            if k.enabled and k.cooldown_until <= now and outlier.trial_due(k.outlier, now):
                return i
        return None

    def _claim_trial(self, model: str, tried: set[tuple[int, int]]) -> Target | None:
        now = self.clock()
        for ch in self._by_model.get(model, ()):
            i = self._trial_key(ch, now)
            if i is not None and (ch.index, i) not in tried:
                k = ch.keys[i]
                k.outlier = outlier.claim_trial(self.outlier, k.outlier, now)
                return Target(model, ch, i)
        return None

    def report_success(self, t: Target) -> None:
        k = t.channel.keys[t.key_index]
        k.consecutive_failures = 0
        k.outlier = outlier.record_success(self.outlier, k.outlier, self.clock())

    def unavailable_reason(self, models: list[str]) -> tuple[int, float | None]:
        """Why nothing could be attempted: (429, seconds until a key is free) when
        every serving key is cooling down after rate limits, else (503, seconds
        until the first cooling key or channel is tried again, None when none is
        cooling: every key disabled or every channel switched off)."""
        now = self.clock()
        waits, statuses = [], set()
        for m in models:
            for ch in self._by_model.get(m, ()):
                if not ch.config.enabled:
                    continue
                for k in ch.keys:
                    if k.enabled:
                        until = max(k.cooldown_until, ch.cooldown_until)
                        if k.outlier.ejected:  # back at its trial, or after the one in flight
                            until = max(until, k.outlier.ejected_until, k.outlier.trial_until)
                        if until > now:
                            waits.append(until - now)
                            statuses.add(k.last_status)
        if waits and statuses == {429}:
            return 429, min(waits)
        return 503, min(waits) if waits else None

    def report_failure(
        self, t: Target, *, disable_key: bool, retry_after: float | None, status: int = 0
    ) -> None:
        """Disable the key on 401/403. A rate limit (429) cools the key down for its
        Retry-After (else `cooldown_seconds`), and the channel when every key of it
        is cooling, so the next request skips it quickly: exactly as before outlier
        detection. Anything else (5xx, with or without Retry-After, timeouts,
        connection failures) is counted by outlier detection."""
        now = self.clock()
        k = t.channel.keys[t.key_index]
        if disable_key:
            k.enabled = False
            k.last_status = status
            self._schedule_probe(k, now)
            return
        k.consecutive_failures += 1
        k.last_status = status
        if status == 429:
            wait = retry_after if retry_after is not None else self.cooldown_seconds
            k.cooldown_until = now + wait
            if not t.channel.usable_keys(now):
                t.channel.cooldown_until = k.cooldown_until
            return
        allowed = self._may_eject(t.channel, t.key_index, now)
        k.outlier = outlier.record_failure(self.outlier, k.outlier, now, allowed=allowed)
        if k.outlier.ejected:  # cooling, as the admin API and metrics show it
            k.cooldown_until = max(k.cooldown_until, k.outlier.ejected_until)

    def _may_eject(self, channel: ChannelState, index: int, now: float) -> bool:
        """The max-ejection share, for every model the key serves: ejecting it must
        leave each of them within `max_ejection_percent` and with a usable key."""
        for model in channel.config.models:
            total = ejected = usable_others = 0
            for ch in self._by_model.get(model, ()):
                if not ch.config.enabled:
                    continue
                live = ch.cooldown_until <= now
                for i, k in enumerate(ch.keys):
                    if i in ch.config.disabled_keys:
                        continue
                    total += 1
                    ejected += k.outlier.ejected
                    mine = ch is channel and i == index
                    usable_others += live and not mine and ch.key_usable(i, now)
            if not outlier.may_eject(self.outlier, total, ejected, usable_others):
                return False
        return True

    # ---- probing auth-disabled keys (gateway/key_probe.py) --------------------

    def _schedule_probe(self, k: KeyState, now: float) -> None:
        """Next probe of a key a 401/403 disabled: the first after `probe_seconds`,
        each later one twice as late, at most `probe_max_seconds`."""
        if self.probe_seconds <= 0:
            return
        k.probe_backoff = min(max(k.probe_backoff * 2, self.probe_seconds), self.probe_max_seconds)
        k.probe_at = now + k.probe_backoff

    def due_probes(self) -> list[Target]:
        """One probe target per auth-disabled key whose probe is due: the key's
        channel's first model. Keys the operator disabled are never probed."""
        now = self.clock()
        out = []
        for ch in self.channels:
            if not ch.config.enabled or not ch.config.models:
                continue
            model = next(iter(ch.config.models))
            for i, k in enumerate(ch.keys):
                if k.enabled or i in ch.config.disabled_keys or k.probe_backoff <= 0:
                    continue
                if k.probe_at <= now:
                    out.append(Target(model, ch, i))
        return out

    def probe_answered(self, t: Target) -> None:
        """The provider accepted the key again: back in service."""
        k = t.channel.keys[t.key_index]
        k.enabled = True
        k.consecutive_failures = 0
        k.cooldown_until = 0.0
        k.outlier = outlier.Health()
        k.last_status = 0
        k.probe_backoff = 0.0
        k.probe_at = 0.0

    def probe_failed(self, t: Target, *, refused: bool) -> None:
        """`refused` (401/403 again): back off further; any other failure says
        nothing about the key, so it is probed again after the same wait."""
        k = t.channel.keys[t.key_index]
        now = self.clock()
        if refused:
            self._schedule_probe(k, now)
        else:
            k.probe_at = now + max(k.probe_backoff, self.probe_seconds)

    def key_health(self) -> list[tuple[str, int, str]]:
        """(channel, key index, state) for every key: ok, cooling_down (a rate
        limit, or ejected by outlier detection), auth_failed (probed) or disabled
        (by the operator)."""
        now = self.clock()
        out = []
        for ch in self.channels:
            for i, k in enumerate(ch.keys):
                out.append((ch.name, i, k.status(i in ch.config.disabled_keys, now)))
        return out
