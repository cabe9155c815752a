from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.breaker_shown import BreakerShown
    from ..models.lane_here import LaneHere
    from ..models.lane_shown_limits import LaneShownLimits


T = TypeVar("T", bound="LaneShown")


@_attrs_define
class LaneShown:
    """One lane: its limits and state, across engines and here.

    Attributes:
        id (str): `step:<step id>` or `host:<host[:port]>`.
        limits (LaneShownLimits): `concurrency`, `rate`, `burst`, `breaker`, every value explicit.
        paused (bool):
        slots_held (int): Slots held by the live engines (lanes with a concurrency limit).
        slots_wanted (int): Slots the live engines would use: beyond `slots_held`, calls wait.
        breaker (BreakerShown | None | Unset):
        here (LaneHere | None | Unset):
        pause_reason (None | str | Unset):
        paused_until (datetime.datetime | None | Unset): Absent while paused: until resumed.
    """

    id: str
    limits: LaneShownLimits
    paused: bool
    slots_held: int
    slots_wanted: int
    breaker: BreakerShown | None | Unset = UNSET
    here: LaneHere | None | Unset = UNSET
    pause_reason: None | str | Unset = UNSET
    paused_until: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.breaker_shown import BreakerShown
        from ..models.lane_here import LaneHere

        id = self.id

        limits = self.limits.to_dict()

        paused = self.paused

        slots_held = self.slots_held

        slots_wanted = self.slots_wanted

        breaker: dict[str, Any] | None | Unset
        if isinstance(self.breaker, Unset):
            breaker = UNSET
        elif isinstance(self.breaker, BreakerShown):
            breaker = self.breaker.to_dict()
        else:
            breaker = self.breaker

        here: dict[str, Any] | None | Unset
        if isinstance(self.here, Unset):
            here = UNSET
        elif isinstance(self.here, LaneHere):
            here = self.here.to_dict()
        else:
            here = self.here

        pause_reason: None | str | Unset
        if isinstance(self.pause_reason, Unset):
            pause_reason = UNSET
        else:
            pause_reason = self.pause_reason

        paused_until: None | str | Unset
        if isinstance(self.paused_until, Unset):
            paused_until = UNSET
        elif isinstance(self.paused_until, datetime.datetime):
            paused_until = self.paused_until.isoformat()
        else:
            paused_until = self.paused_until

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "limits": limits,
                "paused": paused,
                "slots_held": slots_held,
                "slots_wanted": slots_wanted,
            }
        )
        if breaker is not UNSET:
            field_dict["breaker"] = breaker
        if here is not UNSET:
            field_dict["here"] = here
        if pause_reason is not UNSET:
            field_dict["pause_reason"] = pause_reason
        if paused_until is not UNSET:
            field_dict["paused_until"] = paused_until

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.breaker_shown import BreakerShown
        from ..models.lane_here import LaneHere
        from ..models.lane_shown_limits import LaneShownLimits

        d = dict(src_dict)
        id = d.pop("id")

        limits = LaneShownLimits.from_dict(d.pop("limits"))

        paused = d.pop("paused")

        slots_held = d.pop("slots_held")

        slots_wanted = d.pop("slots_wanted")

        def _parse_breaker(data: object) -> BreakerShown | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                breaker_type_0 = BreakerShown.from_dict(data)

                return breaker_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BreakerShown | None | Unset, data)

        breaker = _parse_breaker(d.pop("breaker", UNSET))

        def _parse_here(data: object) -> LaneHere | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                here_type_0 = LaneHere.from_dict(data)

                return here_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(LaneHere | None | Unset, data)

        here = _parse_here(d.pop("here", UNSET))

        def _parse_pause_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        pause_reason = _parse_pause_reason(d.pop("pause_reason", UNSET))

        def _parse_paused_until(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                paused_until_type_0 = datetime.datetime.fromisoformat(data)

                return paused_until_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        paused_until = _parse_paused_until(d.pop("paused_until", UNSET))

        lane_shown = cls(
            id=id,
            limits=limits,
            paused=paused,
            slots_held=slots_held,
            slots_wanted=slots_wanted,
            breaker=breaker,
            here=here,
            pause_reason=pause_reason,
            paused_until=paused_until,
        )

        lane_shown.additional_properties = d
        return lane_shown

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
