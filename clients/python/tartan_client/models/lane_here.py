from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="LaneHere")


@_attrs_define
class LaneHere:
    """A lane in the engine that answers.

    Attributes:
        in_flight (int): Calls of this engine going through the lane now.
        slots_held (int): Slots of the lane this engine holds.
        waiting (int): Calls of this engine waiting in the lane.
        waiting_ms (int | None | Unset): How long the oldest waiting call has waited, in ms.
    """

    in_flight: int
    slots_held: int
    waiting: int
    waiting_ms: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        in_flight = self.in_flight

        slots_held = self.slots_held

        waiting = self.waiting

        waiting_ms: int | None | Unset
        if isinstance(self.waiting_ms, Unset):
            waiting_ms = UNSET
        else:
            waiting_ms = self.waiting_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "in_flight": in_flight,
                "slots_held": slots_held,
                "waiting": waiting,
            }
        )
        if waiting_ms is not UNSET:
            field_dict["waiting_ms"] = waiting_ms

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        in_flight = d.pop("in_flight")

        slots_held = d.pop("slots_held")

        waiting = d.pop("waiting")

        def _parse_waiting_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        waiting_ms = _parse_waiting_ms(d.pop("waiting_ms", UNSET))

        lane_here = cls(
            in_flight=in_flight,
            slots_held=slots_held,
            waiting=waiting,
            waiting_ms=waiting_ms,
        )

        lane_here.additional_properties = d
        return lane_here

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
