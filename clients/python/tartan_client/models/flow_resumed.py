from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="FlowResumed")


@_attrs_define
class FlowResumed:
    """`POST /engine/flow/{id}/resume`'s answer.

    Attributes:
        flow_id (str):
        message (str):  Example: Flow resumed.
        reset_attempts (bool):
        resumed (int): Work items that were parked and are pending again.
    """

    flow_id: str
    message: str
    reset_attempts: bool
    resumed: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        flow_id = self.flow_id

        message = self.message

        reset_attempts = self.reset_attempts

        resumed = self.resumed

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "flow_id": flow_id,
                "message": message,
                "reset_attempts": reset_attempts,
                "resumed": resumed,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        flow_id = d.pop("flow_id")

        message = d.pop("message")

        reset_attempts = d.pop("reset_attempts")

        resumed = d.pop("resumed")

        flow_resumed = cls(
            flow_id=flow_id,
            message=message,
            reset_attempts=reset_attempts,
            resumed=resumed,
        )

        flow_resumed.additional_properties = d
        return flow_resumed

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
