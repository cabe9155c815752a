from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="LaneWaitShown")


@_attrs_define
class LaneWaitShown:
    """The lane a work item's call waits in, in the engine that holds it.

    Attributes:
        breaker (str): `closed`, `open` or `half_open`.
        id (str):
        waiting (int): Calls waiting in the lane in that engine, this one included.
        pause_reason (None | str | Unset):
        paused_ms (int | None | Unset):
    """

    breaker: str
    id: str
    waiting: int
    pause_reason: None | str | Unset = UNSET
    paused_ms: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        breaker = self.breaker

        id = self.id

        waiting = self.waiting

        pause_reason: None | str | Unset
        if isinstance(self.pause_reason, Unset):
            pause_reason = UNSET
        else:
            pause_reason = self.pause_reason

        paused_ms: int | None | Unset
        if isinstance(self.paused_ms, Unset):
            paused_ms = UNSET
        else:
            paused_ms = self.paused_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "breaker": breaker,
                "id": id,
                "waiting": waiting,
            }
        )
        if pause_reason is not UNSET:
            field_dict["pause_reason"] = pause_reason
        if paused_ms is not UNSET:
            field_dict["paused_ms"] = paused_ms

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        breaker = d.pop("breaker")

        id = d.pop("id")

        waiting = d.pop("waiting")

        def _parse_pause_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        pause_reason = _parse_pause_reason(d.pop("pause_reason", UNSET))

        def _parse_paused_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        paused_ms = _parse_paused_ms(d.pop("paused_ms", UNSET))

        lane_wait_shown = cls(
            breaker=breaker,
            id=id,
            waiting=waiting,
            pause_reason=pause_reason,
            paused_ms=paused_ms,
        )

        lane_wait_shown.additional_properties = d
        return lane_wait_shown

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
